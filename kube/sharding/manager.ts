/**
 * The manager of a sharded replica: the ordinary Manager with leader election off, every
 * controller it registers behind the shard gate (gate.ts), the membership loop as one more
 * runnable (with the leader Lease as the group's fence, fence.ts), and a /readyz check that
 * waits for this replica's share. Subclassing keeps
 * kube/manager.ts and the reconcilers' setup functions unchanged: the builder asks the host
 * for informers and hands it the controller, and both calls pass through here.
 *
 * @module
 */
import type { Runnable } from "../runnable.ts";
import { Controller } from "../controller.ts";
import { permittedEnv } from "../env.ts";
import { leaderElectionNamespace, leaderIdentity } from "../leader.ts";
import { Manager, type ManagerOptions } from "../manager.ts";
import type { KubeObject } from "../object.ts";
import type { ResourceType } from "../resource.ts";
import type { Informer } from "../source.ts";
import type { Clock } from "../clock.ts";
import { gateReconciler, shardedInformer } from "./gate.ts";
import { ShardScope } from "./scope.ts";
import { MutableShardFilter } from "./filter.ts";
import type { ShardTiming } from "./timing.ts";

export interface ShardedManagerOptions extends Omit<ManagerOptions, "leaderElection"> {
  /** Membership timing (defaults: leader election's durations, timing.ts). */
  shardTiming?: ShardTiming;
  shardClock?: Clock;
  /**
   * The POD_NAME `identity` was made from (a dead predecessor of the same pod is then ignored;
   * ShardMemberOptions.podName). Without `identity`, both come from the environment.
   */
  podName?: string;
}

/** A Manager whose controllers act only on the namespaces of this replica's shard. */
export class ShardedManager extends Manager {
  /** This replica's membership; run by the manager, consulted by every gated controller. */
  readonly scope: ShardScope;
  readonly #gated = new WeakSet<Controller>();

  constructor(opts: ShardedManagerOptions) {
    // The caches start holding nothing; each membership round sets what this replica announces.
    const cacheFilter = new MutableShardFilter([]);
    super({ ...opts, leaderElection: false, cacheShard: cacheFilter });
    const namespace = leaderElectionNamespace(opts.leaderElectionNamespace);
    // Surfaced when the scope runs; keep an early failure from going unhandled meanwhile.
    namespace.catch(() => {});
    this.scope = new ShardScope({
      client: opts.client,
      namespace,
      identity: opts.identity ?? leaderIdentity(),
      // Only POD_NAME, never the HOSTNAME fallback: processes on one host share a hostname.
      podName: opts.identity === undefined ? permittedEnv("POD_NAME") || undefined : opts.podName,
      timing: opts.shardTiming,
      clock: opts.shardClock,
      recorder: this.recorder,
      cacheFilter,
      cachesHold: (ranges) => this.cache.holdsRanges(ranges),
      // The single leader's Lease: held by the group as a fence against a leader of another
      // build (the Go original, or this operator without --shards) reconciling beside it.
      leaderLease: opts.leaderElectionId,
    });
    this.addReadyzCheck("shards", () => {
      if (this.scope.ready()) return;
      throw new Error(
        this.scope.fenceStatus === "free" || this.scope.fenceStatus === "unknown"
          ? "the shard group does not hold the leader Lease yet"
          : "shard ranges not yet active",
      );
    });
    // Started after the caches synced (leader work, election off), stopped with the rest:
    // run() then leaves the membership (drain, empty held, delete the Lease).
    super.add({ start: (signal) => this.scope.run(signal) });
  }

  /** The informer a controller watches, filtered to this replica's namespaces. */
  override informerFor<T extends KubeObject>(rt: ResourceType<T>): Informer<T> {
    const inner = super.informerFor(rt);
    const cache = this.cache;
    return shardedInformer(rt, inner, this.scope, async () => (await cache.list(rt)).items);
  }

  /** Registers a runnable; a controller goes behind the shard gate first. */
  override add(runnable: Runnable): void {
    if (runnable instanceof Controller && !this.#gated.has(runnable)) {
      this.#gated.add(runnable);
      runnable.wrapReconciler((inner) => gateReconciler(inner, this.scope, runnable.name));
    }
    super.add(runnable);
  }
}
