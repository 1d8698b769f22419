/**
 * Time source for the workqueue, rate limiters and controller. Injecting it lets tests drive
 * backoffs and delayed requeues deterministically instead of sleeping.
 */

/** Opaque id of a scheduled callback. */
export type TimerId = number;

/** Wall clock in milliseconds plus one-shot timers. */
export interface Clock {
  /** Milliseconds since an arbitrary, fixed origin. */
  now(): number;
  /** Runs fn once after ms milliseconds. */
  setTimeout(fn: () => void, ms: number): TimerId;
  /** Cancels a timer; unknown or already-fired ids are ignored. */
  clearTimeout(id: TimerId): void;
}

/** The process clock: Date.now() and the global timers. */
export const realClock: Clock = {
  now: () => Date.now(),
  // Deno's timers return numbers; Node typings (pulled in by npm packages) say otherwise. A
  // deadline already past is due now (Deno warns on a negative delay).
  setTimeout: (fn, ms) => setTimeout(fn, Math.max(0, ms)) as unknown as TimerId,
  clearTimeout: (id) => clearTimeout(id),
};

/**
 * Waits ms on clock, or less if signal aborts first; never rejects. The shared pause of the
 * retry loops (leader election, event writer).
 */
export function sleep(clock: Clock, ms: number, signal: AbortSignal): Promise<void> {
  if (signal.aborted) return Promise.resolve();
  return new Promise((resolve) => {
    const done = () => {
      clock.clearTimeout(timer);
      signal.removeEventListener("abort", done);
      resolve();
    };
    const timer = clock.setTimeout(done, ms);
    signal.addEventListener("abort", done, { once: true });
  });
}
