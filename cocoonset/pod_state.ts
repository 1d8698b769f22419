/**
 * Pod states the reconciler branches on. A managed pod counts as failed on either of two
 * signals: vk-cocoon's lifecycle annotation (`failed`, usually seen first) or the pod phase the
 * kubelet reports. Whether its VM runs is common/meta/vm_liveness.ts.
 */
import type { Pod } from "../kube/mod.ts";
import {
  isPodPhaseFailed,
  LIFECYCLE_STATE_FAILED,
  readLifecycleState,
} from "../common/meta/mod.ts";

/** Warning reason when vk-cocoon reports the main VM's lifecycle as failed. */
export const REASON_POD_LIFECYCLE_FAILED = "PodLifecycleFailed";
/** Warning reason when the main pod's phase is Failed. */
export const REASON_MAIN_AGENT_FAILED = "MainAgentFailed";

/**
 * The Event reason for a failed main pod, or "" when it is not failed. The lifecycle signal wins
 * when both are present.
 */
export function podFailedReason(pod: Pod): string {
  if (readLifecycleState(pod) === LIFECYCLE_STATE_FAILED) return REASON_POD_LIFECYCLE_FAILED;
  if (isPodPhaseFailed(pod)) return REASON_MAIN_AGENT_FAILED;
  return "";
}

/** Whether the pod is terminal by either signal. */
export function isPodFailed(pod: Pod): boolean {
  return podFailedReason(pod) !== "";
}
