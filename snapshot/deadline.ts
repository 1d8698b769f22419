/** Per-request deadlines that also follow the caller's AbortSignal. */

/** The fetch signature the clients accept, so tests can inject a fake transport. */
export type FetchFn = (input: string | URL | Request, init?: RequestInit) => Promise<Response>;

/** Thrown when a request outlives its deadline; names the request and the limit. */
export class DeadlineError extends Error {
  /** What timed out, e.g. "HEAD manifest p/vm:hibernate". */
  readonly what: string;
  /** The limit that was exceeded, in ms. */
  readonly ms: number;

  /** what names the request, ms the limit it exceeded. */
  constructor(what: string, ms: number) {
    super(`${what}: timed out after ${ms}ms`);
    this.name = "DeadlineError";
    this.what = what;
    this.ms = ms;
  }
}

/**
 * Runs fn with a signal that aborts when the caller's signal aborts or after ms, whichever comes
 * first, so the timeout covers reading the body too. The timer is always cleared (no leaked ops).
 */
export async function withDeadline<T>(
  what: string,
  ms: number,
  parent: AbortSignal | undefined,
  fn: (signal: AbortSignal) => Promise<T>,
): Promise<T> {
  parent?.throwIfAborted();
  const ac = new AbortController();
  const timeout = new DeadlineError(what, ms);
  const timer = setTimeout(() => ac.abort(timeout), ms);
  const onAbort = () => ac.abort(parent?.reason);
  parent?.addEventListener("abort", onAbort, { once: true });
  try {
    return await fn(ac.signal);
  } catch (err) {
    // fetch rejects with its own AbortError: report the reason we aborted with instead.
    if (ac.signal.aborted) throw ac.signal.reason;
    throw err;
  } finally {
    clearTimeout(timer);
    parent?.removeEventListener("abort", onAbort);
  }
}

/**
 * Waits for a promise that other callers may share, giving up (with the signal's reason) when
 * this caller's signal aborts. The shared work itself keeps running for the others.
 */
export function abortable<T>(p: Promise<T>, signal: AbortSignal | undefined): Promise<T> {
  if (!signal) return p;
  if (signal.aborted) return Promise.reject(signal.reason);
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(signal.reason);
    signal.addEventListener("abort", onAbort, { once: true });
    p.then(resolve, reject).finally(() => signal.removeEventListener("abort", onAbort));
  });
}
