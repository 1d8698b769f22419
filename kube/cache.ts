import type { Client, GetOptions, ListOptions, Reader } from "./client.ts";
import { newApiError } from "./errors.ts";
import { deepCopy, type KubeObject, type ObjectList } from "./object.ts";
import { apiVersionOf, resourceId, type ResourceType } from "./resource.ts";
import { matchesLabels, parseLabelSelector } from "./selector.ts";
import { type IndexFunc, type InformerOptions, SharedInformer } from "./informer.ts";

export interface CacheOptions {
  client: Client;
  /** Restrict every informer to one namespace (default: all namespaces). */
  namespace?: string;
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
 * immediately. Reads return deep copies, so callers may mutate what they get.
 */
export class InformerCache implements Reader {
  readonly #opts: CacheOptions;
  readonly #informers = new Map<string, SharedInformer<KubeObject>>();
  readonly #runs: Promise<void>[] = [];
  #signal?: AbortSignal;

  constructor(opts: CacheOptions) {
    this.#opts = opts;
  }

  /** The informer for a kind, created (and started if the cache runs) on first use. */
  informerFor<T extends KubeObject>(rt: ResourceType<T>): SharedInformer<T> {
    const id = resourceId(rt);
    let inf = this.#informers.get(id) as SharedInformer<T> | undefined;
    if (!inf) {
      inf = new SharedInformer<T>({
        ...(this.#opts.informerDefaults as Partial<InformerOptions<T>>),
        client: this.#opts.client,
        rt,
        namespace: this.#opts.namespace,
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
    // Start from the narrowest registered index, then filter by everything else.
    const indexed = fields.find(([f]) => inf.hasIndex(f));
    const candidates: Iterable<T> = indexed
      ? inf.byIndex(indexed[0], indexed[1])
      : inf.listStored();
    for (const [f] of fields) {
      if (!inf.hasIndex(f) && !(f in builtinFields)) {
        throw new Error(`no index registered for field ${f} on ${resourceId(rt)}`);
      }
    }
    const items: T[] = [];
    const rest = fields.filter(([f]) => f !== indexed?.[0]);
    for (const o of candidates) {
      if (opts.namespace && o.metadata.namespace !== opts.namespace) continue;
      if (!matchesLabels(labels, o.metadata.labels)) continue;
      if (
        !rest.every(([f, v]) =>
          f in builtinFields ? builtinFields[f](o) === v : inf.byIndex(f, v).includes(o)
        )
      ) continue;
      items.push(deepCopy(o));
    }
    items.sort((a, b) => {
      const ka = `${a.metadata.namespace ?? ""}/${a.metadata.name}`;
      const kb = `${b.metadata.namespace ?? ""}/${b.metadata.name}`;
      return ka < kb ? -1 : ka > kb ? 1 : 0;
    });
    return {
      apiVersion: apiVersionOf(rt),
      kind: `${rt.kind}List`,
      metadata: { resourceVersion: inf.stats.lastResourceVersion },
      items,
    };
  }
}
