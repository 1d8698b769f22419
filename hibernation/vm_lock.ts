/**
 * A striped async mutex keyed by VM name (docs/hibernation.md, "Concurrency"). Requests that
 * reach one VM take turns on its stripe, so at most one pass touches its pod annotation or
 * registry tag at a time; striping bounds memory, and a collision only makes two VMs take turns.
 *
 * @module
 */

/** Stripes in the operator's lock table (the Go operator uses the same count). */
export const VM_LOCK_STRIPES = 64;

/** Gives the stripe back; calling it more than once is harmless. */
export type Release = () => void;

/**
 * One FIFO mutex per stripe. lock() resolves in arrival order per stripe; an aborted waiter leaves
 * the queue without ever holding the stripe.
 */
export class StripedLock {
  readonly #tails: Promise<void>[];

  constructor(readonly stripes: number = VM_LOCK_STRIPES) {
    if (!Number.isInteger(stripes) || stripes < 1) {
      throw new Error(`stripes must be a positive integer, got ${stripes}`);
    }
    this.#tails = Array.from({ length: stripes }, () => Promise.resolve());
  }

  /** The stripe key maps to (FNV-1a over its UTF-16 code units). */
  stripeOf(key: string): number {
    let h = 0x811c9dc5;
    for (let i = 0; i < key.length; i++) {
      h ^= key.charCodeAt(i);
      h = Math.imul(h, 0x01000193) >>> 0;
    }
    return h % this.stripes;
  }

  /** Waits for key's stripe; an aborted waiter passes it on as if it had run at once. */
  async lock(key: string, signal?: AbortSignal): Promise<Release> {
    signal?.throwIfAborted();
    const i = this.stripeOf(key);
    const previous = this.#tails[i];
    let release!: () => void;
    const held = new Promise<void>((resolve) => (release = resolve));
    // Every waiter queues behind the one before it, whether or not it ends up holding the stripe.
    this.#tails[i] = previous.then(() => held);
    try {
      await untilAborted(previous, signal);
    } catch (err) {
      previous.then(release);
      throw err;
    }
    let released = false;
    return () => {
      if (released) return;
      released = true;
      release();
    };
  }
}

/** Resolves with p, or rejects with the signal's reason once it aborts. */
function untilAborted(p: Promise<void>, signal?: AbortSignal): Promise<void> {
  if (!signal) return p;
  return new Promise((resolve, reject) => {
    const onAbort = () => reject(signal.reason);
    signal.addEventListener("abort", onAbort, { once: true });
    p.then(() => {
      signal.removeEventListener("abort", onAbort);
      resolve();
    });
  });
}
