/**
 * What the manager (kube/manager.ts) starts and stops: controllers, servers, anything added to
 * it. Its own module so the builder and the manager both name it without importing each other.
 *
 * @module
 */

/** Something the manager runs: start resolves when the runnable has stopped. */
export interface Runnable {
  /**
   * signal asks for a graceful stop. abortSignal, when given, asks to stop at once: work in
   * progress is cancelled rather than drained (leadership was lost).
   */
  start(signal: AbortSignal, abortSignal?: AbortSignal): Promise<void>;
  /** Only run on the elected leader; the manager treats absent as true for controllers. */
  needLeaderElection?: boolean;
}
