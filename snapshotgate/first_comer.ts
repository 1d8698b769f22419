/**
 * Which of two CocoonSets of different namespaces owns a VM name both derive: the one created
 * first (older creationTimestamp; equal times, or a missing one, broken by "namespace/name"
 * order, so the answer is the same in every process). The second comer never creates a pod
 * under the name (cocoonset/vm_collision.ts), so it holds no VM state there, and the gate does
 * not let it hold the first comer's own flows hostage either.
 *
 * @module
 */

/** What the rule reads of a set. */
export interface SetAge {
  namespace: string;
  name: string;
  creationTimestamp?: string;
}

/** Whether a came before b. */
export function cameFirst(a: SetAge, b: SetAge): boolean {
  const at = a.creationTimestamp ?? "";
  const bt = b.creationTimestamp ?? "";
  if (at !== bt) return at !== "" && (bt === "" || at < bt);
  return `${a.namespace}/${a.name}` < `${b.namespace}/${b.name}`;
}
