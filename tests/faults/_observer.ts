/**
 * The test's own eyes on the API server while faults are injected: a list + watch of one kind
 * that survives what the faults do to it. A stream that ends is resumed from the last
 * resourceVersion; any error (the API server restarting, 410 Gone after an etcd compaction, an
 * ERROR event) relists and diffs the fresh list against what was seen, reporting the difference
 * as changes marked `relist` (what happened inside the gap is not visible, only its outcome).
 *
 * It is deliberately independent of kube/informer.ts: the oracle must not share the code under
 * test.
 *
 * @module
 */
import type { Client } from "../../kube/client.ts";
import { errorMessage } from "../../kube/errors.ts";
import { keyString, type KubeObject, objectKey } from "../../kube/object.ts";
import type { ResourceType } from "../../kube/resource.ts";

/** One change the observer saw. */
export interface Observation<T extends KubeObject> {
  type: "ADDED" | "MODIFIED" | "DELETED";
  /** The object as seen (for DELETED: its last state). */
  object: T;
  /** Wall-clock time (ms) it was received. */
  at: number;
  /** Learnt from a relist after a gap rather than from the watch stream. */
  relist: boolean;
}

/** A running observation. */
export interface Observer<T extends KubeObject> {
  /** Every change, in arrival order (the first list's objects as ADDED). */
  readonly observations: readonly Observation<T>[];
  /** Objects present now, by `namespace/name`. */
  readonly current: ReadonlyMap<string, T>;
  /** Relists after the first list (each one a gap in the stream). */
  readonly relists: number;
  /** Errors that caused those relists, newest last (for figures and failure messages). */
  readonly errors: readonly string[];
  /** Ends the watch. */
  stop(): Promise<void>;
}

/** Options of observe(). */
export interface ObserveOptions<T extends KubeObject> {
  /** One namespace; default all. */
  namespace?: string;
  /** Called on every change, in order, before it is appended. */
  onChange?: (o: Observation<T>) => void;
}

const RETRY_MS = 200;

/** Starts observing rt; resolves once the first list is in. */
export async function observe<T extends KubeObject>(
  client: Client,
  rt: ResourceType<T>,
  opts: ObserveOptions<T> = {},
): Promise<Observer<T>> {
  const observations: Observation<T>[] = [];
  const current = new Map<string, T>();
  const errors: string[] = [];
  const stop = new AbortController();
  let relists = 0;

  const record = (type: Observation<T>["type"], object: T, relist: boolean) => {
    const o: Observation<T> = { type, object, at: Date.now(), relist };
    opts.onChange?.(o);
    observations.push(o);
  };

  /** Lists and diffs against `current`; returns the list's resourceVersion. */
  const relist = async (initial: boolean): Promise<string> => {
    const list = await client.list(rt, { namespace: opts.namespace, signal: stop.signal });
    const seen = new Set<string>();
    for (const obj of list.items) {
      const key = keyString(objectKey(obj));
      seen.add(key);
      const old = current.get(key);
      current.set(key, obj);
      if (!old) record("ADDED", obj, !initial);
      else if (old.metadata.resourceVersion !== obj.metadata.resourceVersion) {
        record("MODIFIED", obj, true);
      }
    }
    for (const [key, obj] of [...current]) {
      if (seen.has(key)) continue;
      current.delete(key);
      record("DELETED", obj, true);
    }
    return list.metadata?.resourceVersion ?? "";
  };

  let rv = await relist(true);
  const run = (async () => {
    while (!stop.signal.aborted) {
      try {
        for await (
          const ev of client.watch(rt, {
            namespace: opts.namespace,
            resourceVersion: rv,
            signal: stop.signal,
          })
        ) {
          if (ev.type === "BOOKMARK") {
            rv = ev.object.metadata.resourceVersion ?? rv;
            continue;
          }
          if (ev.type === "ERROR") {
            throw new Error(`watch ERROR event: ${JSON.stringify(ev.object)}`);
          }
          const key = keyString(objectKey(ev.object));
          rv = ev.object.metadata.resourceVersion ?? rv;
          if (ev.type === "DELETED") current.delete(key);
          else current.set(key, ev.object);
          record(ev.type, ev.object, false);
        }
        // The server closed the stream (its timeout): resume from the last version seen.
      } catch (err) {
        if (stop.signal.aborted) return;
        errors.push(errorMessage(err));
        // Relist until the server answers again; the diff reports what the gap hid.
        for (;;) {
          await new Promise((r) => setTimeout(r, RETRY_MS));
          if (stop.signal.aborted) return;
          try {
            rv = await relist(false);
            relists++;
            break;
          } catch (listErr) {
            if (stop.signal.aborted) return;
            errors.push(errorMessage(listErr));
          }
        }
      }
    }
  })();

  return {
    observations,
    current,
    get relists() {
      return relists;
    },
    errors,
    async stop() {
      stop.abort();
      await run;
    },
  };
}
