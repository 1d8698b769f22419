/**
 * The store of one kind (kube-rs's reflector Store, client-go's Indexer): the objects the
 * watcher (kube/watcher.ts) reported, keyed by namespace/name, with the field indexes readers
 * registered. It is filled by applying watcher events; each change it makes is reported to the
 * caller at the moment it is made (the informer dispatches it to handlers), so a handler sees
 * the store as it stands right after that one change.
 *
 * @module
 */
import { getLogger } from "@logtape/logtape";
import { errorText } from "./errors.ts";
import { keyString, type KubeObject, objectKey } from "./object.ts";
import { resourceId, type ResourceType } from "./resource.ts";
import type { WatcherEvent } from "./watcher.ts";

const log = getLogger(["cocoon-operator", "cache"]);

/** Maps an object to the index values it is filed under (e.g. its spec.podRef.name). */
export type IndexFunc<T extends KubeObject> = (obj: T) => string[];

/** Drops metadata.managedFields: the operator never reads them and they dominate memory. */
export function stripManagedFields<T extends KubeObject>(obj: T): T {
  if (obj.metadata.managedFields) delete obj.metadata.managedFields;
  return obj;
}

/** One change the store made, in the words of an informer's handlers. */
export type StoreChange<T extends KubeObject> =
  /** initial: the object came with the first complete state (the initial list). */
  | { type: "add"; object: T; initial: boolean }
  | { type: "update"; old: T; object: T }
  /** object: the last state of the deleted object, as the watch reported it. */
  | { type: "delete"; object: T };

export interface StoreOptions<T extends KubeObject> {
  rt: ResourceType<T>;
  /** Applied to every object before it is stored; defaults to stripManagedFields. */
  transform?: (obj: T) => T;
}

/**
 * The indexed cache of one kind. Objects handed out are shared: readers must not mutate them.
 * An object whose resourceVersion did not change is not stored again (no update is reported).
 */
export class Store<T extends KubeObject> {
  readonly rt: ResourceType<T>;
  readonly #transform: (obj: T) => T;
  readonly #objects = new Map<string, T>();
  readonly #indexers = new Map<string, IndexFunc<T>>();
  readonly #indexes = new Map<string, Map<string, Set<string>>>();
  /**
   * Keys by namespace, always kept (controller-runtime's cache has the same built-in index): a
   * list in one namespace reads that namespace's objects, not every object of the kind.
   */
  readonly #byNamespace = new Map<string, Set<string>>();
  /** The complete state being gathered between initStart and initDone; else undefined. */
  #pending: Map<string, T> | undefined;
  #synced = false;

  constructor(opts: StoreOptions<T>) {
    this.rt = opts.rt;
    this.#transform = opts.transform ?? stripManagedFields;
  }

  /** Whether a complete state (the initial list) has been applied. */
  hasSynced(): boolean {
    return this.#synced;
  }

  /**
   * Applies one watcher event, calling onChange right after each change it makes. A complete
   * state (initStart … initDone) is gathered aside and replaces the stored one at initDone,
   * reporting only the differences.
   */
  apply(ev: WatcherEvent<T>, onChange: (change: StoreChange<T>) => void): void {
    switch (ev.type) {
      case "initStart":
        this.#pending = new Map();
        return;
      case "initApply": {
        const obj = this.#transform(ev.object);
        this.#pendingState().set(keyString(objectKey(obj)), obj);
        return;
      }
      case "initDelete":
        this.#pendingState().delete(keyString(objectKey(ev.object)));
        return;
      case "initDone":
        this.#replace(this.#pendingState(), onChange);
        this.#pending = undefined;
        return;
      case "apply": {
        const obj = this.#transform(ev.object);
        const key = keyString(objectKey(obj));
        const old = this.#objects.get(key);
        if (!old) this.#add(key, obj, false, onChange);
        else if (old.metadata.resourceVersion !== obj.metadata.resourceVersion) {
          this.#update(key, old, obj, onChange);
        }
        return;
      }
      case "delete": {
        const key = keyString(objectKey(ev.object));
        if (this.#objects.has(key)) this.#remove(key, this.#transform(ev.object), onChange);
        return;
      }
    }
  }

  /** Registers a field index, filing the objects already stored. */
  addIndex(name: string, fn: IndexFunc<T>): void {
    if (this.#indexers.has(name)) {
      throw new Error(`index ${name} already registered for ${resourceId(this.rt)}`);
    }
    this.#indexers.set(name, fn);
    this.#indexes.set(name, new Map());
    for (const [key, obj] of this.#objects) this.#indexInsert(name, fn, key, obj);
  }

  hasIndex(name: string): boolean {
    return this.#indexers.has(name);
  }

  /** The stored object (shared, do not mutate) or undefined. */
  get(namespace: string, name: string): T | undefined {
    return this.#objects.get(this.rt.namespaced ? `${namespace}/${name}` : name);
  }

  /** All stored objects (shared, do not mutate). */
  list(): IterableIterator<T> {
    return this.#objects.values();
  }

  /** The stored objects of one namespace (shared, do not mutate). */
  *inNamespace(namespace: string): IterableIterator<T> {
    for (const key of this.#byNamespace.get(namespace) ?? []) {
      const obj = this.#objects.get(key);
      if (obj) yield obj;
    }
  }

  /** Stored objects filed under value in the named index (shared, do not mutate). */
  byIndex(name: string, value: string): T[] {
    const idx = this.#indexes.get(name);
    if (!idx) throw new Error(`no index ${name} registered for ${resourceId(this.rt)}`);
    return [...(idx.get(value) ?? [])].map((k) => this.#objects.get(k)!).filter(Boolean);
  }

  get size(): number {
    return this.#objects.size;
  }

  #pendingState(): Map<string, T> {
    // The watcher always opens a complete state with initStart; this only guards misuse.
    if (!this.#pending) throw new Error(`${resourceId(this.rt)} store: state event outside init`);
    return this.#pending;
  }

  /** Reconciles the stored state with a complete one, reporting only the differences. */
  #replace(fresh: Map<string, T>, onChange: (change: StoreChange<T>) => void): void {
    const initial = !this.#synced;
    for (const [key, old] of [...this.#objects]) {
      if (!fresh.has(key)) this.#remove(key, old, onChange);
    }
    for (const [key, obj] of fresh) {
      const old = this.#objects.get(key);
      if (!old) this.#add(key, obj, initial, onChange);
      else if (old.metadata.resourceVersion !== obj.metadata.resourceVersion) {
        this.#update(key, old, obj, onChange);
      }
    }
    this.#synced = true;
  }

  #add(key: string, obj: T, initial: boolean, onChange: (c: StoreChange<T>) => void): void {
    this.#objects.set(key, obj);
    this.#indexAll(key, obj);
    onChange({ type: "add", object: obj, initial });
  }

  #update(key: string, old: T, obj: T, onChange: (c: StoreChange<T>) => void): void {
    this.#unindexAll(key, old);
    this.#objects.set(key, obj);
    this.#indexAll(key, obj);
    onChange({ type: "update", old, object: obj });
  }

  #remove(key: string, last: T, onChange: (c: StoreChange<T>) => void): void {
    const old = this.#objects.get(key);
    if (old) this.#unindexAll(key, old);
    this.#objects.delete(key);
    onChange({ type: "delete", object: last });
  }

  #indexAll(key: string, obj: T): void {
    const ns = obj.metadata.namespace ?? "";
    let keys = this.#byNamespace.get(ns);
    if (!keys) this.#byNamespace.set(ns, keys = new Set());
    keys.add(key);
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
    const ns = obj.metadata.namespace ?? "";
    const inNs = this.#byNamespace.get(ns);
    inNs?.delete(key);
    if (inNs?.size === 0) this.#byNamespace.delete(ns);
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

function safeIndex<T extends KubeObject>(fn: IndexFunc<T>, obj: T): string[] {
  try {
    return fn(obj);
  } catch (err) {
    log.error("index function failed for {name}: {error}", {
      name: obj.metadata.name,
      error: errorText(err),
    });
    return [];
  }
}
