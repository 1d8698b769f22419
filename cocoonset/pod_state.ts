/**
 * Pod states the reconciler branches on. A managed pod counts as failed on either of two
 * signals: vk-cocoon's lifecycle annotation (`failed`, usually seen first) or the pod phase the
 * kubelet reports. Whether its VM runs is common/meta/vm_liveness.ts.
 */
import type { Pod } from "../kube/mod.ts";
import { isPodTerminal, LifecycleStateFailed, readLifecycleState } from "../common/meta/mod.ts";

/** Warning reason when vk-cocoon reports the main VM's lifecycle as failed. */
export const ReasonPodLifecycleFailed = "PodLifecycleFailed";
/** Warning reason when the main pod's phase is Failed. */
export const ReasonMainAgentFailed = "MainAgentFailed";

/**
 * The Event reason for a failed main pod, or "" when it is not failed. The lifecycle signal wins
 * when both are present.
 */
export function mainPodFailedReason(pod: Pod): string {
  if (readLifecycleState(pod) === LifecycleStateFailed) return ReasonPodLifecycleFailed;
  if (isPodTerminal(pod)) return ReasonMainAgentFailed;
  return "";
}

/** Whether the pod is terminal by either signal. */
export function podIsTerminal(pod: Pod): boolean {
  return mainPodFailedReason(pod) !== "";
}
