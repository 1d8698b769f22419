import { getLogger } from "@logtape/logtape";
import { type Clock, realClock, sleep } from "./clock.ts";
import type { Client, LabelSelector } from "./client.ts";
import { ApiError, errorMessage, isGone } from "./errors.ts";
import { deepCopy, keyString, type KubeObject, objectKey } from "./object.ts";
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
  /** Time source of the backoff pauses (tests). */
  clock?: Clock;
}

/** The informer's view of what it has stored, for readers and tests. */
export interface InformerStats {
  lists: number;
  watches: number;
  relistsAfterGone: number;
  lastResourceVersion: string;
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
  readonly stats: InformerStats = {
    lists: 0,
    watches: 0,
    relistsAfterGone: 0,
    lastResourceVersion: "",
  };

  constructor(opts: InformerOptions<T>) {
    this.#opts = opts;
    this.rt = opts.rt;
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
    const clock = this.#opts.clock ?? realClock;
    let backoff = minBackoff;
    try {
      while (!signal.aborted) {
        this.#delivered = false;
        try {
          if (!this.#rv) await this.#relist(signal);
          const healthy = await this.#watchOnce(signal);
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
      for (const item of page.items) {
        const obj = this.#transform(item);
        fresh.set(keyString(objectKey(obj)), obj);
      }
      cont = page.metadata.continue;
      rv = page.metadata.resourceVersion ?? "";
      if (!cont) break;
    }
    this.stats.lists++;
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
   * One watch stream from the current resourceVersion. Returns true when it delivered
   * something (the connection was healthy), false when it ended with nothing.
   */
  async #watchOnce(signal: AbortSignal): Promise<boolean> {
    const { client, rt, namespace, labelSelector, fieldSelector } = this.#opts;
    const timeout = this.#opts.watchTimeoutSeconds?.() ?? 300 + Math.floor(Math.random() * 300);
    this.stats.watches++;
    const stream = client.watch(rt, {
      namespace,
      labelSelector,
      fieldSelector,
      resourceVersion: this.#rv,
      allowWatchBookmarks: true,
      timeoutSeconds: timeout,
      signal,
    });
    for await (const ev of stream) {
      this.#delivered = true;
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
        case "ERROR": {
          const err = ApiError.fromStatus(ev.object.code ?? 500, ev.object, {
            resource: resourceId(rt),
          });
          throw isGone(err) ? err : new WatchErrorEvent(err);
        }
      }
      if (signal.aborted) break;
    }
    return this.#delivered;
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
