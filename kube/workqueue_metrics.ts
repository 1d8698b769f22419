/**
 * client-go's per-queue metrics as controller-runtime's priority queue records them, on the
 * shared families of kube/metrics.ts (kube/priority_queue.ts).
 *
 * @module
 */
import type { Clock } from "./clock.ts";
import {
  workqueueAdds,
  workqueueDepth,
  workqueueLongestRunningProcessor,
  workqueueQueueDuration,
  workqueueRetries,
  workqueueUnfinishedWork,
  workqueueWorkDuration,
} from "./metrics.ts";

/**
 * Distinct priorities one queue may label its depth with before every further depth change is
 * recorded under {@link PRIORITY_OVERFLOW_LABEL} instead (controller-runtime's cardinality cap).
 */
export const MAX_DEPTH_PRIORITIES = 25;
/** The `priority` label value used once a queue has seen too many distinct priorities. */
export const PRIORITY_OVERFLOW_LABEL = "exceeded_cardinality_limit";

/**
 * Records adds, depth, queue latency, work duration, unfinished work and retries of one queue
 * named `name` (label values `name` and `controller` are both the queue name). Depth is labelled
 * by priority; a priority's depth series appears with its first key.
 */
export class QueueMetrics<K> {
  readonly #clock: Clock;
  readonly #labels: { name: string; controller: string };
  /** Depth series by `priority` label value. */
  readonly #depth = new Map<string, ReturnType<typeof workqueueDepth.labels>>();
  readonly #adds;
  readonly #latency;
  readonly #work;
  readonly #unfinished;
  readonly #longest;
  readonly #retries;
  /** Priorities seen so far, until the cap is passed (then undefined for good). */
  #seenPriorities: Set<number> | undefined = new Set();
  /** When each queued key became ready (kept across de-duplicated adds). */
  readonly #addTimes = new Map<K, number>();
  /** When each processing key was handed out. */
  readonly #startTimes = new Map<K, number>();

  constructor(name: string, clock: Clock) {
    this.#clock = clock;
    this.#labels = { name, controller: name };
    const labels = this.#labels;
    this.#adds = workqueueAdds.labels(labels);
    this.#latency = workqueueQueueDuration.labels(labels);
    this.#work = workqueueWorkDuration.labels(labels);
    this.#unfinished = workqueueUnfinishedWork.labels(labels);
    this.#longest = workqueueLongestRunningProcessor.labels(labels);
    this.#retries = workqueueRetries.labels(labels);
    // Publish the series (inc(0) never resets one shared with an earlier queue of this name)
    // so dashboards see the queue before its first add.
    this.#adds.inc(0);
    this.#retries.inc(0);
    workqueueQueueDuration.zero(labels);
    workqueueWorkDuration.zero(labels);
    this.#unfinished.inc(0);
    this.#longest.inc(0);
  }

  /** key became ready to be handed out at priority. */
  add(key: K, priority = 0): void {
    this.#adds.inc();
    this.#depthSeries(priority).inc();
    if (!this.#addTimes.has(key)) this.#addTimes.set(key, this.#clock.now());
  }

  /** key was handed to a worker from priority. */
  get(key: K, priority = 0): void {
    const now = this.#clock.now();
    this.#depthSeries(priority).dec();
    this.#startTimes.set(key, now);
    const added = this.#addTimes.get(key);
    if (added !== undefined) {
      this.#latency.observe((now - added) / 1000);
      this.#addTimes.delete(key);
    }
  }

  /** A ready item moved from one priority to a higher one. */
  changePriority(from: number, to: number): void {
    this.#depthSeries(from).dec();
    this.#depthSeries(to).inc();
  }

  done(key: K): void {
    const started = this.#startTimes.get(key);
    if (started === undefined) return;
    this.#work.observe((this.#clock.now() - started) / 1000);
    this.#startTimes.delete(key);
  }

  retry(): void {
    this.#retries.inc();
  }

  /** Items handed out and not done yet: while there are none the unfinished-work gauges stay 0. */
  get inFlight(): number {
    return this.#startTimes.size;
  }

  updateUnfinishedWork(): void {
    const now = this.#clock.now();
    let total = 0;
    let oldest = 0;
    for (const started of this.#startTimes.values()) {
      const age = (now - started) / 1000;
      total += age;
      if (age > oldest) oldest = age;
    }
    this.#unfinished.set(total);
    this.#longest.set(oldest);
  }

  #depthSeries(priority: number) {
    const label = this.#priorityLabel(priority);
    let series = this.#depth.get(label);
    if (!series) {
      series = workqueueDepth.labels({ ...this.#labels, priority: label });
      this.#depth.set(label, series);
    }
    return series;
  }

  #priorityLabel(priority: number): string {
    const seen = this.#seenPriorities;
    if (seen === undefined) return PRIORITY_OVERFLOW_LABEL;
    seen.add(priority);
    if (seen.size > MAX_DEPTH_PRIORITIES) {
      this.#seenPriorities = undefined;
      return PRIORITY_OVERFLOW_LABEL;
    }
    return String(priority);
  }
}
