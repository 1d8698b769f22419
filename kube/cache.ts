import type { Client, GetOptions, LabelSelector, ListOptions, Reader } from "./client.ts";
import { newApiError } from "./errors.ts";
import { deepCopy, type KubeObject, type ObjectList } from "./object.ts";
import { apiVersionOf, resourceId, type ResourceType } from "./resource.ts";
import { matchesLabels, parseFieldSelector, parseLabelSelector } from "./selector.ts";
import { type InformerOptions, SharedInformer } from "./informer.ts";
import type { ShardFilter } from "./sharding/filter.ts";
import { type HashRange, sameSet, union } from "./sharding/range.ts";
import { namespaceInRanges } from "./sharding/selector.ts";
import { type IndexFunc, stripManagedFields } from "./store.ts";

/**
 * What the cache keeps of one kind (controller-runtime's cache.ByObject). The selectors are
 * sent with the kind's list and watch, so the API server filters: objects outside them never
 * reach this process, which is what keeps the memory of a pod informer proportional to the
 * pods the operator manages rather than to the cluster. The price: for the cache (and so for
 * the manager's cached client) objects outside the scope do not exist — get answers NotFound,
 * list leaves them out, handlers never hear of them, and an object whose labels move out of
 * the scope is reported as deleted. Read such objects with the manager's apiReader.
 */
export interface ObjectScope<T extends KubeObject = KubeObject> {
  /** Label selector of the kind's list and watch ("cocoonset.cocoonstack.io/name", "a!=b"). */
  labelSelector?: LabelSelector;
  /** Field selector of the kind's list and watch ("spec.nodeName=n1"); server-indexed fields. */
  fieldSelector?: string;
  /**
   * Applied to every object of the kind before it is stored, after the cache-wide transform
   * (stripManagedFields unless informerDefaults replaces it). It may mutate its argument and
   * returns what to keep; it must not throw (the informer would retry the same event forever).
   */
  transform?(obj: T): T;
}

/** An ObjectScope bound to its kind: one entry of CacheOptions.byObject. */
export interface ByObject<T extends KubeObject = KubeObject> extends ObjectScope<T> {
  rt: ResourceType<T>;
}

/** Binds a scope to its kind with the transform typed by the kind (for CacheOptions.byObject). */
export function byObject<T extends KubeObject>(
  rt: ResourceType<T>,
  scope: ObjectScope<T>,
): ByObject {
  return { ...scope, rt };
}

export interface CacheOptions {
  client: Client;
  /** Restrict every informer to one namespace (default: all namespaces). */
  namespace?: string;
  /** Per-kind selectors and transforms; kinds not listed are cached whole. At most one per kind. */
  byObject?: ByObject[];
  /**
   * The replica's slice of the namespaces: every namespaced kind holds only objects whose
   * namespace hashes into the filter's ranges and re-scopes when they change (kube/watcher.ts);
   * cluster-scoped kinds are held whole. For the cache, objects of other namespaces do not
   * exist: get answers NotFound, list leaves them out. Absent: every namespace.
   */
  shard?: ShardFilter;
  /** Per-informer tuning (transform, backoff, page size) for tests and benchmarks. */
  informerDefaults?: Partial<Omit<InformerOptions<KubeObject>, "client" | "rt">>;
}

/** Fields the cache can answer without a registered index. */
const builtinFields: Record<string, (o: KubeObject) => string> = {
  "metadata.name": (o) => o.metadata.name ?? "",
  "metadata.namespace": (o) => o.metadata.namespace ?? "",
};

/**
 * One shared informer per kind and a Reader answering from them, like controller-runtime's
 * informer cache. Informers are created on first use; once the cache is started they start
 * immediately. Reads return deep copies, so callers may mutate what they get. A kind given an
 * ObjectScope holds (and answers with) only the objects inside it.
 */
export class InformerCache implements Reader {
  readonly #opts: CacheOptions;
  readonly #informers = new Map<string, SharedInformer<KubeObject>>();
  readonly #scopes = new Map<string, ObjectScope>();
  readonly #runs: Promise<void>[] = [];
  #signal?: AbortSignal;

  constructor(opts: CacheOptions) {
    this.#opts = opts;
    for (const { rt, ...scope } of opts.byObject ?? []) this.configure(rt, scope);
  }

  /**
   * Scopes a kind (see ObjectScope), for code that wires controllers after the manager exists.
   * The informer's list and watch are fixed when it is created, so this throws once anything
   * (a controller, an index, a read) has asked for the kind's informer, and for a kind that
   * already has a scope. Bad selector syntax throws here rather than at the first list.
   */
  configure<T extends KubeObject>(rt: ResourceType<T>, scope: ObjectScope<T>): void {
    const id = resourceId(rt);
    if (this.#informers.has(id)) {
      throw new Error(
        `cache scope of ${id} set after its informer was created; configure it before ` +
          `controllers, indexes or reads use the kind`,
      );
    }
    if (this.#scopes.has(id)) throw new Error(`cache scope of ${id} already configured`);
    parseLabelSelector(scope.labelSelector);
    parseFieldSelector(scope.fieldSelector);
    const { labelSelector, fieldSelector, transform } = scope;
    this.#scopes.set(id, { labelSelector, fieldSelector, transform });
  }

  /** The informer for a kind, created (and started if the cache runs) on first use. */
  informerFor<T extends KubeObject>(rt: ResourceType<T>): SharedInformer<T> {
    const id = resourceId(rt);
    let inf = this.#informers.get(id) as SharedInformer<T> | undefined;
    if (!inf) {
      const defaults = this.#opts.informerDefaults as Partial<InformerOptions<T>> | undefined;
      const scope = this.#scopes.get(id) as ObjectScope<T> | undefined;
      inf = new SharedInformer<T>({
        ...defaults,
        client: this.#opts.client,
        rt,
        namespace: this.#opts.namespace,
        labelSelector: scope?.labelSelector,
        fieldSelector: scope?.fieldSelector,
        shard: this.#opts.shard ?? defaults?.shard,
        transform: chain(defaults?.transform ?? stripManagedFields, scope?.transform),
      });
      this.#informers.set(id, inf as unknown as SharedInformer<KubeObject>);
      if (this.#signal) this.#runs.push(inf.run(this.#signal));
    }
    return inf;
  }

  /**
   * Registers a field index ("spec.podRef.name") answered by list({matchingFields}). Must be
   * called before the informer has synced, as in controller-runtime.
   */
  indexField<T extends KubeObject>(rt: ResourceType<T>, field: string, fn: IndexFunc<T>): void {
    const inf = this.informerFor(rt);
    if (inf.hasSynced()) throw new Error(`index ${field} on ${resourceId(rt)} added after sync`);
    inf.addIndex(field, fn);
  }

  /** Starts every informer (present and future) until the signal aborts. */
  start(signal: AbortSignal): void {
    if (this.#signal) throw new Error("cache already started");
    this.#signal = signal;
    for (const inf of this.#informers.values()) this.#runs.push(inf.run(signal));
  }

  /** Resolves when every informer created so far has synced. */
  async waitForSync(signal?: AbortSignal): Promise<void> {
    await Promise.all([...this.#informers.values()].map((i) => i.waitForSync(signal)));
  }

  /** The kinds whose informers have not synced yet ("pods", "cocoonsets.cocoonset…"). */
  unsynced(): string[] {
    return [...this.#informers.entries()].filter(([, i]) => !i.hasSynced()).map(([id]) => id);
  }

  /**
   * The kinds whose informers have heard nothing from the API server for at least limitMs
   * (see SharedInformer.msSinceProgress), with how long: the liveness check.
   */
  stalled(limitMs: number): { kind: string; ms: number }[] {
    return [...this.#informers.entries()]
      .map(([kind, i]) => ({ kind, ms: i.msSinceProgress() }))
      .filter((s) => s.ms >= limitMs);
  }

  /**
   * Sharded: true when every namespaced informer created so far holds a complete state taken
   * for ranges that cover `ranges` (so a replica may start reconciling them: its cache has
   * every object there). Unsharded caches hold everything: true once synced.
   */
  holdsRanges(ranges: readonly HashRange[]): boolean {
    return [...this.#informers.values()].every((i) => {
      if (!i.hasSynced()) return false;
      const held = i.heldRanges();
      // No held ranges on a synced informer: an unsharded or cluster-scoped one, holding all.
      return held === undefined || sameSet(union(held, ranges), held);
    });
  }

  /**
   * Whether objects of namespace are within the cache's reach: not when the cache watches one
   * other namespace, nor when a sharded cache's ranges leave namespace to another replica. For
   * the cache such objects do not exist; read them with the manager's apiReader.
   */
  holdsNamespace(namespace: string): boolean {
    if (this.#opts.namespace && namespace !== this.#opts.namespace) return false;
    const shard = this.#opts.shard ?? this.#opts.informerDefaults?.shard;
    return shard === undefined || namespaceInRanges(shard.ranges(), namespace);
  }

  /** True when every informer has synced (the readiness check). */
  hasSynced(): boolean {
    return [...this.#informers.values()].every((i) => i.hasSynced());
  }

  /** Resolves after every informer loop has returned (after the start signal aborted). */
  async stopped(): Promise<void> {
    await Promise.allSettled(this.#runs);
  }

  async #ready<T extends KubeObject>(
    rt: ResourceType<T>,
    signal?: AbortSignal,
  ): Promise<SharedInformer<T>> {
    const inf = this.informerFor(rt);
    if (!inf.hasSynced()) {
      if (!this.#signal) throw new Error(`cache not started; cannot read ${resourceId(rt)}`);
      await inf.waitForSync(signal ?? this.#signal);
    }
    return inf;
  }

  async get<T extends KubeObject>(
    rt: ResourceType<T>,
    namespace: string,
    name: string,
    opts?: GetOptions,
  ): Promise<T> {
    const inf = await this.#ready(rt, opts?.signal);
    const obj = inf.getStored(namespace, name);
    if (!obj) {
      throw newApiError(404, "NotFound", {
        resource: resourceId(rt),
        namespace: rt.namespaced ? namespace : undefined,
        name,
      }, `${resourceId(rt)} "${name}" not found`);
    }
    return deepCopy(obj);
  }

  async list<T extends KubeObject>(
    rt: ResourceType<T>,
    opts: ListOptions = {},
  ): Promise<ObjectList<T>> {
    const inf = await this.#ready(rt, opts.signal);
    if (opts.fieldSelector) {
      throw new Error("the cache answers matchingFields, not raw field selectors");
    }
    const labels = parseLabelSelector(opts.labelSelector);
    const fields = Object.entries(opts.matchingFields ?? {});
    // Start from the narrowest registered index (a field's, else the namespace's), then filter
    // by everything else.
    const indexed = fields.find(([f]) => inf.hasIndex(f));
    const candidates: Iterable<T> = indexed
      ? inf.byIndex(indexed[0], indexed[1])
      : opts.namespace
      ? inf.listStoredIn(opts.namespace)
      : inf.listStored();
    for (const [f] of fields) {
      if (!inf.hasIndex(f) && !(f in builtinFields)) {
        throw new Error(`no index registered for field ${f} on ${resourceId(rt)}`);
      }
    }
    const keyed: [key: string, item: T][] = [];
    const rest = fields.filter(([f]) => f !== indexed?.[0]);
    for (const o of candidates) {
      if (opts.namespace && o.metadata.namespace !== opts.namespace) continue;
      if (!matchesLabels(labels, o.metadata.labels)) continue;
      if (
        !rest.every(([f, v]) =>
          f in builtinFields ? builtinFields[f](o) === v : inf.byIndex(f, v).includes(o)
        )
      ) continue;
      keyed.push([`${o.metadata.namespace ?? ""}/${o.metadata.name}`, o]);
    }
    // Sorted by namespace/name (each key built once), then copied: a list reads in a stable order.
    keyed.sort(([a], [b]) => a < b ? -1 : a > b ? 1 : 0);
    const items = keyed.map(([, o]) => opts.unsafeDisableDeepCopy ? o : deepCopy(o));
    return {
      apiVersion: apiVersionOf(rt),
      kind: `${rt.kind}List`,
      metadata: { resourceVersion: inf.stats.lastResourceVersion },
      items,
    };
  }
}

/** The cache-wide transform followed by the kind's own, if any. */
function chain<T extends KubeObject>(
  base: (obj: T) => T,
  own: ((obj: T) => T) | undefined,
): (obj: T) => T {
  return own ? (obj) => own(base(obj)) : base;
}
