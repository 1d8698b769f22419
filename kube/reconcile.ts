/**
 * The reconcile contract (controller-runtime pkg/reconcile): a reconciler receives the key of
 * an object and drives the world toward it. Throwing means "retry with backoff"; the result
 * only says when to look again.
 */

import type { ObjectKey } from "./object.ts";
import { errorMessage } from "./errors.ts";

/** Which object to reconcile: its key (namespace is "" for cluster-scoped objects). */
export type Request = ObjectKey;

/** When to reconcile the same key again, absent new events. */
export interface Result {
  /** Requeue through the rate limiter (backoff grows until a plain success). */
  requeue?: boolean;
  /** Requeue after this many milliseconds; resets the backoff. Wins over requeue. */
  requeueAfter?: number;
  /**
   * Priority of the requeue (higher first; see kube/priority_queue.ts). Absent keeps the
   * priority the key was handed out with. Only the priority queue honours it.
   */
  priority?: number;
}

/** The one method a controller's user implements. */
export interface Reconciler {
  /**
   * Reconciles req. signal aborts when the controller stops for good (drain deadline) or a
   * reconciliation timeout fires; pass it to API calls.
   */
  reconcile(req: Request, signal: AbortSignal): Promise<Result | void>;
}

/**
 * An error that retrying cannot fix (invalid spec, missing permission by design): the key is
 * not requeued, and it is counted in controller_runtime_terminal_reconcile_errors_total. Wrap
 * the cause so logs keep it.
 */
export class TerminalError extends Error {
  /** Wraps cause; the message is the cause's. */
  constructor(cause: unknown) {
    super(errorMessage(cause), { cause });
    this.name = "TerminalError";
  }
}

/** True when err is a TerminalError or has one in its cause chain (like Go's errors.Is). */
export function isTerminalError(err: unknown): boolean {
  const seen = new Set<unknown>();
  for (let e = err; e instanceof Error && !seen.has(e); e = e.cause) {
    if (e instanceof TerminalError) return true;
    seen.add(e);
  }
  return false;
}
