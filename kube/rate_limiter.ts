/**
 * Decides how long an item waits before it is retried (client-go's workqueue.RateLimiter).
 * Durations are milliseconds.
 */
export interface RateLimiter<K = string> {
  /** Delay before item may be processed again; counts as one more failure for item. */
  when(item: K): number;
  /** Clears item's failure history (after a success). */
  forget(item: K): void;
  /** Failures recorded for item since its last forget. */
  numRequeues(item: K): number;
}

/**
 * Per-item exponential backoff: base·2^failures, capped at max. Each item has its own
 * count, so one failing object never slows the others down.
 */
export class ItemExponentialFailureRateLimiter<K = string> implements RateLimiter<K> {
  readonly #failures = new Map<K, number>();

  constructor(readonly baseDelayMs: number, readonly maxDelayMs: number) {}

  when(item: K): number {
    const exp = this.#failures.get(item) ?? 0;
    this.#failures.set(item, exp + 1);
    const backoff = this.baseDelayMs * 2 ** exp;
    // 2^exp overflows to Infinity long before exp overflows; the cap covers both.
    return backoff > this.maxDelayMs ? this.maxDelayMs : backoff;
  }

  forget(item: K): void {
    this.#failures.delete(item);
  }

  numRequeues(item: K): number {
    return this.#failures.get(item) ?? 0;
  }
}

/**
 * controller-runtime's default for the priority queue (and so for every controller since
 * v0.23): per-item backoff 5 ms doubling to 1000 s and no overall bucket, so a burst of
 * failures across many objects is not throttled to client-go's 10 retries per second.
 */
export function defaultItemRateLimiter<K = string>(): RateLimiter<K> {
  return new ItemExponentialFailureRateLimiter<K>(5, 1_000_000);
}
