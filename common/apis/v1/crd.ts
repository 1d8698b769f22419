/**
 * The two CustomResourceDefinitions, assembled from the names in groupversion.ts and the schemas
 * in schema.ts. scripts/crds.ts renders them to config/crd/bases.
 */
import { COCOON_HIBERNATION_NAMES, COCOON_SET_NAMES, GROUP, VERSION } from "./groupversion.ts";
import type { JSONSchemaProps } from "./openapi.ts";
import { cocoonHibernationSchema, cocoonSetSchema } from "./schema.ts";

/** A printer column of `kubectl get`. */
export interface PrinterColumn {
  jsonPath: string;
  name: string;
  type: "string" | "integer" | "date" | "number" | "boolean";
  description?: string;
  priority?: number;
}

/** The parts of apiextensions.k8s.io/v1 CustomResourceDefinition these CRDs use. */
export interface CustomResourceDefinition {
  apiVersion: "apiextensions.k8s.io/v1";
  kind: "CustomResourceDefinition";
  metadata: { name: string; annotations?: Record<string, string> };
  spec: {
    group: string;
    names: {
      categories: string[];
      kind: string;
      listKind: string;
      plural: string;
      shortNames: string[];
      singular: string;
    };
    scope: "Namespaced" | "Cluster";
    versions: {
      additionalPrinterColumns: PrinterColumn[];
      name: string;
      schema: { openAPIV3Schema: JSONSchemaProps };
      served: boolean;
      storage: boolean;
      subresources: { status: Record<string, never> };
    }[];
  };
}

/** Annotation naming the generator, in place of controller-gen's version stamp. */
export const GENERATOR_ANNOTATION = "cocoonstack.io/generated-by";

interface Names {
  kind: string;
  listKind: string;
  plural: string;
  singular: string;
  shortNames: readonly string[];
  categories: readonly string[];
}

function crd(
  names: Names,
  columns: PrinterColumn[],
  schema: JSONSchemaProps,
): CustomResourceDefinition {
  return {
    apiVersion: "apiextensions.k8s.io/v1",
    kind: "CustomResourceDefinition",
    metadata: {
      name: `${names.plural}.${GROUP}`,
      annotations: { [GENERATOR_ANNOTATION]: "scripts/crds.ts" },
    },
    spec: {
      group: GROUP,
      names: {
        categories: [...names.categories],
        kind: names.kind,
        listKind: names.listKind,
        plural: names.plural,
        shortNames: [...names.shortNames],
        singular: names.singular,
      },
      scope: "Namespaced",
      versions: [{
        additionalPrinterColumns: columns,
        name: VERSION,
        schema: { openAPIV3Schema: structuredClone(schema) },
        served: true,
        storage: true,
        subresources: { status: {} },
      }],
    },
  };
}

const AGE: PrinterColumn = { jsonPath: ".metadata.creationTimestamp", name: "Age", type: "date" };

/** The CocoonSet CRD. */
export function cocoonSetCRD(): CustomResourceDefinition {
  return crd(COCOON_SET_NAMES, [
    { jsonPath: ".status.phase", name: "Phase", type: "string" },
    { jsonPath: ".status.readyAgents", name: "Ready", type: "integer" },
    { jsonPath: ".status.desiredAgents", name: "Desired", type: "integer" },
    AGE,
  ], cocoonSetSchema);
}

/** The CocoonHibernation CRD. */
export function cocoonHibernationCRD(): CustomResourceDefinition {
  return crd(COCOON_HIBERNATION_NAMES, [
    { jsonPath: ".spec.podRef.name", name: "Pod", type: "string" },
    { jsonPath: ".spec.desire", name: "Desire", type: "string" },
    { jsonPath: ".status.phase", name: "Phase", type: "string" },
    AGE,
  ], cocoonHibernationSchema);
}

/** Every CRD with the file name it is written to (controller-gen's naming). */
export function allCRDs(): { file: string; crd: CustomResourceDefinition }[] {
  return [cocoonHibernationCRD(), cocoonSetCRD()].map((c) => ({
    file: `${c.spec.group}_${c.spec.names.plural}.yaml`,
    crd: c,
  }));
}
