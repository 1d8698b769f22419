/**
 * Whether an API server serves watch-list streams (`sendInitialEvents`), remembered once it has
 * said no, so that every watcher on its client takes the complete state with LIST then WATCH
 * from then on instead of asking again before each relist. A server refuses with 422 Invalid
 * when its WatchList feature gate is off (the default on Kubernetes 1.33) and an older one
 * (before 1.27) refuses the `resourceVersionMatch` a watch-list sends; neither changes its answer
 * while the process runs, so the memory lasts until the operator restarts. A stream that breaks
 * or ends early is not a refusal: the next relist tries the stream again.
 *
 * @module
 */
import type { Client } from "./client.ts";
import { ApiError } from "./errors.ts";

/** What one API server answered to watch-list requests, shared by the watchers on its client. */
export class WatchListSupport {
  #refusal: string | undefined;

  /** The server's answer when it refused a watch-list stream; undefined until it has. */
  get refusal(): string | undefined {
    return this.#refusal;
  }

  /** Records a refusal; returns true for the first one (the one worth a log line). */
  refuse(reason: string): boolean {
    if (this.#refusal !== undefined) return false;
    this.#refusal = reason;
    return true;
  }
}

const byClient = new WeakMap<Client, WatchListSupport>();

/** The record of one client's server: the same object for every watcher on that client. */
export function watchListSupportOf(client: Client): WatchListSupport {
  let support = byClient.get(client);
  if (!support) {
    support = new WatchListSupport();
    byClient.set(client, support);
  }
  return support;
}

/**
 * Whether a failed watch-list request was the server turning the request itself down (its
 * parameters are invalid to it), as opposed to a fault that may pass.
 */
export function isWatchListRefusal(err: unknown): boolean {
  return err instanceof ApiError && (err.code === 422 || err.code === 400);
}
