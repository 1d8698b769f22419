/**
 * controller-runtime's priority queue (pkg/controller/priorityqueue), the default queue of
 * every controller since v0.23 and the only one here, ported onto an injectable {@link Clock}.
 *
 * Deliberate differences from the Go original, none observable through the queue's API:
 * - adds take effect synchronously (Go buffers them and applies them on a goroutine);
 * - a single timer is armed for the earliest waiting item instead of a ticker goroutine;
 * - there is no periodic debug dump of the queue's items.
 *
 * @module
 */
import { type HeapEntry, IndexedHeap } from "./_indexed_heap.ts";
import { type Clock, realClock } from "./clock.ts";
import {
  DEFAULT_UNFINISHED_WORK_UPDATE_PERIOD_MS,
  EarliestDeadlineTimer,
  UnfinishedWorkTicker,
} from "./queue_timers.ts";
import { defaultItemRateLimiter, type RateLimiter } from "./rate_limiter.ts";
import { QueueMetrics } from "./workqueue_metrics.ts";

/**
 * The priority controller-runtime gives events that carry no news: objects from an
 * informer's initial list and updates whose resourceVersion did not change
 * (handler.LowPriority, applied by WithLowPriorityWhenUnchanged).
 */
export const LOW_PRIORITY = -100;

/** How keys are added (controller-runtime's AddOpts). Durations are milliseconds. */
export interface AddOptions {
  /** Not handed out before this delay has passed; across adds of a key the earliest wins. */
  after?: number;
  /**
   * Delay by the rate limiter (one more failure for the key); the shorter of that and a
   * positive `after` wins.
   */
  rateLimited?: boolean;
  /** Higher is handed out first; default 0. Re-adding a key never lowers its priority. */
  priority?: number;
}

/** A key handed out by getWithPriority, with the priority it was queued at. */
export interface PriorityItem<K extends string = string> {
  key: K;
  priority: number;
}

/** Options of a {@link PriorityQueue}. */
export interface PriorityQueueOptions<K extends string = string> {
  /**
   * Metric label value for both `name` and `controller`. Without a name the queue records no
   * metrics and runs no metrics timer.
   */
  name?: string;
  clock?: Clock;
  /** Used by rate-limited adds; default 5 ms doubling to 1000 s per key, no overall bucket. */
  rateLimiter?: RateLimiter<K>;
  /** How often the unfinished-work gauges are refreshed (client-go: 500 ms). */
  unfinishedWorkUpdatePeriodMs?: number;
}

interface Entry<K> extends HeapEntry {
  key: K;
  priority: number;
  /**
   * Position in add order. A new key, a raised priority and a waiting entry becoming ready
   * take a fresh (larger) number, so each priority is first-in first-out by that event.
   */
  seq: number;
  /** When a waiting entry becomes ready; undefined for ready entries. */
  readyAt: number | undefined;
}

function lessReady<K>(a: Entry<K>, b: Entry<K>): boolean {
  return a.priority !== b.priority ? a.priority > b.priority : a.seq < b.seq;
}

function lessWaiting<K>(a: Entry<K>, b: Entry<K>): boolean {
  return a.readyAt !== b.readyAt ? a.readyAt! < b.readyAt! : lessReady(a, b);
}

/**
 * A de-duplicating queue of keys where each key has a priority and a ready time:
 * - ready keys are handed out highest priority first, first-in first-out within a priority;
 * - a key is queued at most once: re-adding keeps the higher priority (moving the key to the
 *   end of the new priority's line when it rises) and the earlier ready time;
 * - a key is handed to at most one worker at a time: a key added while a worker holds it is
 *   queued (and counted in len() and depth) but handed out only after done();
 * - delayed keys wait on one timer armed for the earliest of them;
 * - after shutDown() adds are dropped and get resolves undefined at once, even with keys
 *   still queued (controller-runtime semantics; there is no drain).
 */
export class PriorityQueue<K extends string = string> {
  readonly name: string | undefined;
  readonly #clock: Clock;
  readonly #rateLimiter: RateLimiter<K>;
  /** Every queued key (ready, blocked or waiting); a handed-out key leaves it. */
  readonly #entries = new Map<K, Entry<K>>();
  /** Ready entries whose key no worker holds. */
  readonly #ready = new IndexedHeap<Entry<K>>(lessReady);
  /** Ready entries whose key a worker holds; they join #ready when it is done. */
  readonly #blocked = new Map<K, Entry<K>>();
  /** Entries whose ready time lies ahead, earliest first. */
  readonly #waiting = new IndexedHeap<Entry<K>>(lessWaiting);
  /** Keys currently held by a worker (between get and done). */
  readonly #processing = new Set<K>();
  /** Pending get calls, oldest first; only non-empty while #ready is empty. */
  readonly #getters: ((item: PriorityItem<K> | undefined) => void)[] = [];
  #seq = 0;
  #shuttingDown = false;
  readonly #timer: EarliestDeadlineTimer;
  readonly #metrics: QueueMetrics<K> | undefined;
  readonly #metricsTicker: UnfinishedWorkTicker | undefined;

  constructor(opts: PriorityQueueOptions<K> = {}) {
    this.name = opts.name;
    this.#clock = opts.clock ?? realClock;
    this.#rateLimiter = opts.rateLimiter ?? defaultItemRateLimiter<K>();
    this.#timer = new EarliestDeadlineTimer(this.#clock, () => this.#onTimer());
    if (opts.name) {
      this.#metrics = new QueueMetrics<K>(opts.name, this.#clock);
      this.#metricsTicker = new UnfinishedWorkTicker(
        this.#metrics,
        this.#clock,
        opts.unfinishedWorkUpdatePeriodMs ?? DEFAULT_UNFINISHED_WORK_UPDATE_PERIOD_MS,
      );
    }
  }

  /** Queues keys with opts (see {@link AddOptions}); ignored after shutdown. */
  addWithOpts(opts: AddOptions, ...keys: K[]): void {
    if (this.#shuttingDown) return;
    const priority = opts.priority ?? 0;
    for (const key of keys) {
      let after = opts.after ?? 0;
      if (opts.rateLimited) {
        const limited = this.#rateLimiter.when(key);
        if (after === 0 || limited < after) after = limited;
      }
      let readyAt: number | undefined;
      if (after > 0) {
        readyAt = this.#clock.now() + after;
        this.#metrics?.retry();
      }
      const entry = this.#entries.get(key);
      if (entry) {
        this.#update(entry, priority, readyAt);
        continue;
      }
      const created: Entry<K> = { key, priority, seq: this.#seq++, readyAt, heapIndex: -1 };
      this.#entries.set(key, created);
      if (readyAt === undefined) this.#makeReady(created);
      else this.#waiting.push(created);
    }
    this.#armTimer();
    this.#dispatch();
  }

  /** Queues key at priority 0. */
  add(key: K): void {
    this.addWithOpts({}, key);
  }

  /** Queues key after ms milliseconds. */
  addAfter(key: K, ms: number): void {
    this.addWithOpts({ after: ms }, key);
  }

  /** Queues key after the rate limiter's delay for it. */
  addRateLimited(key: K): void {
    this.addWithOpts({ rateLimited: true }, key);
  }

  /**
   * Hands out the highest-priority ready key no worker holds, waiting until there is one.
   * Resolves undefined once the queue is shut down. The caller must call done(key).
   */
  getWithPriority(): Promise<PriorityItem<K> | undefined> {
    if (this.#shuttingDown) return Promise.resolve(undefined);
    const entry = this.#ready.pop();
    if (entry) return Promise.resolve(this.#handOut(entry));
    return new Promise((resolve) => this.#getters.push(resolve));
  }

  /** getWithPriority without the priority. */
  async get(): Promise<K | undefined> {
    return (await this.getWithPriority())?.key;
  }

  /** Releases key; if it was added meanwhile it can now be handed out again. */
  done(key: K): void {
    this.#processing.delete(key);
    this.#metrics?.done(key);
    const blocked = this.#blocked.get(key);
    if (blocked === undefined) return;
    this.#blocked.delete(key);
    this.#ready.push(blocked);
    this.#dispatch();
  }

  /** Resets key's backoff; call after a successful pass. */
  forget(key: K): void {
    this.#rateLimiter.forget(key);
  }

  /** Failures recorded for key by the rate limiter. */
  numRequeues(key: K): number {
    return this.#rateLimiter.numRequeues(key);
  }

  /** Keys ready to be handed out, including ones waiting for their worker to finish. */
  len(): number {
    return this.#ready.size + this.#blocked.size;
  }

  /** Keys whose delay has not yet passed. */
  delayedLen(): number {
    return this.#waiting.size;
  }

  shuttingDown(): boolean {
    return this.#shuttingDown;
  }

  /** Stops handing out and accepting keys, wakes idle getters with undefined, ends timers. */
  shutDown(): void {
    this.#shuttingDown = true;
    this.#timer.cancel();
    this.#metricsTicker?.stop();
    for (const resolve of this.#getters.splice(0)) resolve(undefined);
  }

  /** Same as shutDown: like controller-runtime's priority queue, nothing is drained. */
  shutDownWithDrain(): Promise<void> {
    this.shutDown();
    return Promise.resolve();
  }

  /** Merges one more add of an already queued key into its entry. */
  #update(entry: Entry<K>, priority: number, readyAt: number | undefined): void {
    const waiting = entry.readyAt !== undefined;
    const raised = priority > entry.priority;
    if (!waiting) {
      // Already ready: a delay cannot push it back, only a higher priority changes anything.
      if (!raised) return;
      this.#metrics?.changePriority(entry.priority, priority);
      entry.priority = priority;
      entry.seq = this.#seq++;
      if (!this.#processing.has(entry.key)) this.#ready.fix(entry);
      return;
    }
    if (raised) {
      entry.priority = priority;
      entry.seq = this.#seq++;
    }
    if (readyAt === undefined) {
      this.#waiting.remove(entry);
      this.#makeReady(entry);
      return;
    }
    if (readyAt < entry.readyAt!) entry.readyAt = readyAt;
    this.#waiting.fix(entry);
  }

  /** Files entry as ready: handed out next by priority, or held back while a worker has it. */
  #makeReady(entry: Entry<K>): void {
    entry.readyAt = undefined;
    this.#metrics?.add(entry.key, entry.priority);
    if (this.#processing.has(entry.key)) this.#blocked.set(entry.key, entry);
    else this.#ready.push(entry);
  }

  #handOut(entry: Entry<K>): PriorityItem<K> {
    this.#entries.delete(entry.key);
    this.#processing.add(entry.key);
    this.#metrics?.get(entry.key, entry.priority);
    this.#metricsTicker?.schedule();
    return { key: entry.key, priority: entry.priority };
  }

  #dispatch(): void {
    while (this.#getters.length > 0) {
      const entry = this.#ready.pop();
      if (!entry) return;
      this.#getters.shift()!(this.#handOut(entry));
    }
  }

  #armTimer(): void {
    this.#timer.arm(this.#waiting.peek()?.readyAt);
  }

  #onTimer(): void {
    const now = this.#clock.now();
    for (let top = this.#waiting.peek(); top && top.readyAt! <= now; top = this.#waiting.peek()) {
      this.#waiting.pop();
      // Ready entries line up by when they became ready, not by when they were first added.
      top.seq = this.#seq++;
      this.#makeReady(top);
    }
    this.#armTimer();
    this.#dispatch();
  }
}
