/**
 * The priority queue's two timers (kube/priority_queue.ts): the one timer that wakes the queue at
 * its earliest delayed key, and the refresh of the unfinished-work gauges while keys are being
 * processed.
 *
 * @module
 */
import type { Clock, TimerId } from "./clock.ts";

/** client-go refreshes the unfinished-work gauges every 500 ms. */
export const DEFAULT_UNFINISHED_WORK_UPDATE_PERIOD_MS = 500;
/** Timers overflow past 2^31-1 ms (and would fire at once). */
const MAX_TIMER_MS = 2 ** 31 - 1;

/**
 * One timer armed for the earliest deadline a queue waits for. Arming for a later deadline
 * keeps the current timer (firing early only makes the queue re-arm); a deadline beyond the
 * timer range is waited for in steps.
 */
export class EarliestDeadlineTimer {
  readonly #clock: Clock;
  readonly #onFire: () => void;
  #timer: TimerId | undefined;
  /** When the armed timer fires; Infinity when none is armed. */
  #firesAt = Infinity;

  /** onFire runs when the timer fires; it re-arms (or not) itself through arm(). */
  constructor(clock: Clock, onFire: () => void) {
    this.#clock = clock;
    this.#onFire = onFire;
  }

  /** Makes sure the queue wakes by at (epoch ms); undefined: nothing waits, no timer. */
  arm(at: number | undefined): void {
    if (at === undefined) {
      this.cancel();
      return;
    }
    if (this.#timer !== undefined && this.#firesAt <= at) return;
    if (this.#timer !== undefined) this.#clock.clearTimeout(this.#timer);
    const now = this.#clock.now();
    const wait = Math.min(MAX_TIMER_MS, Math.max(0, at - now));
    this.#firesAt = now + wait;
    this.#timer = this.#clock.setTimeout(() => {
      this.#timer = undefined;
      this.#firesAt = Infinity;
      this.#onFire();
    }, wait);
  }

  cancel(): void {
    if (this.#timer !== undefined) this.#clock.clearTimeout(this.#timer);
    this.#timer = undefined;
    this.#firesAt = Infinity;
  }
}

/** What the ticker refreshes (kube/workqueue_metrics.ts QueueMetrics). */
export interface UnfinishedWorkGauges {
  /** Keys handed out and not done yet. */
  readonly inFlight: number;
  updateUnfinishedWork(): void;
}

/**
 * Refreshes the unfinished-work gauges every period (client-go's 500 ms) while keys are being
 * processed, and once more after the last is done (back to 0). Unlike client-go the timer stops
 * while nothing is in flight: gauges that stay 0 need no refresh, and an idle operator then
 * wakes for nothing. Stopped for good by stop() (the queue's shutdown).
 */
export class UnfinishedWorkTicker {
  readonly #metrics: UnfinishedWorkGauges;
  readonly #clock: Clock;
  readonly #periodMs: number;
  #timer: TimerId | undefined;
  #stopped = false;

  constructor(metrics: UnfinishedWorkGauges, clock: Clock, periodMs: number) {
    this.#metrics = metrics;
    this.#clock = clock;
    this.#periodMs = periodMs;
  }

  /** A key was handed out: make sure a refresh is coming. */
  schedule(): void {
    if (this.#timer !== undefined || this.#stopped) return;
    this.#timer = this.#clock.setTimeout(() => {
      this.#timer = undefined;
      if (this.#stopped) return;
      this.#metrics.updateUnfinishedWork();
      if (this.#metrics.inFlight > 0) this.schedule();
    }, this.#periodMs);
  }

  stop(): void {
    this.#stopped = true;
    if (this.#timer !== undefined) this.#clock.clearTimeout(this.#timer);
    this.#timer = undefined;
  }
}
