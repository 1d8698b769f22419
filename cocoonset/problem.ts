/**
 * What keeps a CocoonSet from converging, as a check reports it: the pass collects these and the
 * status names them in its conditions (status.ts). A check that must stop the pass throws
 * PassStopped; the pass (reconciler.ts) writes the status once and fails with its error.
 */
import type { CONDITION_TYPE_PROGRESSING } from "../common/apis/v1/conditions.ts";
import type { CocoonSetPhase } from "../common/apis/v1/enums.ts";
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

/**
 * A check stopped the pass (the spec is invalid, a pod name is taken, a quota refused the main):
 * its problems are on the pass already. The pass writes the status with `phase` and then fails
 * with `error`, which the controller retries with backoff.
 */
export class PassStopped extends Error {
  constructor(readonly phase: CocoonSetPhase | "", readonly error: Error) {
    super(error.message, { cause: error });
    this.name = "PassStopped";
  }
}
