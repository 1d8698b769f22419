/**
 * The repository's kustomize folders as a user composes them: config/default names the
 * namespace once, the bases under it name none, and the optional parts (config/prometheus,
 * config/certmanager, config/network-policy, config/ha, the sharded members) are components
 * listed in an overlay. A test that needs a part on its own, or a combination, writes a
 * throw-away overlay with {@linkcode writeOverlay} and builds or applies that.
 *
 * @module
 */
import { relative } from "node:path";
import { load, loadAll } from "js-yaml";
import { dump } from "js-yaml";
import type { ControlPlane } from "./control_plane.ts";

/** The repository root, with a trailing slash. */
export const repoRoot = new URL("../../", import.meta.url).pathname;

/** A built object, as far as the tests read it. */
export interface BuiltObject {
  apiVersion: string;
  kind: string;
  metadata: {
    name: string;
    namespace?: string;
    labels?: Record<string, string>;
    annotations?: Record<string, string>;
  };
  [field: string]: unknown;
}

/** Whether a repository folder holds a kustomize Component (else a Kustomization). */
export async function isComponent(dir: string): Promise<boolean> {
  const text = await Deno.readTextFile(`${repoRoot}${dir}/kustomization.yaml`);
  return (load(text) as { kind?: string }).kind === "Component";
}

export interface OverlaySpec {
  /** Repository folders (relative to the root) listed as resources. */
  resources: string[];
  /** Repository folders listed as components, applied after the resources. */
  components?: string[];
  /**
   * A namespace for the resources, for folders that carry none of their own (config/rbac on
   * its own). The components then see it, as they see config/default's.
   */
  namespace?: string;
}

/**
 * Writes a throw-away overlay of repository folders into a new temporary folder and returns
 * it (kustomize accepts only relative paths, so they are written relative to that folder).
 */
export async function writeOverlay(spec: OverlaySpec): Promise<string> {
  const dir = await Deno.makeTempDir({ prefix: "overlay-" });
  const rel = (from: string, folder: string) => relative(from, `${repoRoot}${folder}`);
  let resources = spec.resources.map((r) => rel(dir, r));
  if (spec.namespace !== undefined) {
    // kustomize runs a kustomization's own namespace after its components, so the components'
    // replacements would find no namespace yet: the namespace goes one level down.
    const inner = `${dir}/namespaced`;
    await Deno.mkdir(inner);
    await Deno.writeTextFile(
      `${inner}/kustomization.yaml`,
      dump({
        apiVersion: "kustomize.config.k8s.io/v1beta1",
        kind: "Kustomization",
        namespace: spec.namespace,
        resources: spec.resources.map((r) => rel(inner, r)),
      }),
    );
    resources = ["namespaced"];
  }
  await Deno.writeTextFile(
    `${dir}/kustomization.yaml`,
    dump({
      apiVersion: "kustomize.config.k8s.io/v1beta1",
      kind: "Kustomization",
      resources,
      ...(spec.components?.length ? { components: spec.components.map((c) => rel(dir, c)) } : {}),
    }),
  );
  return dir;
}

/** Parses a YAML stream of objects, dropping empty documents. */
export function parseObjects(yaml: string): BuiltObject[] {
  return (loadAll(yaml) as (BuiltObject | null)[]).filter((o): o is BuiltObject => o !== null);
}

/** The objects `kubectl kustomize <folder>` builds (an absolute path, or one under the root). */
export async function kustomizeBuild(cp: ControlPlane, folder: string): Promise<BuiltObject[]> {
  const path = folder.startsWith("/") ? folder : `${repoRoot}${folder}`;
  const r = await cp.kubectl(["kustomize", path]);
  if (r.code !== 0) throw new Error(`kubectl kustomize ${folder}: ${r.stderr}`);
  return parseObjects(r.stdout);
}

/** Applies the Namespace objects a folder builds (a server-side dry run needs them first). */
export async function applyNamespaces(cp: ControlPlane, folder: string): Promise<void> {
  const namespaces = (await kustomizeBuild(cp, folder)).filter((o) => o.kind === "Namespace");
  if (namespaces.length === 0) throw new Error(`${folder} builds no Namespace`);
  for (const ns of namespaces) {
    const r = await cp.kubectl(["apply", "-f", "-"], { stdin: JSON.stringify(ns) });
    if (r.code !== 0) throw new Error(`applying namespace ${ns.metadata.name}: ${r.stderr}`);
  }
}
