/**
 * Pods shaped like the ones cocoon-operator creates (original-behaviour §1.2), for the
 * simulator's tests: labels, the single owner reference, the generation stamp and VM spec
 * annotations, the `agent` container, the three tolerations, the pool (and CPU class) node
 * selector, and the role's placement (main: none / required hostname / preferred hint;
 * sub-agent: bound to the main's node with fork-from; toolbox: none).
 *
 * @module
 */
import type { Pod } from "../../kube/core.ts";
import {
  AnnotationBackend,
  AnnotationCocoonSetGeneration,
  AnnotationForkFrom,
  AnnotationImage,
  AnnotationManaged,
  AnnotationMode,
  AnnotationOS,
  AnnotationSnapshotPolicy,
  AnnotationVMName,
  LabelCocoonSet,
  LabelNodePool,
  LabelRole,
  LabelSlot,
  LabelSnapshotCompatibilityClass,
  RoleMain,
  RoleSubAgent,
  RoleToolbox,
  TolerationKey,
} from "../../common/meta/keys.ts";

/** What varies between operator-built pods in the tests. */
export interface OperatorPodOptions {
  namespace: string;
  cocoonSet: string;
  /** Agent slot number (0 = main) or toolbox name. */
  slot: number | string;
  /** CocoonSet generation stamped on the pod (omitted when undefined). */
  generation?: number;
  pool?: string;
  cpuClass?: string;
  snapshotPolicy?: "always" | "main-only" | "never";
  /** Main only: required `kubernetes.io/hostname In [pinnedNode]`. */
  pinnedNode?: string;
  /** Main only: preferred (weight 100) `kubernetes.io/hostname In [hintNode]`. */
  hintNode?: string;
  /** Sub-agent only: the main's node (hard bind). */
  nodeName?: string;
  /** Extra annotations (restore-from-hibernate, knobs, static toolbox runtime hints...). */
  annotations?: Record<string, string>;
  /** Toolbox only: static mode (not managed). */
  staticToolbox?: boolean;
}

/** The operator's tolerations, exactly. */
const operatorTolerations = [
  { key: TolerationKey, operator: "Exists" as const },
  {
    key: "node.kubernetes.io/not-ready",
    operator: "Exists" as const,
    effect: "NoExecute" as const,
  },
  {
    key: "node.kubernetes.io/unreachable",
    operator: "Exists" as const,
    effect: "NoExecute" as const,
  },
];

/** The VM name the operator gives a pod of this set and slot. */
export function vmNameOf(namespace: string, cocoonSet: string, slot: number | string): string {
  return `vk-${namespace}-${cocoonSet}-${slot}`;
}

/** A pod as the operator would create it. */
export function operatorPod(o: OperatorPodOptions): Pod {
  const toolbox = typeof o.slot === "string";
  const role = toolbox ? RoleToolbox : o.slot === 0 ? RoleMain : RoleSubAgent;
  const name = `${o.cocoonSet}-${o.slot}`;
  const annotations: Record<string, string> = {
    ...(o.generation !== undefined
      ? { [AnnotationCocoonSetGeneration]: String(o.generation) }
      : {}),
    [AnnotationVMName]: vmNameOf(o.namespace, o.cocoonSet, o.slot),
    [AnnotationImage]: "ghcr.io/cocoonstack/cocoon/ubuntu:24.04",
    [AnnotationMode]: toolbox ? (o.staticToolbox ? "static" : "run") : "clone",
    [AnnotationOS]: "linux",
    [AnnotationSnapshotPolicy]: o.snapshotPolicy ?? "always",
    [AnnotationBackend]: "cloud-hypervisor",
    ...(o.staticToolbox ? {} : { [AnnotationManaged]: "true" }),
    ...(role === RoleSubAgent
      ? { [AnnotationForkFrom]: vmNameOf(o.namespace, o.cocoonSet, 0) }
      : {}),
    ...o.annotations,
  };
  const hostname = (node: string) => ({
    matchExpressions: [{ key: "kubernetes.io/hostname", operator: "In" as const, values: [node] }],
  });
  return {
    apiVersion: "v1",
    kind: "Pod",
    metadata: {
      name,
      namespace: o.namespace,
      labels: {
        [LabelCocoonSet]: o.cocoonSet,
        [LabelRole]: role,
        [LabelSlot]: String(o.slot),
        "app.kubernetes.io/name": o.cocoonSet,
      },
      annotations,
      ownerReferences: [{
        apiVersion: "cocoonset.cocoonstack.io/v1",
        kind: "CocoonSet",
        name: o.cocoonSet,
        uid: "00000000-0000-4000-8000-00000000c0c0",
        controller: true,
        blockOwnerDeletion: true,
      }],
    },
    spec: {
      containers: [{
        name: "agent",
        image: "ghcr.io/cocoonstack/placeholder:latest",
        resources: { limits: { cpu: "2", memory: "4Gi" } },
      }],
      terminationGracePeriodSeconds: 1,
      tolerations: operatorTolerations,
      nodeSelector: {
        [LabelNodePool]: o.pool ?? "default",
        ...(o.cpuClass ? { [LabelSnapshotCompatibilityClass]: o.cpuClass } : {}),
      },
      ...(o.nodeName ? { nodeName: o.nodeName } : {}),
      ...(o.pinnedNode
        ? {
          affinity: {
            nodeAffinity: {
              requiredDuringSchedulingIgnoredDuringExecution: {
                nodeSelectorTerms: [hostname(o.pinnedNode)],
              },
            },
          },
        }
        : o.hintNode
        ? {
          affinity: {
            nodeAffinity: {
              preferredDuringSchedulingIgnoredDuringExecution: [{
                weight: 100,
                preference: hostname(o.hintNode),
              }],
            },
          },
        }
        : {}),
    },
  };
}
