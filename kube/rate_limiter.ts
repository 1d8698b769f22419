import { type Clock, realClock } from "./clock.ts";

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
 * Token bucket shared by all items (golang.org/x/time/rate semantics): it starts full with
 * `burst` tokens and refills at `qps` per second; every call reserves one token and returns
 * how long the caller must wait for it. It bounds the overall retry rate of a controller.
 */
export class BucketRateLimiter<K = string> implements RateLimiter<K> {
  #tokens: number;
  #last: number | undefined;

  constructor(
    readonly qps: number,
    readonly burst: number,
    private readonly clock: Clock = realClock,
  ) {
    this.#tokens = burst;
  }

  when(_item: K): number {
    const now = this.clock.now();
    // Time going backwards (a fake clock reset) must not mint negative refill.
    const last = this.#last === undefined || now < this.#last ? now : this.#last;
    const refilled = Math.min(this.burst, this.#tokens + ((now - last) * this.qps) / 1000);
    const tokens = refilled - 1;
    this.#tokens = tokens;
    this.#last = now;
    // Multiply before dividing so whole-token deficits give exact milliseconds.
    return tokens < 0 ? (-tokens * 1000) / this.qps : 0;
  }

  forget(_item: K): void {}

  numRequeues(_item: K): number {
    return 0;
  }
}

/** Combines limiters: the delay is the longest any of them asks for. */
export class MaxOfRateLimiter<K = string> implements RateLimiter<K> {
  readonly #limiters: RateLimiter<K>[];

  constructor(...limiters: RateLimiter<K>[]) {
    this.#limiters = limiters;
  }

  when(item: K): number {
    let delay = 0;
    // Every limiter is consulted (not short-circuited) so each records the attempt.
    for (const l of this.#limiters) delay = Math.max(delay, l.when(item));
    return delay;
  }

  forget(item: K): void {
    for (const l of this.#limiters) l.forget(item);
  }

  numRequeues(item: K): number {
    let n = 0;
    for (const l of this.#limiters) n = Math.max(n, l.numRequeues(item));
    return n;
  }
}

/**
 * client-go's DefaultControllerRateLimiter: per-item backoff 5 ms … 1000 s combined with an
 * overall bucket of 10 qps and burst 100.
 */
export function defaultControllerRateLimiter<K = string>(
  clock: Clock = realClock,
): RateLimiter<K> {
  return new MaxOfRateLimiter<K>(
    new ItemExponentialFailureRateLimiter<K>(5, 1_000_000),
    new BucketRateLimiter<K>(10, 100, clock),
  );
}

/**
 * controller-runtime's default for the priority queue (and so for every controller since
 * v0.23): per-item backoff 5 ms doubling to 1000 s and no overall bucket, so a burst of
 * failures across many objects is not throttled to 10 retries per second.
 */
export function defaultItemRateLimiter<K = string>(): RateLimiter<K> {
  return new ItemExponentialFailureRateLimiter<K>(5, 1_000_000);
}
