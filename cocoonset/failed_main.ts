/**
 * The Failed main step: a main whose VM failed (lifecycle `failed`, usually seen first) or whose
 * pod phase is Failed ends the pass; a main Ready again after phase Failed is announced.
 */
import type { Pod } from "../kube/mod.ts";
import {
  ANNOTATION_LIFECYCLE_STATE_MESSAGE,
  isPodPhaseFailed,
  isPodReady,
  LIFECYCLE_STATE_FAILED,
  readLifecycleState,
} from "../common/meta/mod.ts";
import { CONDITION_TYPE_READY } from "../common/k8s/condition.ts";
import { lifecycleStateFailedObservedTotal } from "../metrics/metrics.ts";
import { deletePod, emit, GO_ON, podRef, type SetPass, type Step, stop } from "./pass.ts";
import { podSpecMatchesAgent } from "./drift.ts";
import { ensureSpecBuildable } from "./validate.ts";

/** Warning reason: vk-cocoon reports the main VM's lifecycle as failed. */
export const REASON_POD_LIFECYCLE_FAILED = "PodLifecycleFailed";
/** Warning reason: the main pod's phase is Failed. */
export const REASON_MAIN_AGENT_FAILED = "MainAgentFailed";
/** Normal reason: the failed main is Ready again. */
export const REASON_RECOVERED_FROM_FAILURE = "RecoveredFromFailure";

/** The Warning reason of a failed main pod (the lifecycle signal first), "" when not failed. */
export function podFailedReason(pod: Pod): string {
  if (readLifecycleState(pod) === LIFECYCLE_STATE_FAILED) return REASON_POD_LIFECYCLE_FAILED;
  if (isPodPhaseFailed(pod)) return REASON_MAIN_AGENT_FAILED;
  return "";
}

/**
 * A failed main that no longer matches the spec is recreated (it would never turn Ready);
 * otherwise the set is Failed with a Warning naming the cause.
 */
export async function reconcileFailedMain(pass: SetPass): Promise<Step> {
  const { cs } = pass;
  const main = pass.classified.main;
  if (!main) return GO_ON;
  const reason = podFailedReason(main);
  if (!reason) {
    if (cs.status?.phase === "Failed" && isPodReady(main)) {
      const message = `main pod ${podRef(main)} is Ready again`;
      emit(pass, "Normal", REASON_RECOVERED_FROM_FAILURE, message);
    }
    return GO_ON;
  }
  if (!podSpecMatchesAgent(main, cs, 0)) {
    const buildable = await ensureSpecBuildable(pass);
    if (buildable.stop) return buildable;
    await deletePod(pass, main, "failed, drifted main agent");
    return stop({ requeue: true });
  }
  if (reason === REASON_POD_LIFECYCLE_FAILED) {
    lifecycleStateFailedObservedTotal.labels({ phase: cs.status?.phase || "Pending" }).inc();
  }
  const detail = main.metadata.annotations?.[ANNOTATION_LIFECYCLE_STATE_MESSAGE] ||
    (main.status?.phase ?? "");
  const message = `main pod ${podRef(main)}: ${detail}`;
  emit(pass, "Warning", reason, message);
  // The failure is what Ready says, ahead of any other problem.
  pass.problems.unshift({ condition: CONDITION_TYPE_READY, reason, message });
  return stop({}, "Failed");
}
