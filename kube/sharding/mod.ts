/**
 * Sharding of the operator across replicas by namespace hash: the API server's hash and
 * `shardSelector` (Kubernetes v1.36, KEP-5866), the split of the hash space among member Leases,
 * the hand-over protocol that keeps two replicas off one namespace, the ShardFilter through which
 * the informers scope their caches, the leader Lease held as a fence against a single leader of
 * another build, and the wiring into the operator: ShardScope, the gate around informers and
 * reconcilers, ShardedManager (--shards=auto; docs/architecture.md, "Sharding").
 *
 * @module
 */
export { fnv1a64, hashHex } from "./hash.ts";
export {
  formatBound,
  formatRangeSet,
  FULL_RANGE,
  HASH_SPACE_END,
  type HashRange,
  parseBound,
  parseRangeSet,
  type RangeSet,
} from "./range.ts";
export {
  formatShardSelector,
  NAMESPACE_FIELD,
  namespaceInRanges,
  parseShardSelector,
  selectorMatches,
  serverAppliedShard,
  type ShardField,
  type ShardSelector,
} from "./selector.ts";
export { MutableShardFilter, type ShardFilter, staticShardFilter } from "./filter.ts";
export { splitRanges } from "./split.ts";
export {
  deadLeaseRetentionMs,
  DEFAULT_SHARD_TIMING,
  type ShardTiming,
  validateShardTiming,
} from "./timing.ts";
export { type DeadReason, type MemberView } from "./members.ts";
export {
  actingRanges,
  announcedRanges,
  type ShardAction,
  type ShardObservation,
  type ShardState,
  step,
} from "./handover.ts";
export {
  DESIRED_ANNOTATION,
  HELD_ANNOTATION,
  LEAVING_ANNOTATION,
  MEMBER_GROUP_LABEL,
  memberLeaseName,
  type ShardCallbacks,
  ShardMember,
  type ShardMemberOptions,
} from "./membership.ts";
export {
  decideFence,
  type FenceDecision,
  type FenceInput,
  type FenceStatus,
  LeaderFence,
  type LeaderFenceOptions,
} from "./fence.ts";
export { ShardScope, type ShardScopeOptions, type ShardTicket } from "./scope.ts";
export { gateReconciler, type GateScope, shardedInformer } from "./gate.ts";
export { ShardedManager, type ShardedManagerOptions } from "./manager.ts";
