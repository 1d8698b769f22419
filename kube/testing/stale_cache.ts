/**
 * A cache that lags behind the API server, for tests of code that must stay correct when its
 * cached reads are stale (controller-runtime's cache can be behind its own writes). The double
 * wraps a client: the reads a test chooses are answered from what the test says the cache
 * still shows, everything else (other reads, every write, watches) reaches the wrapped client.
 *
 * @module
 */
import type { Client, GetOptions, ListOptions } from "../client.ts";
import type { KubeObject, ObjectList } from "../object.ts";
import type { ResourceType } from "../resource.ts";

/**
 * The reads a lagging cache answers itself. Each hook returns what the cache shows (the caller
 * gets a fresh copy every time), undefined to let the read through to the wrapped client, or
 * throws to make the read fail.
 */
export interface StaleReads {
  /**
   * A get of one object. `read` performs the real get, for a hook whose stale copy derives from
   * the stored object.
   */
  get?(
    rt: ResourceType<KubeObject>,
    namespace: string,
    name: string,
    read: () => Promise<KubeObject>,
  ): KubeObject | undefined | Promise<KubeObject | undefined>;
  /** A list: the items the cache shows (answered as a list with empty metadata). */
  list?(rt: ResourceType<KubeObject>): readonly KubeObject[] | undefined;
}

/** client seen through a cache that answers the reads in `reads` from its stale view. */
export function staleCache(client: Client, reads: StaleReads): Client {
  async function get<T extends KubeObject>(
    rt: ResourceType<T>,
    namespace: string,
    name: string,
    opts?: GetOptions,
  ): Promise<T> {
    const read = (): Promise<KubeObject> => client.get(rt, namespace, name, opts);
    const shown = await reads.get!(rt, namespace, name, read);
    if (shown === undefined) return await client.get(rt, namespace, name, opts);
    return structuredClone(shown) as T;
  }
  async function list<T extends KubeObject>(
    rt: ResourceType<T>,
    opts?: ListOptions,
  ): Promise<ObjectList<T>> {
    const shown = reads.list!(rt);
    if (shown === undefined) return await client.list(rt, opts);
    return { metadata: {}, items: structuredClone(shown) as T[] };
  }
  return new Proxy(client, {
    get(target, prop, receiver) {
      if (prop === "get" && reads.get) return get;
      if (prop === "list" && reads.list) return list;
      const value = Reflect.get(target, prop, receiver);
      return typeof value === "function" ? value.bind(target) : value;
    },
  });
}
