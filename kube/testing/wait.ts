/**
 * Polling with a deadline: the one way tests wait for a condition (never a bare sleep as
 * synchronisation).
 *
 * @module
 */

/** How long and how often to poll, and what to call the condition in the timeout error. */
export interface WaitOptions {
  timeoutMs: number;
  intervalMs?: number;
  what: string;
}

/**
 * Calls `probe` until it returns something other than `undefined`/`false`, and returns that. A
 * probe that throws counts as "not yet"; its last error is quoted when the deadline passes.
 */
export async function waitUntil<T>(
  probe: () => Promise<T | undefined | false> | T | undefined | false,
  opts: WaitOptions,
): Promise<T> {
  const deadline = Date.now() + opts.timeoutMs;
  const interval = opts.intervalMs ?? 100;
  let lastError: unknown;
  for (;;) {
    try {
      const value = await probe();
      if (value !== undefined && value !== false) return value;
    } catch (err) {
      lastError = err;
    }
    if (Date.now() >= deadline) {
      const why = lastError instanceof Error ? `: ${lastError.message}` : "";
      throw new Error(`timed out after ${opts.timeoutMs} ms waiting for ${opts.what}${why}`);
    }
    await new Promise((resolve) => setTimeout(resolve, interval));
  }
}

/** Positional shorthand of waitUntil for terse test conditions (10 s, polling every 10 ms). */
export function waitFor<T>(
  what: string,
  probe: () => Promise<T | undefined | false> | T | undefined | false,
  timeoutMs = 10_000,
  intervalMs = 10,
): Promise<T> {
  return waitUntil(probe, { what, timeoutMs, intervalMs });
}

/** Lets pending promise callbacks run (no timers involved). */
export async function flushMicrotasks(rounds = 20): Promise<void> {
  for (let i = 0; i < rounds; i++) await Promise.resolve();
}
