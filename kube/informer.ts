import { getLogger } from "@logtape/logtape";
import { type Clock, realClock, sleep } from "./clock.ts";
import {
  type Client,
  initialEventsEndAnnotation,
  type LabelSelector,
  type WatchEvent,
} from "./client.ts";
import { ApiError, errorMessage, isGone } from "./errors.ts";
import { deepCopy, keyString, type KubeObject, objectKey, type Status } from "./object.ts";
import { resourceId, type ResourceType } from "./resource.ts";
import type { EventHandler, Informer } from "./source.ts";

const log = getLogger(["cocoon-operator", "cache"]);

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

/** Maps an object to the index values it is filed under (e.g. its spec.podRef.name). */
export type IndexFunc<T extends KubeObject> = (obj: T) => string[];

/** Drops metadata.managedFields: the operator never reads them and they dominate memory. */
export function stripManagedFields<T extends KubeObject>(obj: T): T {
  if (obj.metadata.managedFields) delete obj.metadata.managedFields;
  return obj;
}

export interface InformerOptions<T extends KubeObject> {
  client: Client;
  rt: ResourceType<T>;
  /** Watch one namespace only; default all. */
  namespace?: string;
  /**
   * Server-side filters of the list and the watch: objects outside them are never received,
   * and an object leaving them arrives as DELETED (entering: ADDED), as the API server reports.
   */
  labelSelector?: LabelSelector;
  /** Raw field selector ("spec.nodeName=n1"); only fields the server indexes for the kind. */
  fieldSelector?: string;
  /** Applied to every object before it is stored; defaults to stripManagedFields. */
  transform?: (obj: T) => T;
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
   * then WATCH. Default false: the manager turns it on for the operator.
   */
  watchList?: boolean;
  /** Time source of the backoff pauses (tests). */
  clock?: Clock;
}

/** The informer's view of what it has stored, for readers and tests. */
export interface InformerStats {
  lists: number;
  watches: number;
  relistsAfterGone: number;
  lastResourceVersion: string;
  /** Initial states taken from a watch-list stream (not counted in lists). */
  watchListSyncs: number;
  /** Watch-list attempts that fell back to LIST + WATCH. */
  watchListFallbacks: number;
  /** Watches this side ended because they outlived their deadline (a half-open connection). */
  watchDeadlinesHit: number;
}

/**
 * A shared informer for one kind: lists, then watches from the list's resourceVersion with
 * bookmarks, resumes from the last seen resourceVersion after a dropped stream, relists only
 * on 410 Gone (diffing the fresh list against the store so nothing is lost or repeated), and
 * backs off on errors. There is no periodic resync: handlers hear only real changes.
 */
export class SharedInformer<T extends KubeObject> implements Informer<T> {
  readonly rt: ResourceType<T>;
  readonly #opts: InformerOptions<T>;
  readonly #store = new Map<string, T>();
  readonly #indexers = new Map<string, IndexFunc<T>>();
  readonly #indexes = new Map<string, Map<string, Set<string>>>();
  readonly #handlers: EventHandler<T>[] = [];
  #synced = false;
  #syncWaiters: (() => void)[] = [];
  #rv = "";
  #running = false;
  /** Whether the current watch attempt delivered anything (the connection worked). */
  #delivered = false;
  readonly #clock: Clock;
  /** When the server last answered anything (a list page, a watch opening, an event). */
  #lastProgressAt: number;
  readonly stats: InformerStats = {
    lists: 0,
    watches: 0,
    relistsAfterGone: 0,
    lastResourceVersion: "",
    watchListSyncs: 0,
    watchListFallbacks: 0,
    watchDeadlinesHit: 0,
  };

  constructor(opts: InformerOptions<T>) {
    this.#opts = opts;
    this.rt = opts.rt;
    this.#clock = opts.clock ?? realClock;
    this.#lastProgressAt = this.#clock.now();
  }

  /**
   * Milliseconds since the API server last answered this informer: a list page, a watch being
   * accepted, an event or bookmark, a stream ending cleanly. An idle kind on a server without
   * bookmarks still shows progress once per watch timeout (5–10 min), when its watch is renewed.
   */
  msSinceProgress(): number {
    return this.#clock.now() - this.#lastProgressAt;
  }

  #progress(): void {
    this.#lastProgressAt = this.#clock.now();
  }

  addEventHandler(handler: EventHandler<T>): void {
    this.#handlers.push(handler);
    if (this.#synced) {
      for (const obj of this.#store.values()) safeCall(() => handler.onAdd?.(obj, true), this.rt);
    }
  }

  /** Registers a field index; must be called before run(). */
  addIndex(name: string, fn: IndexFunc<T>): void {
    if (this.#indexers.has(name)) {
      throw new Error(`index ${name} already registered for ${resourceId(this.rt)}`);
    }
    this.#indexers.set(name, fn);
    const idx = new Map<string, Set<string>>();
    this.#indexes.set(name, idx);
    for (const [key, obj] of this.#store) this.#indexInsert(name, fn, key, obj);
  }

  hasIndex(name: string): boolean {
    return this.#indexers.has(name);
  }

  hasSynced(): boolean {
    return this.#synced;
  }

  /** Resolves once the first list is stored and delivered, or rejects when the signal aborts. */
  waitForSync(signal?: AbortSignal): Promise<void> {
    if (this.#synced) return Promise.resolve();
    return new Promise((resolve, reject) => {
      const onAbort = () =>
        reject(
          new Error(`${resourceId(this.rt)} cache did not sync: ${signal?.reason ?? "aborted"}`),
        );
      if (signal?.aborted) return onAbort();
      signal?.addEventListener("abort", onAbort, { once: true });
      this.#syncWaiters.push(() => {
        signal?.removeEventListener("abort", onAbort);
        resolve();
      });
    });
  }

  /** The stored object (shared, do not mutate) or undefined. */
  getStored(namespace: string, name: string): T | undefined {
    return this.#store.get(this.rt.namespaced ? `${namespace}/${name}` : name);
  }

  /** All stored objects (shared, do not mutate). */
  listStored(): IterableIterator<T> {
    return this.#store.values();
  }

  /** Stored objects filed under value in the named index (shared, do not mutate). */
  byIndex(name: string, value: string): T[] {
    const idx = this.#indexes.get(name);
    if (!idx) throw new Error(`no index ${name} registered for ${resourceId(this.rt)}`);
    return [...(idx.get(value) ?? [])].map((k) => this.#store.get(k)!).filter(Boolean);
  }

  get size(): number {
    return this.#store.size;
  }

  /** Runs list+watch until the signal aborts. */
  async run(signal: AbortSignal): Promise<void> {
    if (this.#running) throw new Error(`${resourceId(this.rt)} informer already running`);
    this.#running = true;
    const minBackoff = this.#opts.minBackoffMs ?? 800;
    const maxBackoff = this.#opts.maxBackoffMs ?? 30_000;
    const clock = this.#clock;
    let backoff = minBackoff;
    this.#progress();
    try {
      while (!signal.aborted) {
        this.#delivered = false;
        try {
          const healthy = this.#rv
            ? await this.#watchOnce(signal, false)
            : await this.#sync(signal);
          if (healthy) backoff = minBackoff;
          // A stream the server closed without sending anything is retried after a pause so
          // a misbehaving endpoint cannot spin this loop.
          else await sleep(clock, jitter(minBackoff), signal);
        } catch (err) {
          if (signal.aborted) break;
          if (isGone(err)) {
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
            error: String(err),
          });
          await sleep(clock, jitter(backoff), signal);
          backoff = Math.min(maxBackoff, backoff * 2);
        }
      }
    } finally {
      this.#running = false;
    }
  }

  /**
   * Takes the initial state (no resourceVersion yet, or one in doubt) and goes on watching:
   * through a watch-list stream when enabled, else (or when that attempt fails before the
   * initial state is complete) with LIST then WATCH. Returns what #watchOnce returns.
   */
  async #sync(signal: AbortSignal): Promise<boolean> {
    if (this.#opts.watchList) {
      try {
        return await this.#watchOnce(signal, true);
      } catch (err) {
        // Past the initial-events-end bookmark the stream is an ordinary watch and its errors
        // are handled as such; before it, nothing was stored, and a LIST is tried at once.
        if (signal.aborted || this.#rv) throw err;
        this.stats.watchListFallbacks++;
        log.info("watch-list of {resource} not available, using list+watch: {error}", {
          resource: resourceId(this.rt),
          error: errorMessage(err),
        });
      }
    }
    await this.#relist(signal);
    return await this.#watchOnce(signal, false);
  }

  /** Lists everything and reconciles the store with it, emitting only the differences. */
  async #relist(signal: AbortSignal): Promise<void> {
    const { client, rt, namespace, labelSelector, fieldSelector } = this.#opts;
    const fresh = new Map<string, T>();
    let cont: string | undefined;
    let rv = "";
    let paged = true;
    for (;;) {
      let page;
      try {
        page = await client.list(rt, {
          namespace,
          labelSelector,
          fieldSelector,
          limit: paged ? this.#opts.pageSize ?? 500 : undefined,
          continue: cont,
          signal,
        });
      } catch (err) {
        if (!isGone(err)) throw err;
        // The snapshot behind the continue token was compacted mid-way: like client-go's
        // pager, start over with one unpaged list rather than paging into the same expiry.
        if (cont) {
          fresh.clear();
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
      for (const item of page.items) {
        const obj = this.#transform(item);
        fresh.set(keyString(objectKey(obj)), obj);
      }
      cont = page.metadata.continue;
      rv = page.metadata.resourceVersion ?? "";
      if (!cont) break;
    }
    this.stats.lists++;
    this.#replace(fresh, rv);
  }

  /**
   * Reconciles the store with a complete state (a list, or a watch-list stream's initial
   * events) taken at resourceVersion rv, emitting only the differences, and marks the informer
   * synced the first time.
   */
  #replace(fresh: Map<string, T>, rv: string): void {
    const initial = !this.#synced;
    for (const [key, old] of [...this.#store]) {
      if (!fresh.has(key)) this.#remove(key, old);
    }
    for (const [key, obj] of fresh) {
      const old = this.#store.get(key);
      if (!old) this.#add(key, obj, initial);
      else if (old.metadata.resourceVersion !== obj.metadata.resourceVersion) {
        this.#update(key, old, obj);
      }
    }
    this.#setRv(rv);
    if (initial) {
      this.#synced = true;
      for (const w of this.#syncWaiters.splice(0)) w();
    }
  }

  /**
   * One watch stream from the current resourceVersion, or (listing) a watch-list stream whose
   * initial events are gathered and stored once its initial-events-end bookmark arrives.
   * Returns true when it delivered something (the connection was healthy), false when it ended
   * with nothing. A stream still open a little past its server timeout is ended from this side
   * (the connection went half-open) and counts as having delivered nothing.
   */
  async #watchOnce(signal: AbortSignal, listing: boolean): Promise<boolean> {
    const { client, rt, namespace, labelSelector, fieldSelector } = this.#opts;
    const timeout = this.#opts.watchTimeoutSeconds?.() ?? 300 + Math.floor(Math.random() * 300);
    const deadlineMs = timeout * 1000 + (this.#opts.watchDeadlineGraceMs ?? 30_000);
    const expired = new AbortController();
    const timer = this.#clock.setTimeout(
      () => expired.abort(new Error(`watch open past its ${timeout} s timeout`)),
      deadlineMs,
    );
    this.stats.watches++;
    /** The initial state of a watch-list stream, until its end bookmark; then undefined. */
    let initial: Map<string, T> | undefined = listing ? new Map() : undefined;
    try {
      const stream = client.watch(rt, {
        namespace,
        labelSelector,
        fieldSelector,
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
        if (initial) {
          const endRv = this.#gatherInitial(initial, ev);
          if (endRv !== undefined) {
            this.stats.watchListSyncs++;
            this.#replace(initial, endRv);
            initial = undefined;
          }
        } else this.#apply(ev);
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
   * Files one event of a watch-list stream's initial phase into initial; once the bookmark
   * closing the initial state arrives, returns its resourceVersion (the state's).
   */
  #gatherInitial(initial: Map<string, T>, ev: WatchEvent<T>): string | undefined {
    switch (ev.type) {
      case "ADDED":
      case "MODIFIED": {
        const obj = this.#transform(ev.object);
        initial.set(keyString(objectKey(obj)), obj);
        return undefined;
      }
      case "DELETED":
        initial.delete(keyString(objectKey(ev.object)));
        return undefined;
      case "BOOKMARK": {
        const { annotations, resourceVersion } = ev.object.metadata;
        return annotations?.[initialEventsEndAnnotation] === "true"
          ? resourceVersion ?? ""
          : undefined;
      }
      case "ERROR":
        throw this.#watchError(ev.object);
    }
  }

  #watchError(status: Status): Error {
    const err = ApiError.fromStatus(status.code ?? 500, status, { resource: resourceId(this.rt) });
    return isGone(err) ? err : new WatchErrorEvent(err);
  }

  /** Applies one event of an ordinary watch stream to the store. */
  #apply(ev: WatchEvent<T>): void {
    switch (ev.type) {
      case "ADDED":
      case "MODIFIED": {
        const obj = this.#transform(ev.object);
        const key = keyString(objectKey(obj));
        const old = this.#store.get(key);
        if (!old) this.#add(key, obj, false);
        else if (old.metadata.resourceVersion !== obj.metadata.resourceVersion) {
          this.#update(key, old, obj);
        }
        this.#setRv(obj.metadata.resourceVersion);
        break;
      }
      case "DELETED": {
        const key = keyString(objectKey(ev.object));
        const old = this.#store.get(key);
        if (old) this.#remove(key, this.#transform(ev.object));
        this.#setRv(ev.object.metadata.resourceVersion);
        break;
      }
      case "BOOKMARK":
        this.#setRv(ev.object.metadata.resourceVersion);
        break;
      case "ERROR":
        throw this.#watchError(ev.object);
    }
  }

  #setRv(rv: string | undefined): void {
    if (!rv) return;
    this.#rv = rv;
    this.stats.lastResourceVersion = rv;
  }

  #transform(obj: T): T {
    return (this.#opts.transform ?? stripManagedFields)(obj);
  }

  #add(key: string, obj: T, initial: boolean): void {
    this.#store.set(key, obj);
    this.#indexAll(key, obj);
    // A snapshot: a handler registered by another handler mid-dispatch was already replayed
    // the store (which holds obj) and must not hear this event a second time.
    for (const h of [...this.#handlers]) safeCall(() => h.onAdd?.(obj, initial), this.rt);
  }

  #update(key: string, old: T, obj: T): void {
    this.#unindexAll(key, old);
    this.#store.set(key, obj);
    this.#indexAll(key, obj);
    for (const h of [...this.#handlers]) safeCall(() => h.onUpdate?.(old, obj), this.rt);
  }

  #remove(key: string, last: T): void {
    const old = this.#store.get(key);
    if (old) this.#unindexAll(key, old);
    this.#store.delete(key);
    for (const h of [...this.#handlers]) safeCall(() => h.onDelete?.(last), this.rt);
  }

  #indexAll(key: string, obj: T): void {
    for (const [name, fn] of this.#indexers) this.#indexInsert(name, fn, key, obj);
  }

  #indexInsert(name: string, fn: IndexFunc<T>, key: string, obj: T): void {
    const idx = this.#indexes.get(name)!;
    for (const v of safeIndex(fn, obj)) {
      let keys = idx.get(v);
      if (!keys) idx.set(v, keys = new Set());
      keys.add(key);
    }
  }

  #unindexAll(key: string, obj: T): void {
    for (const [name, fn] of this.#indexers) {
      const idx = this.#indexes.get(name)!;
      for (const v of safeIndex(fn, obj)) {
        const keys = idx.get(v);
        keys?.delete(key);
        if (keys?.size === 0) idx.delete(v);
      }
    }
  }
}

/** A copy for callers who will mutate what they read. */
export function copyOut<T extends KubeObject>(obj: T): T {
  return deepCopy(obj);
}

function safeIndex<T extends KubeObject>(fn: IndexFunc<T>, obj: T): string[] {
  try {
    return fn(obj);
  } catch (err) {
    log.error("index function failed for {name}: {error}", {
      name: obj.metadata.name,
      error: String(err),
    });
    return [];
  }
}

function safeCall(fn: () => void, rt: ResourceType): void {
  try {
    fn();
  } catch (err) {
    // A broken handler must not stop the informer from delivering to the others.
    log.error("event handler for {resource} threw: {error}", {
      resource: resourceId(rt),
      error: String(err),
    });
  }
}

function jitter(ms: number): number {
  return ms * (1 + Math.random());
}
