/**
 * The queue contract a controller works against (controller-runtime's PriorityQueue interface),
 * shared by both implementations: the priority queue (kube/priority_queue.ts, the default) and
 * client-go's plain work queue (kube/workqueue.ts), which ignores priorities.
 *
 * @module
 */

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

/**
 * What a controller needs from its queue. The plain work queue hands every key out at
 * priority 0.
 */
export interface ControllerQueue<K extends string = string> {
  add(key: K): void;
  /** Adds key after ms milliseconds. */
  addAfter(key: K, ms: number): void;
  /** Adds key after the rate limiter's delay for it. */
  addRateLimited(key: K): void;
  addWithOpts(opts: AddOptions, ...keys: K[]): void;
  /** Next key and its priority; undefined once the queue is shut down. Call done(key) after. */
  getWithPriority(): Promise<PriorityItem<K> | undefined>;
  done(key: K): void;
  /** Resets key's backoff; call after a successful pass. */
  forget(key: K): void;
  /** Failures recorded for key by the rate limiter. */
  numRequeues(key: K): number;
  /** Keys ready to be handed out (including ones waiting for their worker to finish). */
  len(): number;
  /** Keys whose delay has not yet passed. */
  delayedLen(): number;
  shuttingDown(): boolean;
  shutDown(): void;
}
