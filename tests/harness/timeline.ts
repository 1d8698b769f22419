/**
 * Records every version of the objects of one kind in one namespace, from a list and the watch
 * that follows it, for tests that assert on order ("the lifecycle pair was written before the
 * phase") or on history ("no pod name was ever created twice").
 *
 * Order is the API server's: each sighting carries the object's resourceVersion as a number. On
 * a kube-apiserver backed by etcd (the test control plane) a resourceVersion is the etcd revision
 * of the write, one counter for every kind, so versions of a pod and of a CocoonSet compare. That
 * is an implementation fact of etcd3 storage, fine for a test control plane and nothing a
 * production client should rely on.
 *
 * @module
 */
import type { KubeObject } from "../../kube/object.ts";
import type { ResourceType } from "../../kube/resource.ts";
import type { Client } from "../../kube/client.ts";

/** One version of one object as the timeline saw it. */
export interface Sighting<T extends KubeObject> {
  type: "ADDED" | "MODIFIED" | "DELETED";
  object: T;
  /** metadata.resourceVersion as a number (the etcd revision of the write). */
  rv: number;
  /** Wall-clock time (ms) the test received it. */
  at: number;
}

/** A running recording. */
export interface Timeline<T extends KubeObject> {
  /** Everything seen so far, in arrival order (the list's objects first, as ADDED). */
  readonly sightings: readonly Sighting<T>[];
  /** The sightings of one object name. */
  of(name: string): Sighting<T>[];
  /** The first sighting matching ok, if any. */
  first(ok: (s: Sighting<T>) => boolean): Sighting<T> | undefined;
  /** The watch ended with an error (the recording is incomplete from then on). */
  readonly error: unknown;
  /** Ends the watch. */
  stop(): Promise<void>;
}

function rvOf(obj: KubeObject): number {
  return Number(obj.metadata.resourceVersion ?? "0");
}

/** Starts recording rt in namespace; resolves once the initial list is in. */
export async function recordTimeline<T extends KubeObject>(
  client: Client,
  rt: ResourceType<T>,
  namespace: string,
): Promise<Timeline<T>> {
  const sightings: Sighting<T>[] = [];
  const stop = new AbortController();
  const list = await client.list(rt, { namespace });
  for (const object of list.items) {
    sightings.push({ type: "ADDED", object, rv: rvOf(object), at: Date.now() });
  }
  let resourceVersion = list.metadata?.resourceVersion ?? "";
  let error: unknown;
  // A stream the server closes (its own timeout) is resumed from the last version seen.
  const run = (async () => {
    while (!stop.signal.aborted) {
      try {
        for await (
          const ev of client.watch(rt, { namespace, resourceVersion, signal: stop.signal })
        ) {
          if (ev.type === "ERROR") throw new Error(`watch error: ${JSON.stringify(ev.object)}`);
          if (ev.type === "BOOKMARK") continue;
          resourceVersion = ev.object.metadata.resourceVersion ?? resourceVersion;
          sightings.push({ type: ev.type, object: ev.object, rv: rvOf(ev.object), at: Date.now() });
        }
      } catch (err) {
        if (stop.signal.aborted) return;
        error = err;
        return;
      }
    }
  })();
  return {
    sightings,
    of: (name) => sightings.filter((s) => s.object.metadata.name === name),
    first: (ok) => sightings.find(ok),
    get error() {
      return error;
    },
    async stop() {
      stop.abort();
      await run;
    },
  };
}
