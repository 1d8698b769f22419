/**
 * The Events a CocoonHibernation gets (docs/hibernation.md, "Events"): every reason in one place,
 * and the one way to record one on the request. Where each is recorded: the transitions
 * (transitions.ts), a refused request (problem.ts), a yield to a CocoonSet (precedence.ts) and a
 * refused VM name on deletion (finalizer.ts). Reasons are API: their strings never change.
 *
 * @module
 */
import { type CocoonHibernation, CocoonHibernations } from "../common/apis/v1/mod.ts";
import type { EventRecorder, EventType } from "../kube/mod.ts";

/** Normal: entered Hibernated, the snapshot is in the registry. */
export const ReasonHibernated = "Hibernated";
/** Normal: entered Active, the pod runs its VM again. */
export const ReasonWokenActive = "WokenActive";
/** Warning: Hibernating for longer than its deadline. */
export const ReasonHibernateTimedOut = "HibernateTimedOut";
/** Warning: Waking for longer than its deadline. */
export const ReasonWakeTimedOut = "WakeTimedOut";
/** Normal: a retry left Failed. */
export const ReasonRetryRequested = "RetryRequested";
/**
 * Warning (and Ready=False reason): refused because an earlier request on the same VM drives it
 * the opposite way. The string says "Conflict" for compatibility; the idea is "opposing".
 */
export const ReasonHibernationConflict = "Conflict";
/** Warning (and Blocked=True reason): the set that owns the pod drives its VM; the request waits. */
export const ReasonYieldedToCocoonSet = "YieldedToCocoonSet";
/**
 * Warning: the VM name the target pod shows is not `vk-<namespace>-<pod>` of this request, or
 * another namespace derives it too; the request does not act (or delete) under it.
 */
export const ReasonVMNameRefused = "VMNameRefused";

/** Records an Event on hib (component `cocoon-operator`, the recorder's). */
export function recordRequestEvent(
  recorder: EventRecorder,
  hib: CocoonHibernation,
  type: EventType,
  reason: string,
  message: string,
): void {
  recorder.event({ object: hib, resource: CocoonHibernations }, type, reason, message);
}
