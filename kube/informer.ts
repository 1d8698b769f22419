/**
 * The shared informer of one kind, a composition of three parts (kube-rs's watcher → reflector
 * → controller, client-go's SharedIndexInformer): the {@link ListWatcher} (kube/watcher.ts)
 * talks to the API server and reports events, the {@link Store} (kube/store.ts) applies them
 * and reports each change it makes, and this class hands every change to the registered
 * handlers and tells waiters when the first complete state is in.
 *
 * @module
 */
import { getLogger } from "@logtape/logtape";
import { errorText } from "./errors.ts";
import type { KubeObject } from "./object.ts";
import { resourceId, type ResourceType } from "./resource.ts";
import type { HashRange } from "./sharding/range.ts";
import type { EventHandler, Informer } from "./source.ts";
import { type IndexFunc, Store, type StoreChange, type StoreOptions } from "./store.ts";
import {
  ListWatcher,
  type WatcherEvent,
  type WatcherOptions,
  type WatcherStats,
} from "./watcher.ts";

const log = getLogger(["cocoon-operator", "cache"]);

/** Everything the watcher and the store of one kind are configured with. */
export interface InformerOptions<T extends KubeObject> extends WatcherOptions<T> {
  /** Applied to every object before it is stored; defaults to stripManagedFields. */
  transform?: StoreOptions<T>["transform"];
}

/** The informer's counters: the watcher's (lists, watches, relists, resourceVersion). */
export type InformerStats = WatcherStats;

/**
 * A shared informer for one kind: lists, then watches, keeping a store handlers and readers
 * share (see the module doc). There is no periodic resync: handlers hear only real changes.
 */
export class SharedInformer<T extends KubeObject> implements Informer<T> {
  readonly rt: ResourceType<T>;
  readonly #watcher: ListWatcher<T>;
  readonly #store: Store<T>;
  readonly #handlers: EventHandler<T>[] = [];
  #syncWaiters: (() => void)[] = [];
  readonly stats: InformerStats;

  constructor(opts: InformerOptions<T>) {
    this.rt = opts.rt;
    this.#watcher = new ListWatcher(opts);
    this.#store = new Store({ rt: opts.rt, transform: opts.transform });
    this.stats = this.#watcher.stats;
  }

  /** Sharded: the ranges the store holds now (see ListWatcher.heldRanges). */
  heldRanges(): readonly HashRange[] | undefined {
    return this.#watcher.heldRanges();
  }

  /** Milliseconds since the API server last answered this informer (see ListWatcher). */
  msSinceProgress(): number {
    return this.#watcher.msSinceProgress();
  }

  addEventHandler(handler: EventHandler<T>): void {
    this.#handlers.push(handler);
    if (this.#store.hasSynced()) {
      for (const obj of this.#store.list()) safeCall(() => handler.onAdd?.(obj, true), this.rt);
    }
  }

  /** Registers a field index; must be called before run(). */
  addIndex(name: string, fn: IndexFunc<T>): void {
    this.#store.addIndex(name, fn);
  }

  hasIndex(name: string): boolean {
    return this.#store.hasIndex(name);
  }

  hasSynced(): boolean {
    return this.#store.hasSynced();
  }

  /** Resolves once the first list is stored and delivered, or rejects when the signal aborts. */
  waitForSync(signal?: AbortSignal): Promise<void> {
    if (this.hasSynced()) return Promise.resolve();
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
    return this.#store.get(namespace, name);
  }

  /** All stored objects (shared, do not mutate). */
  listStored(): IterableIterator<T> {
    return this.#store.list();
  }

  /** The stored objects of one namespace (shared, do not mutate). */
  listStoredIn(namespace: string): IterableIterator<T> {
    return this.#store.inNamespace(namespace);
  }

  /** Stored objects filed under value in the named index (shared, do not mutate). */
  byIndex(name: string, value: string): T[] {
    return this.#store.byIndex(name, value);
  }

  get size(): number {
    return this.#store.size;
  }

  /** Runs list+watch until the signal aborts. */
  run(signal: AbortSignal): Promise<void> {
    return this.#watcher.run(signal, (ev) => this.#onWatcherEvent(ev));
  }

  #onWatcherEvent(ev: WatcherEvent<T>): void {
    const wasSynced = this.#store.hasSynced();
    this.#store.apply(ev, (change) => this.#dispatch(change));
    if (!wasSynced && this.#store.hasSynced()) {
      for (const w of this.#syncWaiters.splice(0)) w();
    }
  }

  #dispatch(change: StoreChange<T>): void {
    // A snapshot: a handler registered by another handler mid-dispatch was already replayed
    // the store (which holds the object) and must not hear this event a second time.
    const handlers = [...this.#handlers];
    switch (change.type) {
      case "add":
        for (const h of handlers) safeCall(() => h.onAdd?.(change.object, change.initial), this.rt);
        break;
      case "update":
        for (const h of handlers) safeCall(() => h.onUpdate?.(change.old, change.object), this.rt);
        break;
      case "delete":
        for (const h of handlers) safeCall(() => h.onDelete?.(change.object), this.rt);
        break;
    }
  }
}

function safeCall(fn: () => void, rt: ResourceType): void {
  try {
    fn();
  } catch (err) {
    // A broken handler must not stop the informer from delivering to the others.
    log.error("event handler for {resource} threw: {error}", {
      resource: resourceId(rt),
      error: errorText(err),
    });
  }
}
