/**
 * What stops a pass before the hibernate or wake step, as the checks report it: the checks
 * (spec_check.ts, target_pod.ts, tenancy.ts, opposing.ts, precedence.ts) only read and return a
 * problem; record_problem.ts is the one place a problem becomes a status write, an Event and the
 * pass's result.
 *
 * @module
 */
import type { CocoonHibernation } from "../common/apis/v1/mod.ts";

/** Why a pass does not reach the hibernate or wake step. */
export type RequestProblem =
  /** The spec can never be acted on: Failed with the message, no Event, no requeue. */
  | { problem: "invalid-spec"; message: string }
  /** The pod, or its VM name, is not there yet: Pending (Hibernated and Waking kept), 5 s. */
  | { problem: "target-missing"; message: string }
  /** The pod's VM name is not this request's to act under: a Warning, then Failed. */
  | { problem: "name-refused"; message: string }
  /** An earlier request on the VM drives it the opposite way: Failed (`Conflict`), 5 s. */
  | { problem: "opposing"; earlier: CocoonHibernation; vmName: string }
  /** The set that owns the pod drives its VM: Blocked=True and a Warning when newly written, 5 s. */
  | { problem: "yielded"; message: string };

/** Whether a check's answer is a problem rather than what the pass goes on with. */
export function isProblem<T extends object>(answer: T | RequestProblem): answer is RequestProblem {
  return "problem" in answer;
}
