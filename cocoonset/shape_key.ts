/**
 * Which dry-run verdicts one set's pods can borrow from another's: the key of a pod shape as the
 * API server's validation sees it. Pods of two sets differ in their set's name (pod name, labels,
 * annotations), their owner and their generation stamp; the API server checks a name only for its
 * length and characters, and a set's name is already a valid DNS subdomain, so a name of the same
 * length is as valid as any other. The key therefore keeps the namespace and the whole spec as
 * built, and replaces the set's name in metadata by a placeholder of the same length; owner
 * references and the generation stamp are left out.
 *
 * Spec fields never contain the set's name (the builders take it only for metadata), so nothing
 * in the spec is rewritten: two shapes share a key only when their specs are equal.
 */
import type { Pod } from "../kube/mod.ts";
import { ANNOTATION_COCOON_SET_GENERATION } from "../common/meta/mod.ts";

/** Verified shapes kept per process before the set is cleared (a bound, not a cache policy). */
export const MAX_VERIFIED_SHAPES = 10_000;

/** The key of pod (built for the set named setName) for sharing dry-run verdicts. */
export function shapeKey(setName: string, pod: Pod): string {
  const mask = setName === ""
    ? (v: string) => v
    : (v: string) => v.split(setName).join("\u0000".repeat(setName.length));
  const maskAll = (m: Record<string, string> | undefined) => {
    const out: Record<string, string> = {};
    for (const k of Object.keys(m ?? {}).sort()) {
      if (k === ANNOTATION_COCOON_SET_GENERATION) continue;
      out[k] = mask(m![k]);
    }
    return out;
  };
  return JSON.stringify({
    namespace: pod.metadata.namespace ?? "",
    name: mask(pod.metadata.name ?? ""),
    labels: maskAll(pod.metadata.labels),
    annotations: maskAll(pod.metadata.annotations),
    spec: pod.spec,
  });
}

/** Remembers a verified key, keeping the set bounded. */
export function rememberShape(verified: Set<string>, key: string): void {
  if (verified.size >= MAX_VERIFIED_SHAPES) verified.clear();
  verified.add(key);
}
