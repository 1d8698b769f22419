/**
 * The watcher of one kind (kube-rs's kube_runtime::watcher, client-go's Reflector without its
 * store): takes the complete state, then watches from its resourceVersion with bookmarks,
 * resumes from the last seen resourceVersion after a dropped stream, takes the state again only
 * when the resourceVersion is gone (410) or in doubt, and backs off on errors. It stores
 * nothing: it reports typed events (kube/store.ts applies them) and keeps the resourceVersion,
 * the counters and the liveness clock.
 *
 * A complete state is taken with a watch-list stream (sendInitialEvents) when enabled, else, or
 * when the server refuses it, with a paged LIST then a WATCH. A refusal is remembered for the
 * client's server (kube/watch_list_support.ts): later relists of every watcher on that client go
 * straight to LIST then WATCH.
 *
 * Sharded (a {@link ShardFilter}, namespaced kinds only): each complete state is taken for the
 * filter's ranges at that moment, sent as `shardSelector` with the list and every watch, and
 * every list item and watch event is also checked on this side, since a server without the
 * ShardedListAndWatch gate ignores the parameter and 1.36.3 does not filter watches served from
 * etcd. When the ranges change the current request is abandoned and a fresh complete state is
 * taken for the new ranges (the store reports only the differences).
 *
 * @module
 */
import { getLogger } from "@logtape/logtape";
import { type Clock, realClock, sleep } from "./clock.ts";
import {
  type Client,
  INITIAL_EVENTS_END_ANNOTATION,
  type LabelSelector,
  type WatchEvent,
} from "./client.ts";
import { ApiError, errorMessage, errorText, isGone } from "./errors.ts";
import type { KubeObject, ObjectList, Status } from "./object.ts";
import { shardFilteredObjects, shardServerFiltered } from "./metrics.ts";
import { resourceId, type ResourceType } from "./resource.ts";
import type { ShardFilter } from "./sharding/filter.ts";
import { type HashRange, normalize } from "./sharding/range.ts";
import {
  formatShardSelector,
  NAMESPACE_FIELD,
  namespaceInRanges,
  serverAppliedShard,
  type ShardSelector,
} from "./sharding/selector.ts";
import {
  isWatchListRefusal,
  type WatchListSupport,
  watchListSupportOf,
} from "./watch_list_support.ts";

const log = getLogger(["cocoon-operator", "cache"]);

/**
 * What the watcher reports. A complete state is initStart, then initApply (initDelete) per
 * object, then initDone; the store swaps it in at initDone. apply and delete are single changes
 * of an ordinary watch. Objects are as the server sent them (the store transforms them).
 */
export type WatcherEvent<T extends KubeObject> =
  | { type: "initStart" }
  | { type: "initApply"; object: T }
  /** An object a watch-list stream removed again before its state was complete. */
  | { type: "initDelete"; object: T }
  | { type: "initDone" }
  | { type: "apply"; object: T }
  | { type: "delete"; object: T };

/**
 * Which objects the list and the watch ask for: sent with both requests alike, so the server
 * filters. A new request-side filter belongs here (and in {@link scopeOf}).
 */
export interface ListWatchScope {
  /** Watch one namespace only; default all. */
  namespace?: string;
  /**
   * Server-side filters of the list and the watch: objects outside them are never received,
   * and an object leaving them arrives as DELETED (entering: ADDED), as the API server reports.
   */
  labelSelector?: LabelSelector;
  /** Raw field selector ("spec.nodeName=n1"); only fields the server indexes for the kind. */
  fieldSelector?: string;
  /**
   * `shardSelector` text (formatShardSelector): honoured by Kubernetes 1.36 with the
   * ShardedListAndWatch gate, ignored by other servers. The watcher sets it from its
   * {@link ShardFilter}; absent, nothing is sent.
   */
  shardSelector?: string;
}

/** The scope part of options that carry more than the scope. */
export function scopeOf(opts: ListWatchScope): ListWatchScope {
  return {
    namespace: opts.namespace,
    labelSelector: opts.labelSelector,
    fieldSelector: opts.fieldSelector,
    ...(opts.shardSelector ? { shardSelector: opts.shardSelector } : {}),
  };
}

export interface WatcherOptions<T extends KubeObject> extends ListWatchScope {
  client: Client;
  rt: ResourceType<T>;
  /** Page size of the initial list (client-go lists in chunks of 500). */
  pageSize?: number;
  /** Reconnect backoff bounds (client-go's reflector: 800 ms doubling to 30 s). */
  minBackoffMs?: number;
  maxBackoffMs?: number;
  /** Server-side watch timeout range; client-go picks 5–10 min at random per watch. */
  watchTimeoutSeconds?: () => number;
  /**
   * How long past its server-side timeout a watch may stay open before this side ends it
   * (default 30 s). The server closes every watch at its timeout, so one still open later sits
   * on a connection that went half-open: no event and no bookmark will ever come through it.
   */
  watchDeadlineGraceMs?: number;
  /**
   * Sync the initial state with a watch-list stream (sendInitialEvents) instead of a LIST, as
   * client-go 0.35's reflector does; an attempt the server refuses (the WatchList feature off,
   * an older server) or that breaks before the initial state is complete falls back to LIST
   * then WATCH. Default false: the manager turns it on for the operator. A sharded watcher
   * lists regardless (see #sync).
   */
  watchList?: boolean;
  /**
   * Where a server's refusal of watch-list streams is remembered; default: the record shared by
   * every watcher on `client` (watchListSupportOf).
   */
  watchListSupport?: WatchListSupport;
  /** Time source of the backoff pauses (tests). */
  clock?: Clock;
  /**
   * The namespaces to hold, by hash range (see the module doc). Ignored for cluster-scoped
   * kinds, which are never sharded. Absent: everything, and no shardSelector is sent.
   */
  shard?: ShardFilter;
}

/** What the watcher has done, for readers and tests. */
export interface WatcherStats {
  lists: number;
  watches: number;
  relistsAfterGone: number;
  lastResourceVersion: string;
  /** Initial states taken from a watch-list stream (not counted in lists). */
  watchListSyncs: number;
  /** Watch-list attempts that fell back to LIST + WATCH. */
  watchListFallbacks: number;
  /** Complete states listed without a watch-list attempt because the server had refused one. */
  watchListSkips: number;
  /** Watches this side ended because they outlived their deadline (a half-open connection). */
  watchDeadlinesHit: number;
  /** Sharded: list items and watch events dropped here because their namespace is out of range. */
  shardFilteredObjects: number;
  /**
   * Sharded: whether the server applied the shardSelector to the last LIST (its shardInfo
   * echoed the selector); undefined when unsharded, or before the first sharded list.
   */
  shardServerFiltered: boolean | undefined;
  /** Sharded: fresh complete states taken because the ranges changed. */
  rescopes: number;
}

/** A non-410 error the server sent as a watch ERROR event. */
class WatchErrorEvent extends Error {
  constructor(readonly apiError: ApiError) {
    super(`watch error event: ${apiError.message}`, { cause: apiError });
    this.name = "WatchErrorEvent";
  }
}

/** A watch-list stream that did not deliver the whole initial state; the attempt falls back. */
class WatchListIncomplete extends Error {
  constructor(message: string) {
    super(message);
    this.name = "WatchListIncomplete";
  }
}

/** Lists and watches one kind, reporting {@link WatcherEvent}s; see the module doc. */
export class ListWatcher<T extends KubeObject> {
  readonly rt: ResourceType<T>;
  readonly #opts: WatcherOptions<T>;
  /** Sent with every list and watch; its shardSelector is the one of the current state. */
  #scope: ListWatchScope;
  readonly #clock: Clock;
  readonly #watchListSupport: WatchListSupport;
  /** The filter this watcher applies: the options' one for a namespaced kind, else none. */
  readonly #shard: ShardFilter | undefined;
  /** The ranges of the current complete state (what is sent and what passes the filter). */
  #ranges: readonly HashRange[] | undefined;
  /** The ranges of the complete state last reported (what the store now holds). */
  #heldRanges: readonly HashRange[] | undefined;
  /** The ranges changed: the next attempt takes a fresh complete state. */
  #rescopeRequested = false;
  /** Aborted to abandon the current attempt (list, watch or pause) when the ranges change. */
  #attempt: AbortController | undefined;
  /** Holding an empty range set: nothing to ask the server, so no progress is expected. */
  #idle = false;
  #rv = "";
  #running = false;
  /** Whether the current watch attempt delivered anything (the connection worked). */
  #delivered = false;
  /** When the server last answered anything (a list page, a watch opening, an event). */
  #lastProgressAt: number;
  readonly stats: WatcherStats = {
    lists: 0,
    watches: 0,
    relistsAfterGone: 0,
    lastResourceVersion: "",
    watchListSyncs: 0,
    watchListFallbacks: 0,
    watchListSkips: 0,
    watchDeadlinesHit: 0,
    shardFilteredObjects: 0,
    shardServerFiltered: undefined,
    rescopes: 0,
  };

  constructor(opts: WatcherOptions<T>) {
    this.#opts = opts;
    this.rt = opts.rt;
    this.#scope = scopeOf(opts);
    this.#clock = opts.clock ?? realClock;
    this.#watchListSupport = opts.watchListSupport ?? watchListSupportOf(opts.client);
    this.#lastProgressAt = this.#clock.now();
    this.#shard = opts.rt.namespaced ? opts.shard : undefined;
  }

  /**
   * Milliseconds since the API server last answered: a list page, a watch being accepted, an
   * event or bookmark, a stream ending cleanly. An idle kind on a server without bookmarks
   * still shows progress once per watch timeout (5–10 min), when its watch is renewed.
   */
  msSinceProgress(): number {
    if (this.#idle) return 0;
    return this.#clock.now() - this.#lastProgressAt;
  }

  /**
   * Sharded: the ranges of the complete state last reported, i.e. what the store holds now
   * (it lags the filter's ranges until the fresh state after a change is in); undefined when
   * unsharded or before the first state. A scope starts acting on a claimed range only once
   * every cache holds it.
   */
  heldRanges(): readonly HashRange[] | undefined {
    return this.#heldRanges;
  }

  #progress(): void {
    this.#lastProgressAt = this.#clock.now();
  }

  /**
   * Lists and watches until the signal aborts, handing each event to emit as it happens.
   * emit must not throw.
   */
  async run(signal: AbortSignal, emit: (ev: WatcherEvent<T>) => void): Promise<void> {
    if (this.#running) throw new Error(`${resourceId(this.rt)} informer already running`);
    this.#running = true;
    const minBackoff = this.#opts.minBackoffMs ?? 800;
    const maxBackoff = this.#opts.maxBackoffMs ?? 30_000;
    const clock = this.#clock;
    let backoff = minBackoff;
    this.#progress();
    const unsubscribe = this.#shard?.onChange(() => this.#rescope());
    try {
      while (!signal.aborted) {
        this.#delivered = false;
        if (this.#rescopeRequested) {
          this.#rescopeRequested = false;
          this.#rv = "";
          this.stats.rescopes++;
          backoff = minBackoff;
          log.info("shard ranges changed: re-listing {resource}", {
            resource: resourceId(this.rt),
          });
        }
        const attempt = new AbortController();
        this.#attempt = attempt;
        const attemptSignal = AbortSignal.any([signal, attempt.signal]);
        try {
          const healthy = this.#rv
            ? await this.#watchOnce(attemptSignal, false, emit)
            : await this.#sync(attemptSignal, emit);
          if (healthy) backoff = minBackoff;
          // A stream the server closed without sending anything is retried after a pause so
          // a misbehaving endpoint cannot spin this loop.
          else await sleep(clock, jitter(minBackoff), attemptSignal);
        } catch (err) {
          if (signal.aborted) break;
          // Abandoned because the ranges changed: the next round relists at once.
          if (attempt.signal.aborted) continue;
          if (isGone(err)) {
            log.debug(
              "resourceVersion {rv} of {resource} expired (410 Gone): taking its state again",
              {
                rv: this.#rv,
                resource: resourceId(this.rt),
              },
            );
            this.#rv = "";
            this.stats.relistsAfterGone++;
            continue;
          }
          // Any other error the server reported inside the stream leaves the resourceVersion
          // in doubt (e.g. an etcd event whose history was compacted), so the next attempt
          // relists, as client-go's reflector does.
          if (err instanceof WatchErrorEvent) this.#rv = "";
          // A stream that delivered events was a working connection: its failure starts a
          // fresh backoff instead of inheriting the one grown by an earlier outage.
          if (this.#delivered) backoff = minBackoff;
          log.warn("list/watch of {resource} failed, retrying in {backoffMs} ms: {error}", {
            resource: resourceId(this.rt),
            backoffMs: backoff,
            error: errorText(err),
          });
          await sleep(clock, jitter(backoff), attemptSignal);
          backoff = Math.min(maxBackoff, backoff * 2);
        } finally {
          this.#attempt = undefined;
          // Idle time was not silence from the server: the liveness clock starts again now.
          if (this.#idle) this.#progress();
          this.#idle = false;
        }
      }
    } finally {
      unsubscribe?.();
      this.#running = false;
    }
  }

  /** The filter's ranges changed: abandon what is under way and take a fresh complete state. */
  #rescope(): void {
    this.#rescopeRequested = true;
    this.#attempt?.abort(new Error(`shard ranges of ${resourceId(this.rt)} changed`));
  }

  /**
   * Fixes the ranges (and the shardSelector sent) for the complete state about to be taken.
   * Returns false when the set is empty: there is nothing to ask the server for.
   */
  #scopeToShard(): boolean {
    if (!this.#shard) return true;
    // Merged and sorted as formatShardSelector sends them, so the server's echo compares equal.
    this.#ranges = normalize(this.#shard.ranges());
    if (this.#ranges.length === 0) {
      this.#scope = scopeOf({ ...this.#opts, shardSelector: undefined });
      return false;
    }
    this.#scope = scopeOf({ ...this.#opts, shardSelector: formatShardSelector(this.#ranges) });
    return true;
  }

  /** Whether an object the server sent belongs to the current ranges (always, unsharded). */
  #inShard(object: KubeObject): boolean {
    return !this.#ranges || namespaceInRanges(this.#ranges, object.metadata.namespace ?? "");
  }

  /** Counts objects dropped by the client-side filter (once per page or event, not per item). */
  #countFiltered(n: number): void {
    if (n === 0) return;
    this.stats.shardFilteredObjects += n;
    shardFilteredObjects.inc({ resource: resourceId(this.rt) }, n);
  }

  /** Records whether the server applied the shardSelector to a list it answered. */
  #checkShardInfo(listMetadata: ObjectList<T>["metadata"]): void {
    if (!this.#ranges || !this.#scope.shardSelector) return;
    const requested: ShardSelector = { field: NAMESPACE_FIELD, ranges: this.#ranges };
    const applied = serverAppliedShard(listMetadata, requested);
    if (applied !== this.stats.shardServerFiltered) {
      log.info("list of {resource}: shardSelector {how}", {
        resource: resourceId(this.rt),
        how: applied ? "applied by the server" : "ignored by the server, filtering here",
      });
    }
    this.stats.shardServerFiltered = applied;
    shardServerFiltered.set({ resource: resourceId(this.rt) }, applied ? 1 : 0);
  }

  /**
   * An empty range set: the state is empty, and it stays so without a request until the
   * ranges change (the attempt is aborted) or the watcher stops.
   */
  async #holdNothing(signal: AbortSignal, emit: (ev: WatcherEvent<T>) => void): Promise<boolean> {
    emit({ type: "initStart" });
    emit({ type: "initDone" });
    this.#heldRanges = this.#ranges;
    this.#idle = true;
    await new Promise<void>((resolve) => {
      if (signal.aborted) return resolve();
      signal.addEventListener("abort", () => resolve(), { once: true });
    });
    return true;
  }

  /**
   * Takes the complete state (no resourceVersion yet, or one in doubt) and goes on watching:
   * through a watch-list stream when enabled, else (or when that attempt fails before the
   * state is complete) with LIST then WATCH. Returns what #watchOnce returns.
   */
  async #sync(signal: AbortSignal, emit: (ev: WatcherEvent<T>) => void): Promise<boolean> {
    if (!this.#scopeToShard()) return await this.#holdNothing(signal, emit);
    // Sharded, the state comes from a LIST: only a list answer carries shardInfo (a watch-list
    // stream's closing bookmark has none, seen on 1.36.3), and without it this side cannot
    // tell whether the server applied the selector.
    if (this.#opts.watchList && !this.#ranges) {
      if (this.#watchListSupport.refusal !== undefined) {
        this.stats.watchListSkips++;
      } else {
        try {
          return await this.#watchOnce(signal, true, emit);
        } catch (err) {
          // Past the initial-events-end bookmark the stream is an ordinary watch and its errors
          // are handled as such; before it, nothing was stored, and a LIST is tried at once.
          if (signal.aborted || this.#rv) throw err;
          this.stats.watchListFallbacks++;
          this.#watchListFailed(err);
        }
      }
    }
    await this.#list(signal, emit);
    return await this.#watchOnce(signal, false, emit);
  }

  /** Logs a failed watch-list attempt; a refusal is remembered for the client's server. */
  #watchListFailed(err: unknown): void {
    const resource = resourceId(this.rt);
    const error = errorMessage(err);
    if (!isWatchListRefusal(err)) {
      log.info("watch-list of {resource} broke off, using list+watch this time: {error}", {
        resource,
        error,
      });
      return;
    }
    if (this.#watchListSupport.refuse(error)) {
      log.info(
        "the API server refused a watch-list stream of {resource}: {error}; every informer on it " +
          "lists and watches from now on (a restart asks again)",
        { resource, error },
      );
    } else {
      log.debug("watch-list of {resource} refused too, using list+watch: {error}", {
        resource,
        error,
      });
    }
  }

  /** Lists everything, page by page, as one complete state. */
  async #list(signal: AbortSignal, emit: (ev: WatcherEvent<T>) => void): Promise<void> {
    const { client, rt } = this.#opts;
    let cont: string | undefined;
    let rv = "";
    let paged = true;
    emit({ type: "initStart" });
    for (;;) {
      let page;
      try {
        page = await client.list(rt, {
          ...this.#scope,
          limit: paged ? this.#opts.pageSize ?? 500 : undefined,
          continue: cont,
          signal,
        });
      } catch (err) {
        if (!isGone(err)) throw err;
        // The snapshot behind the continue token was compacted mid-way: like client-go's
        // pager, start over with one unpaged list rather than paging into the same expiry.
        if (cont) {
          emit({ type: "initStart" });
          cont = undefined;
          paged = false;
          continue;
        }
        // A list itself answering 410 is a server fault, not a stale watch: back off. The cause
        // is left off on purpose, so the run loop's isGone (which looks through causes) does not
        // take it for a stale resourceVersion and relist at once.
        throw new Error(`list of ${resourceId(rt)} failed: ${errorMessage(err)}`);
      }
      this.#progress();
      // The first page (no continue token sent yet) answers whether the server sharded.
      if (!cont) this.#checkShardInfo(page.metadata);
      let dropped = 0;
      for (const object of page.items) {
        if (this.#inShard(object)) emit({ type: "initApply", object });
        else dropped++;
      }
      this.#countFiltered(dropped);
      cont = page.metadata.continue;
      rv = page.metadata.resourceVersion ?? "";
      if (!cont) break;
    }
    this.stats.lists++;
    emit({ type: "initDone" });
    this.#heldRanges = this.#ranges;
    this.#setRv(rv);
  }

  /**
   * One watch stream from the current resourceVersion, or (listing) a watch-list stream whose
   * initial events make a complete state that ends at its initial-events-end bookmark.
   * Returns true when it delivered something (the connection was healthy), false when it ended
   * with nothing. A stream still open a little past its server timeout is ended from this side
   * (the connection went half-open) and counts as having delivered nothing.
   */
  async #watchOnce(
    signal: AbortSignal,
    listing: boolean,
    emit: (ev: WatcherEvent<T>) => void,
  ): Promise<boolean> {
    const { client, rt } = this.#opts;
    const timeout = this.#opts.watchTimeoutSeconds?.() ?? 300 + Math.floor(Math.random() * 300);
    const deadlineMs = timeout * 1000 + (this.#opts.watchDeadlineGraceMs ?? 30_000);
    const expired = new AbortController();
    const timer = this.#clock.setTimeout(
      () => expired.abort(new Error(`watch open past its ${timeout} s timeout`)),
      deadlineMs,
    );
    this.stats.watches++;
    /** Whether the stream is still in a watch-list's initial phase (before its end bookmark). */
    let initial = listing;
    if (initial) emit({ type: "initStart" });
    try {
      const stream = client.watch(rt, {
        ...this.#scope,
        resourceVersion: this.#rv,
        allowWatchBookmarks: true,
        timeoutSeconds: timeout,
        ...(listing ? { sendInitialEvents: true, resourceVersionMatch: "NotOlderThan" } : {}),
        onOpen: () => this.#progress(),
        signal: AbortSignal.any([signal, expired.signal]),
      });
      for await (const ev of stream) {
        this.#delivered = true;
        this.#progress();
        if (initial) initial = !this.#initialEvent(ev, emit);
        else this.#watchEvent(ev, emit);
        if (signal.aborted || expired.signal.aborted) break;
      }
    } catch (err) {
      // The deadline's abort can surface as the request's own failure (no answer yet).
      if (signal.aborted || !expired.signal.aborted) throw err;
    } finally {
      this.#clock.clearTimeout(timer);
    }
    if (signal.aborted) return this.#delivered;
    if (expired.signal.aborted) {
      this.stats.watchDeadlinesHit++;
      log.warn(
        "watch of {resource} still open {graceMs} ms past its {timeoutSeconds} s timeout " +
          "(a half-open connection?); restarting it",
        {
          resource: resourceId(rt),
          graceMs: deadlineMs - timeout * 1000,
          timeoutSeconds: timeout,
        },
      );
    } else this.#progress();
    if (initial) {
      throw new WatchListIncomplete(
        `watch-list stream of ${resourceId(rt)} ended before its initial-events-end bookmark`,
      );
    }
    return this.#delivered && !expired.signal.aborted;
  }

  /**
   * Reports one event of a watch-list stream's initial phase; returns true once the bookmark
   * closing the initial state has arrived (the state is complete and its resourceVersion set).
   */
  #initialEvent(ev: WatchEvent<T>, emit: (ev: WatcherEvent<T>) => void): boolean {
    switch (ev.type) {
      case "ADDED":
      case "MODIFIED":
        if (this.#inShard(ev.object)) emit({ type: "initApply", object: ev.object });
        else this.#countFiltered(1);
        return false;
      case "DELETED":
        emit({ type: "initDelete", object: ev.object });
        return false;
      case "BOOKMARK": {
        const { annotations, resourceVersion } = ev.object.metadata;
        if (annotations?.[INITIAL_EVENTS_END_ANNOTATION] !== "true") return false;
        this.stats.watchListSyncs++;
        emit({ type: "initDone" });
        this.#setRv(resourceVersion ?? "");
        return true;
      }
      case "ERROR":
        throw this.#watchError(ev.object);
    }
  }

  /** Reports one event of an ordinary watch stream and moves the resourceVersion on. */
  #watchEvent(ev: WatchEvent<T>, emit: (ev: WatcherEvent<T>) => void): void {
    switch (ev.type) {
      case "ADDED":
      case "MODIFIED":
        if (this.#inShard(ev.object)) emit({ type: "apply", object: ev.object });
        else this.#countFiltered(1);
        break;
      case "DELETED":
        if (this.#inShard(ev.object)) emit({ type: "delete", object: ev.object });
        else this.#countFiltered(1);
        break;
      case "BOOKMARK":
        break;
      case "ERROR":
        throw this.#watchError(ev.object);
    }
    this.#setRv(ev.object.metadata.resourceVersion);
  }

  #watchError(status: Status): Error {
    const err = ApiError.fromStatus(status.code ?? 500, status, { resource: resourceId(this.rt) });
    return isGone(err) ? err : new WatchErrorEvent(err);
  }

  #setRv(rv: string | undefined): void {
    if (!rv) return;
    this.#rv = rv;
    this.stats.lastResourceVersion = rv;
  }
}

function jitter(ms: number): number {
  return ms * (1 + Math.random());
}
