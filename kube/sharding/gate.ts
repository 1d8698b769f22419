/**
 * The gate between a sharded replica's controllers and the work of other replicas, built
 * around the controllers without changing them:
 * - {@linkcode shardedInformer} wraps the informer a controller watches: events of objects in
 *   namespaces this replica does not hold never reach a handler (so never a queue), and when
 *   ranges become active every cached object of their namespaces is handed to the handlers
 *   again, as a resync would, so the new owner reconciles all of them;
 * - {@linkcode gateReconciler} wraps the reconcile function: a key of a namespace not held now
 *   (queued before a range moved away) returns at once, no requeue, no write; an admitted one
 *   counts as in flight for the drain and gets a signal that a timed-out drain or an abandon
 *   aborts.
 *
 * Cluster-scoped kinds (nodes) are not filtered at the informer: one node event maps to sets in
 * many namespaces, and the reconcile gate drops the keys of the namespaces not held.
 *
 * @module
 */
import { getLogger } from "@logtape/logtape";
import type { KubeObject } from "../object.ts";
import type { Reconciler, Request, Result } from "../reconcile.ts";
import type { ResourceType } from "../resource.ts";
import type { EventHandler, Informer } from "../source.ts";
import { shardFiltered } from "./metrics.ts";
import type { RangeSet } from "./range.ts";
import type { ShardScope } from "./scope.ts";

const log = getLogger(["cocoon-operator", "sharding"]);

/** What the gate needs of a scope (ShardScope; tests may pass their own). */
export type GateScope = Pick<ShardScope, "holds" | "admit" | "onActivate" | "namespaceIn">;

/**
 * The informer a sharded controller watches. listCached returns every cached object of the
 * kind (the cache's list), used to replay the namespaces of newly active ranges.
 */
export function shardedInformer<T extends KubeObject>(
  rt: ResourceType<T>,
  inner: Informer<T>,
  scope: GateScope,
  listCached: () => Promise<readonly T[]>,
): Informer<T> {
  if (!rt.namespaced) return inner;
  const filtered = shardFiltered.labels({ kind: rt.kind, stage: "event" });
  const handlers: EventHandler<T>[] = [];
  const held = (obj: T): boolean => {
    if (scope.holds(obj.metadata.namespace ?? "")) return true;
    filtered.inc();
    return false;
  };
  scope.onActivate((ranges) => void replay(ranges));
  async function replay(ranges: RangeSet): Promise<void> {
    if (handlers.length === 0) return;
    let objects: readonly T[];
    try {
      objects = await listCached();
    } catch (err) {
      log.error("could not list cached {kind} to replay newly held namespaces: {error}", {
        kind: rt.kind,
        error: String(err),
      });
      return;
    }
    for (const obj of objects) {
      const ns = obj.metadata.namespace ?? "";
      // Held now, not merely in the started ranges: they may have moved on since.
      if (!scope.namespaceIn(ns, ranges) || !scope.holds(ns)) continue;
      // As part of an initial list: the controller queues these behind real changes.
      for (const h of handlers) h.onAdd?.(obj, true);
    }
  }
  return {
    addEventHandler(handler: EventHandler<T>): void {
      handlers.push(handler);
      inner.addEventHandler({
        onAdd: (obj, isInInitialList) => {
          if (held(obj)) handler.onAdd?.(obj, isInInitialList);
        },
        onUpdate: (oldObj, newObj) => {
          if (held(newObj)) handler.onUpdate?.(oldObj, newObj);
        },
        onDelete: (obj) => {
          if (held(obj)) handler.onDelete?.(obj);
        },
      });
    },
    hasSynced: () => inner.hasSynced(),
  };
}

/** The reconcile function behind the gate; kind names the controller in the filtered metric. */
export function gateReconciler(inner: Reconciler, scope: GateScope, kind: string): Reconciler {
  const refused = shardFiltered.labels({ kind, stage: "reconcile" });
  return {
    async reconcile(req: Request, signal: AbortSignal): Promise<Result | void> {
      const ticket = scope.admit(req.namespace);
      if (!ticket) {
        refused.inc();
        return {};
      }
      try {
        return await inner.reconcile(req, AbortSignal.any([signal, ticket.signal]));
      } finally {
        ticket.done();
      }
    },
  };
}
