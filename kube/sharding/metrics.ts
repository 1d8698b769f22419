/**
 * Metric families of a sharded operator (docs/observability.md, "Sharding"). They register on
 * the manager's registry like kube/metrics.ts, and stay at their zero values in single-leader
 * mode (only a ShardScope writes them).
 *
 * @module
 */
import { Counter, Gauge, Histogram } from "../prom_client.ts";
import { registry } from "../metrics.ts";

/** Share of the 64-bit namespace hash space this replica acts on (active ranges), 0..1. */
export const shardOwnedFraction: Gauge = new Gauge({
  name: "cocoon_operator_shard_owned_fraction",
  help: "Fraction of the namespace hash space this replica reconciles (its active ranges).",
  registers: [registry],
});

/**
 * Lowest start and highest end of the active ranges, as floats (a dashboard's view: the exact
 * bounds are in the member Lease's held annotation and in the hand-over log lines).
 */
export const shardRangeStart: Gauge = new Gauge({
  name: "cocoon_operator_shard_range_start",
  help: "Lowest start of this replica's active hash ranges (float of the 64-bit bound).",
  registers: [registry],
});
export const shardRangeEnd: Gauge = new Gauge({
  name: "cocoon_operator_shard_range_end",
  help: "Highest end of this replica's active hash ranges (float of the 64-bit bound).",
  registers: [registry],
});

/** Live, non-leaving members this replica counts in the split, itself included. */
export const shardMembers: Gauge = new Gauge({
  name: "cocoon_operator_shard_members",
  help: "Shard members this replica splits the hash space with, itself included.",
  registers: [registry],
});

/** Hand-overs by direction: acquired, released, abandoned. */
export const shardHandovers: Counter<"direction"> = new Counter({
  name: "cocoon_operator_shard_handovers_total",
  help: "Range hand-overs of this replica by direction (acquired, released, abandoned).",
  labelNames: ["direction"],
  registers: [registry],
});

/**
 * How long a hand-over took: acquired = from the round that gave this replica a new share to
 * acting on it; released = from stopping new work to giving the range back (the drain).
 */
export const shardHandoverSeconds: Histogram<"direction"> = new Histogram({
  name: "cocoon_operator_shard_handover_duration_seconds",
  help: "Duration of range hand-overs by direction (acquired: share change to start; " +
    "released: stop to release).",
  labelNames: ["direction"],
  buckets: [0.5, 1, 2, 4, 8, 15, 30, 60, 120],
  registers: [registry],
});

/**
 * Objects this replica dropped on the client because their namespace is not in its active
 * ranges: watch events before they reach a queue (stage "event"), queued keys refused at the
 * reconcile gate (stage "reconcile").
 */
export const shardFiltered: Counter<"kind" | "stage"> = new Counter({
  name: "cocoon_operator_shard_filtered_total",
  help: "Objects dropped client-side because their namespace is outside this replica's ranges.",
  labelNames: ["kind", "stage"],
  registers: [registry],
});

/**
 * Member Leases of dead members this replica deleted, by reason: "expired" (not renewed for
 * the lease duration, the safety margin and the retention) or "predecessor" (this pod's previous
 * operator process, after a container restart).
 */
export const shardDeadLeasesDeleted: Counter<"reason"> = new Counter({
  name: "cocoon_operator_shard_dead_leases_deleted_total",
  help: "Member Leases of dead shard members this replica deleted, by reason " +
    "(expired, predecessor).",
  labelNames: ["reason"],
  registers: [registry],
});
