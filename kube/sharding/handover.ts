/**
 * The hand-over state machine of one shard member, pure: `step(state, observation, now)` gives
 * the next state and the actions the driver must carry out. No I/O, no clock of its own.
 *
 * A member's ranges are in one of three sets, and it announces their union in its Lease (the
 * `held` annotation):
 * - pending: claimed, not yet acted on;
 * - active: acted on (informers filter to them, workers reconcile them);
 * - draining: no new work is taken, in-flight work is finishing.
 *
 * The one rule that keeps two members off the same hash: a pending range becomes active only in
 * a round whose renewal wrote it into this member's Lease and whose list of all member Leases,
 * read after that write, shows no other member announcing any of it (live, or expired for less
 * than the safety margin). Two members claiming the same hash each write, then read; whichever
 * wrote second reads the other's claim, so at most one of them activates. A member removes a
 * hash from its announcement only after it stopped acting on it, and it stops acting on
 * everything once it has not renewed for the renew deadline, which passes before any other
 * member can see its Lease expire. Conflicting claims resolve by identity: a claim yields to an
 * overlapping announcement of a smaller identity, and never to a larger one, so two claims
 * cannot wait on each other forever.
 *
 * @module
 */

import { intersect, normalize, rangeContains, type RangeSet, subtract, union } from "./range.ts";
import type { MemberView } from "./members.ts";
import { splitRanges } from "./split.ts";
import type { ShardTiming } from "./timing.ts";

/** Ranges that stopped taking new work at `since`. */
export interface Drain {
  readonly ranges: RangeSet;
  readonly since: number;
}

/** One member's hand-over state. */
export interface ShardState {
  readonly identity: string;
  readonly pending: RangeSet;
  readonly active: RangeSet;
  readonly draining: readonly Drain[];
  /** The member's share of the split in the last round that could compute it. */
  readonly desired: RangeSet;
  /** When the last successful renewal was sent (local clock); undefined before the first. */
  readonly lastRenewalAt?: number;
  /** The leave finished: nothing announced, and the Lease says so. */
  readonly left: boolean;
}

/** What one round saw. */
export interface ShardObservation {
  /** This round's renewal succeeded: when it was sent and the `held` ranges it wrote. */
  readonly renewal?: { readonly sentAt: number; readonly announced: RangeSet };
  /**
   * All member Leases (this member's may be among them; it is ignored), listed after this
   * round's renewal. Undefined when the list failed: nothing new is claimed or started.
   */
  readonly members?: readonly MemberView[];
  /** Hashes of the namespaces with work in flight, for the drain check. */
  readonly busyHashes: readonly bigint[];
  /** Shutting down: give every range back. */
  readonly leaving?: boolean;
  /**
   * Whether this member's caches hold a complete state of these ranges yet (a sharded cache
   * lists a claimed range before it may become active). Absent: they always do (unsharded
   * caches hold everything). A claim that is otherwise ready stays pending until it is true, so a
   * new owner never reconciles from a cache that has not seen the range's objects.
   */
  readonly cachesHold?: (ranges: RangeSet) => boolean;
}

/** What the driver must do, in order. */
export type ShardAction =
  /** Start acting on these ranges (watch them, reconcile them). */
  | { readonly type: "start"; readonly ranges: RangeSet }
  /** Take no new work in these ranges; let what runs finish. */
  | { readonly type: "stop"; readonly ranges: RangeSet }
  /** These ranges are given back; with timedOut, abort what still runs in them first. */
  | { readonly type: "release"; readonly ranges: RangeSet; readonly timedOut: boolean }
  /** The renew deadline passed: stop acting on these ranges at once, in-flight work aborted. */
  | { readonly type: "abandon"; readonly ranges: RangeSet }
  /** The leave is complete: the Lease may be deleted. */
  | { readonly type: "left" };

/** A member that holds nothing yet. */
export function initialShardState(identity: string): ShardState {
  return { identity, pending: [], active: [], draining: [], desired: [], left: false };
}

/** Every range the member may act on: active and draining. */
export function actingRanges(state: ShardState): RangeSet {
  return union(state.active, normalize(state.draining.flatMap((d) => d.ranges)));
}

/** What the member must announce in its Lease: acting plus claimed. */
export function announcedRanges(state: ShardState): RangeSet {
  return union(actingRanges(state), state.pending);
}

/** The result of one step. */
export interface StepResult {
  readonly state: ShardState;
  readonly actions: readonly ShardAction[];
}

/** One round of the hand-over protocol; see the module documentation for the rules. */
export function step(
  state: ShardState,
  obs: ShardObservation,
  now: number,
  timing: ShardTiming,
): StepResult {
  const actions: ShardAction[] = [];
  const lastRenewalAt = obs.renewal
    ? Math.max(obs.renewal.sentAt, state.lastRenewalAt ?? -Infinity)
    : state.lastRenewalAt;

  if (lastRenewalAt === undefined || now - lastRenewalAt >= timing.renewDeadlineMs) {
    const acting = actingRanges(state);
    if (acting.length > 0) actions.push({ type: "abandon", ranges: acting });
    return {
      state: { ...state, pending: [], active: [], draining: [], lastRenewalAt },
      actions,
    };
  }

  let { pending, active, desired } = state;
  if (obs.members !== undefined || obs.leaving) {
    desired = obs.leaving ? [] : desiredRanges(state.identity, obs.members ?? []);
  }
  const draining: Drain[] = [...state.draining];

  const toStop = subtract(active, desired);
  if (toStop.length > 0) {
    draining.push({ ranges: toStop, since: now });
    active = intersect(active, desired);
    actions.push({ type: "stop", ranges: toStop });
  }
  pending = intersect(pending, desired);

  const stillDraining: Drain[] = [];
  for (const d of draining) {
    const busy = obs.busyHashes.some((h) => d.ranges.some((r) => rangeContains(r, h)));
    if (!busy) actions.push({ type: "release", ranges: d.ranges, timedOut: false });
    else if (now - d.since >= timing.drainTimeoutMs) {
      actions.push({ type: "release", ranges: d.ranges, timedOut: true });
    } else stillDraining.push(d);
  }

  if (obs.members !== undefined) {
    const others = obs.members.filter((m) => m.identity !== state.identity && m.blocking);
    const taken = normalize(others.flatMap((m) => m.held));
    // Yield to smaller identities' announcements; keep claims only larger ones contest.
    for (const m of others) {
      if (m.identity < state.identity) pending = subtract(pending, m.held);
    }
    const holding = union(active, normalize(stillDraining.flatMap((d) => d.ranges)));
    const claim = subtract(subtract(subtract(desired, holding), pending), taken);
    pending = union(pending, claim);
    if (obs.renewal) {
      const ready = subtract(intersect(pending, obs.renewal.announced), taken);
      if (ready.length > 0 && (obs.cachesHold?.(ready) ?? true)) {
        active = union(active, ready);
        pending = subtract(pending, ready);
        actions.push({ type: "start", ranges: ready });
      }
    }
  }

  const next: ShardState = {
    ...state,
    pending,
    active,
    draining: stillDraining,
    desired,
    lastRenewalAt,
  };
  let left = state.left;
  if (
    obs.leaving && !left && announcedRanges(next).length === 0 && obs.renewal &&
    obs.renewal.announced.length === 0
  ) {
    left = true;
    actions.push({ type: "left" });
  }
  return { state: { ...next, left }, actions };
}

/** This member's share: the split of the live, non-leaving members (itself always included). */
export function desiredRanges(identity: string, members: readonly MemberView[]): RangeSet {
  const ids = [identity];
  for (const m of members) {
    if (m.identity !== identity && m.live && !m.leaving) ids.push(m.identity);
  }
  const mine = splitRanges(ids).get(identity);
  return mine ? [mine] : [];
}
