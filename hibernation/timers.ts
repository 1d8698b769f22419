/**
 * The timers of a request (docs/hibernation.md, "Timers"): the requeue interval of every waiting
 * phase, the Hibernating and Waking deadlines, and the deadline test. Deadlines are measured from
 * the phase clock (Ready.lastTransitionTime, status.ts); time spent yielding to a CocoonSet is
 * taken off that clock when the yield ends (precedence.ts). The per-VM lock's stripe count is in
 * vm_lock.ts.
 *
 * @module
 */
import type { CocoonHibernation, CocoonHibernationPhase } from "../common/apis/v1/mod.ts";
import { phaseEnteredAt } from "./status.ts";

/** How often a request that is waiting on something is looked at again. */
export const REQUEUE_INTERVAL_MS = 5_000;
/** How long Hibernating may last before the request fails. */
export const HIBERNATE_TIMEOUT_MS = 3 * 60_000;
/** How long Waking may last before the request fails. */
export const WAKE_TIMEOUT_MS = 5 * 60_000;

/**
 * Whether hib has been in phase for longer than timeoutMs at nowMs. False when it is in another
 * phase or the phase clock is unknown.
 */
export function phaseDeadlineExceeded(
  hib: CocoonHibernation,
  phase: CocoonHibernationPhase,
  timeoutMs: number,
  nowMs: number,
): boolean {
  if (hib.status?.phase !== phase) return false;
  const entered = phaseEnteredAt(hib);
  return entered !== undefined && nowMs - entered > timeoutMs;
}

/** A duration as Go prints it for whole seconds ("3m0s", "45s"), as the messages quote them. */
export function goDuration(ms: number): string {
  const total = Math.floor(ms / 1000);
  const h = Math.floor(total / 3600);
  const m = Math.floor((total % 3600) / 60);
  const s = total % 60;
  if (h > 0) return `${h}h${m}m${s}s`;
  if (m > 0) return `${m}m${s}s`;
  return `${s}s`;
}
