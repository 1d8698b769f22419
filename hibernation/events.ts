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
export const REASON_HIBERNATED = "Hibernated";
/** Normal: entered Active, the pod runs its VM again. */
export const REASON_WOKEN_ACTIVE = "WokenActive";
/** Warning: Hibernating for longer than its deadline. */
export const REASON_HIBERNATE_TIMED_OUT = "HibernateTimedOut";
/** Warning: Waking for longer than its deadline. */
export const REASON_WAKE_TIMED_OUT = "WakeTimedOut";
/** Normal: a retry left Failed. */
export const REASON_RETRY_REQUESTED = "RetryRequested";
/**
 * Warning (and Ready=False reason): refused because an earlier request on the same VM drives it
 * the opposite way. The string says "Conflict" for compatibility; the idea is "opposing".
 */
export const REASON_HIBERNATION_CONFLICT = "Conflict";
/** Warning (and Blocked=True reason): the set that owns the pod drives its VM; the request waits. */
export const REASON_YIELDED_TO_COCOON_SET = "YieldedToCocoonSet";
/**
 * Warning: the VM name the target pod shows is not `vk-<namespace>-<pod>` of this request, or
 * another namespace derives it too; the request does not act (or delete) under it.
 */
export const REASON_VM_NAME_REFUSED = "VMNameRefused";

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
