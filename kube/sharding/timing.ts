/**
 * Timing of shard membership. The durations are leader election's (kube/leader.ts, after
 * controller-runtime): a member Lease lasts 15 s, its holder stops acting when it has not
 * renewed for 10 s, and renews every 2 s. The safety margin is how long past another member's
 * observed expiry its ranges still count as taken, to cover clock-rate drift and requests the
 * dead member sent before it stopped; the drain timeout bounds a hand-over that waits on a stuck
 * reconcile. The retention is how long past that margin a member Lease nobody renews stays before
 * a live member deletes it (members.ts, "expired"): not needed for safety (the Lease blocks
 * nothing by then), only generous, so a member cut off for a while finds its Lease still there.
 *
 * @module
 */

export interface ShardTiming {
  /** Lease duration written to the member Lease (whole seconds on the wire). */
  readonly leaseDurationMs: number;
  /** A member that has not renewed for this long stops acting on all its ranges. */
  readonly renewDeadlineMs: number;
  /** One round (renew, list, step) every this often. */
  readonly retryPeriodMs: number;
  /** Extra time after another member's observed expiry during which its ranges still block. */
  readonly expiryMarginMs: number;
  /** A drain waiting longer than this releases the range and aborts what is still running. */
  readonly drainTimeoutMs: number;
  /**
   * How long after expiry plus the margin an unrenewed member Lease is deleted (default: four
   * lease durations, see {@linkcode deadLeaseRetentionMs}).
   */
  readonly deadLeaseRetentionMs?: number;
}

/** The retention of a timing: its own, else four lease durations. */
export function deadLeaseRetentionMs(t: ShardTiming): number {
  return t.deadLeaseRetentionMs ?? 4 * t.leaseDurationMs;
}

/**
 * The defaults: leader election's durations, a 5 s margin, a 60 s drain bound, and a dead
 * member's Lease deleted 60 s after the margin (80 s after its last renewal was seen).
 */
export const DEFAULT_SHARD_TIMING: ShardTiming = {
  leaseDurationMs: 15_000,
  renewDeadlineMs: 10_000,
  retryPeriodMs: 2_000,
  expiryMarginMs: 5_000,
  drainTimeoutMs: 60_000,
  deadLeaseRetentionMs: 60_000,
};

/** Checks the relations the safety argument needs; throws naming the broken one. */
export function validateShardTiming(t: ShardTiming): ShardTiming {
  if (t.retryPeriodMs <= 0 || t.renewDeadlineMs <= 0 || t.leaseDurationMs <= 0) {
    throw new RangeError("shard lease duration, renew deadline and retry period must be > 0");
  }
  if (t.leaseDurationMs % 1000 !== 0) {
    throw new RangeError("shard lease duration must be whole seconds (leaseDurationSeconds)");
  }
  if (t.leaseDurationMs <= t.renewDeadlineMs) {
    throw new RangeError("shard lease duration must be greater than the renew deadline");
  }
  if (t.renewDeadlineMs <= 1.2 * t.retryPeriodMs) {
    throw new RangeError("shard renew deadline must be greater than 1.2 × the retry period");
  }
  if (t.expiryMarginMs < 0 || t.drainTimeoutMs <= 0) {
    throw new RangeError("shard expiry margin must be >= 0 and the drain timeout > 0");
  }
  if (deadLeaseRetentionMs(t) < 0) {
    throw new RangeError("shard dead-lease retention must be >= 0");
  }
  return t;
}
