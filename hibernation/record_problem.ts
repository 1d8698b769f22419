/**
 * The one place a check's problem (problem.ts) becomes a status write, an Event and the pass's
 * result. Each kind writes at most once and announces only what its write changed (the
 * name-refused Warning excepted, recorded on every such pass as before), so a problem that lasts
 * costs no write at all.
 *
 * @module
 */
import type { CocoonHibernation } from "../common/apis/v1/mod.ts";
import type { Clock, EventRecorder, Result, Writer } from "../kube/mod.ts";
import { REASON_VM_NAME_REFUSED, recordRequestEvent } from "./events.ts";
import { markYielded } from "./precedence.ts";
import type { RequestProblem } from "./problem.ts";
import { REQUEUE_INTERVAL_MS } from "./timers.ts";
import type { PhaseTransitions } from "./transitions.ts";

/** What recording a problem writes through. */
export interface ProblemDeps {
  client: Writer;
  recorder: EventRecorder;
  transitions: PhaseTransitions;
  clock: Clock;
}

/** Writes and announces what problem means for hib (see RequestProblem) and returns the result. */
export async function recordProblem(
  deps: ProblemDeps,
  hib: CocoonHibernation,
  problem: RequestProblem,
  signal: AbortSignal,
): Promise<Result> {
  switch (problem.problem) {
    case "invalid-spec":
      await deps.transitions.fail(hib, problem.message, signal);
      return {};
    case "target-missing":
      // The pod's create event (or this requeue, for pods outside the pod cache) resumes us.
      await deps.transitions.pending(hib, problem.message, signal);
      return { requeueAfter: REQUEUE_INTERVAL_MS };
    case "name-refused":
      // The Warning is recorded on every such pass, before the (then unchanged) status write.
      recordRequestEvent(deps.recorder, hib, "Warning", REASON_VM_NAME_REFUSED, problem.message);
      await deps.transitions.fail(hib, problem.message, signal);
      return {};
    case "opposing":
      await deps.transitions.refuseOpposing(hib, problem.earlier, problem.vmName, signal);
      return { requeueAfter: REQUEUE_INTERVAL_MS };
    case "yielded":
      await markYielded(deps.client, deps.recorder, hib, problem.message, deps.clock.now(), signal);
      return { requeueAfter: REQUEUE_INTERVAL_MS };
  }
}
