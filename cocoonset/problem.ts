/**
 * What keeps a CocoonSet from converging, as a check reports it: the pass collects these and the
 * status names them in its conditions (status.ts).
 */
import type { CONDITION_TYPE_PROGRESSING } from "../common/apis/v1/conditions.ts";
import type { CONDITION_TYPE_READY } from "../common/k8s/condition.ts";

/**
 * Something that keeps the set from converging and that the status must say: the condition it
 * turns False, with a reason and a message naming the cause (InvalidSpec, NameConflict, a
 * failed main, a dead-lettered sub-agent).
 */
export interface StatusProblem {
  condition: typeof CONDITION_TYPE_READY | typeof CONDITION_TYPE_PROGRESSING;
  reason: string;
  message: string;
}
