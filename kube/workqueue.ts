import { type Clock, realClock } from "./clock.ts";
import { type HeapEntry, IndexedHeap } from "./_indexed_heap.ts";
import type { AddOptions, ControllerQueue, PriorityItem } from "./queue.ts";
import {
  DEFAULT_UNFINISHED_WORK_UPDATE_PERIOD_MS,
  EarliestDeadlineTimer,
  UnfinishedWorkTicker,
} from "./queue_timers.ts";
import { defaultControllerRateLimiter, type RateLimiter } from "./rate_limiter.ts";
import { QueueMetrics } from "./workqueue_metrics.ts";

/** Options of a {@link WorkQueue}. */
export interface WorkQueueOptions<K extends string = string> {
  /**
   * Metric label value for both `name` and `controller` (as controller-runtime sets them).
   * Without a name the queue records no metrics and runs no timer.
   */
  name?: string;
  clock?: Clock;
  /** Used by addRateLimited; defaults to client-go's DefaultControllerRateLimiter. */
  rateLimiter?: RateLimiter<K>;
  /** How often the unfinished-work gauges are refreshed (client-go: 500 ms). */
  unfinishedWorkUpdatePeriodMs?: number;
}

/**
 * A rate-limited, delaying work queue of keys with client-go's guarantees:
 * - a key is handed to at most one worker at a time (`processing`);
 * - adding a key that is already queued is a no-op (`dirty` dedup);
 * - adding a key while a worker holds it marks it dirty, and done() queues it again, so the
 *   change is never lost and never handled concurrently.
 * Delayed adds share one timer armed for the earliest deadline of a min-heap.
 */
export class WorkQueue<K extends string = string> implements ControllerQueue<K> {
  readonly name: string | undefined;
  readonly #clock: Clock;
  readonly #rateLimiter: RateLimiter<K>;
  readonly #fifo = new Fifo<K>();
  /** Keys that need processing: queued, or re-added while processing. */
  readonly #dirty = new Set<K>();
  /** Keys currently held by a worker (between get and done). */
  readonly #processing = new Set<K>();
  /** Pending get() calls, oldest first; only non-empty while the FIFO is empty. */
  readonly #getters: ((key: K | undefined) => void)[] = [];
  #shuttingDown = false;
  #drain = false;
  #drainWaiters: (() => void)[] = [];
  readonly #metrics: QueueMetrics<K> | undefined;
  readonly #metricsTicker: UnfinishedWorkTicker | undefined;
  readonly #delayed = new DelayHeap<K>();
  readonly #delayTimer: EarliestDeadlineTimer;

  constructor(opts: WorkQueueOptions<K> = {}) {
    this.name = opts.name;
    this.#clock = opts.clock ?? realClock;
    this.#rateLimiter = opts.rateLimiter ?? defaultControllerRateLimiter<K>(this.#clock);
    this.#delayTimer = new EarliestDeadlineTimer(this.#clock, () => this.#onDelayTimer());
    if (opts.name) {
      this.#metrics = new QueueMetrics<K>(opts.name, this.#clock);
      this.#metricsTicker = new UnfinishedWorkTicker(
        this.#metrics,
        this.#clock,
        opts.unfinishedWorkUpdatePeriodMs ?? DEFAULT_UNFINISHED_WORK_UPDATE_PERIOD_MS,
      );
    }
  }

  /** Queues key unless it is already waiting; ignored after shutdown. */
  add(key: K): void {
    if (this.#shuttingDown) return;
    if (this.#dirty.has(key)) return;
    this.#metrics?.add(key);
    this.#dirty.add(key);
    // A worker holds it: done() will queue it again.
    if (this.#processing.has(key)) return;
    this.#fifo.push(key);
    this.#dispatch();
  }

  /** Keys waiting to be handed out (not counting processing or delayed ones). */
  len(): number {
    return this.#fifo.length;
  }

  /**
   * Hands out the next key, waiting until one is available. Resolves undefined once the
   * queue is shut down and empty. The caller must call done(key) when finished.
   */
  get(): Promise<K | undefined> {
    if (this.#fifo.length > 0) return Promise.resolve(this.#take());
    if (this.#shuttingDown) return Promise.resolve(undefined);
    return new Promise((resolve) => this.#getters.push(resolve));
  }

  /** Marks key finished; if it was re-added meanwhile it goes back into the queue. */
  done(key: K): void {
    this.#metrics?.done(key);
    this.#processing.delete(key);
    if (this.#dirty.has(key)) {
      this.#fifo.push(key);
      this.#dispatch();
    } else if (this.#processing.size === 0) {
      this.#wakeDrainers();
    }
  }

  /** Adds key after ms milliseconds; an earlier pending deadline for the same key wins. */
  addAfter(key: K, ms: number): void {
    if (this.#shuttingDown) return;
    this.#metrics?.retry();
    if (!(ms > 0)) {
      this.add(key);
      return;
    }
    this.#delayed.upsert(key, this.#clock.now() + ms);
    this.#delayTimer.arm(this.#delayed.peekAt());
  }

  /** Adds key after the rate limiter's delay for it (one more failure). */
  addRateLimited(key: K): void {
    this.addAfter(key, this.#rateLimiter.when(key));
  }

  /**
   * The priority queue's add, as controller-runtime maps it onto a plain queue: rate-limited
   * wins over a delay, and the priority is ignored.
   */
  addWithOpts(opts: AddOptions, ...keys: K[]): void {
    for (const key of keys) {
      if (opts.rateLimited) this.addRateLimited(key);
      else if ((opts.after ?? 0) > 0) this.addAfter(key, opts.after!);
      else this.add(key);
    }
  }

  /** get() for callers written against the priority queue: every key has priority 0. */
  getWithPriority(): Promise<PriorityItem<K> | undefined> {
    return this.get().then((key) => key === undefined ? undefined : { key, priority: 0 });
  }

  /** Resets key's backoff; call after a successful pass. */
  forget(key: K): void {
    this.#rateLimiter.forget(key);
  }

  /** Failures recorded for key by the rate limiter. */
  numRequeues(key: K): number {
    return this.#rateLimiter.numRequeues(key);
  }

  /** Keys waiting for a delayed add (diagnostics and tests). */
  delayedLen(): number {
    return this.#delayed.size;
  }

  shuttingDown(): boolean {
    return this.#shuttingDown;
  }

  /**
   * Stops accepting adds, drops pending delayed adds and wakes idle getters with undefined.
   * Keys already queued are still handed out by get(); done() keeps working.
   */
  shutDown(): void {
    this.#drain = false;
    this.#beginShutdown();
    this.#wakeDrainers();
  }

  /** Like shutDown, then resolves once no key is being processed. */
  shutDownWithDrain(): Promise<void> {
    this.#drain = true;
    this.#beginShutdown();
    if (this.#processing.size === 0) return Promise.resolve();
    return new Promise((resolve) => this.#drainWaiters.push(resolve));
  }

  #beginShutdown(): void {
    this.#shuttingDown = true;
    this.#delayed.clear();
    this.#delayTimer.cancel();
    this.#metricsTicker?.stop();
    // Getters only wait while the FIFO is empty, so each of them sees "shut down".
    for (const resolve of this.#getters.splice(0)) resolve(undefined);
  }

  #wakeDrainers(): void {
    // A plain shutDown() cancels a pending drain, as in client-go.
    if (this.#processing.size !== 0 && this.#drain) return;
    for (const resolve of this.#drainWaiters.splice(0)) resolve();
  }

  #take(): K {
    const key = this.#fifo.shift();
    this.#metrics?.get(key);
    this.#metricsTicker?.schedule();
    this.#processing.add(key);
    this.#dirty.delete(key);
    return key;
  }

  #dispatch(): void {
    while (this.#getters.length > 0 && this.#fifo.length > 0) {
      const resolve = this.#getters.shift()!;
      resolve(this.#take());
    }
  }

  #onDelayTimer(): void {
    const now = this.#clock.now();
    for (
      let at = this.#delayed.peekAt();
      at !== undefined && at <= now;
      at = this.#delayed.peekAt()
    ) {
      this.add(this.#delayed.pop());
    }
    this.#delayTimer.arm(this.#delayed.peekAt());
  }
}

/** Array-backed FIFO with O(1) amortised shift. */
class Fifo<T> {
  #items: T[] = [];
  #head = 0;

  get length(): number {
    return this.#items.length - this.#head;
  }

  push(item: T): void {
    this.#items.push(item);
  }

  shift(): T {
    const item = this.#items[this.#head];
    this.#head++;
    // Compact once the consumed prefix dominates, keeping memory proportional to the queue.
    if (this.#head >= 1024 && this.#head * 2 >= this.#items.length) {
      this.#items = this.#items.slice(this.#head);
      this.#head = 0;
    }
    return item;
  }
}

interface DelayEntry<K> extends HeapEntry {
  key: K;
  at: number;
  /** Insertion order, so equal deadlines come out first-in first-out. */
  seq: number;
}

/** Min-heap of (deadline, key) with at most one entry per key. */
class DelayHeap<K> {
  readonly #heap = new IndexedHeap<DelayEntry<K>>((a, b) =>
    a.at < b.at || (a.at === b.at && a.seq < b.seq)
  );
  readonly #byKey = new Map<K, DelayEntry<K>>();
  #seq = 0;

  get size(): number {
    return this.#heap.size;
  }

  /** Inserts key, or moves its deadline earlier if it is already waiting. */
  upsert(key: K, at: number): void {
    const existing = this.#byKey.get(key);
    if (existing) {
      if (at < existing.at) {
        existing.at = at;
        this.#heap.fix(existing);
      }
      return;
    }
    const entry: DelayEntry<K> = { key, at, seq: this.#seq++, heapIndex: -1 };
    this.#heap.push(entry);
    this.#byKey.set(key, entry);
  }

  peekAt(): number | undefined {
    return this.#heap.peek()?.at;
  }

  pop(): K {
    const top = this.#heap.pop()!;
    this.#byKey.delete(top.key);
    return top.key;
  }

  clear(): void {
    this.#heap.clear();
    this.#byKey.clear();
  }
}
