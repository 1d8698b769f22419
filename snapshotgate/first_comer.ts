/**
 * Which of two CocoonSets of different namespaces owns a VM name both derive: the one created
 * first, by the operator's one creation order (common/meta/creation_order.ts: the older
 * creationTimestamp; equal times broken by "namespace/name", so the answer is the same in every
 * process; a missing time last). The second comer never creates a pod under the name
 * (cocoonset/create.ts), so it holds no VM state there, and the gate does not let it hold
 * the first comer's own flows hostage either.
 *
 * @module
 */
import { compareCreation } from "../common/meta/creation_order.ts";

/** What the rule reads of a set. */
export interface SetAge {
  namespace: string;
  name: string;
  creationTimestamp?: string;
}

/** Whether a came before b. */
export function cameFirst(a: SetAge, b: SetAge): boolean {
  return compareCreation(a, b) < 0;
}
