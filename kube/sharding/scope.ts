/**
 * The runtime side of sharding: a {@linkcode ShardScope} runs one replica's membership loop
 * (membership.ts) and answers what the controllers need while it runs: whether a namespace is
 * this replica's to act on now, a notification when ranges become active (so their cached
 * objects get reconciled), and the in-flight reconciles per namespace that a drain waits for.
 *
 * "Held now" is read from the hand-over state the member keeps, which each step updates
 * synchronously, not from the start/stop callbacks (those run later, one at a time): a range
 * stops admitting reconciles in the very step that moved it to draining, so no reconcile can
 * slip in between the drain check of a round and the release it decides.
 *
 * @module
 */
import { getLogger } from "@logtape/logtape";
import type { Client } from "../client.ts";
import { type Clock, realClock } from "../clock.ts";
import type { EventRecorder } from "../events.ts";
import type { KubeObject } from "../object.ts";
import { leaderElectionMasterStatus } from "../metrics.ts";
import { type FenceStatus, LeaderFence } from "./fence.ts";
import { fnv1a64 } from "./hash.ts";
import { announcedRanges, initialShardState, type ShardState } from "./handover.ts";
import type { MutableShardFilter } from "./filter.ts";
import type { MemberView } from "./members.ts";
import { memberLeaseName, ShardMember } from "./membership.ts";
import {
  formatRangeSet,
  FULL_RANGE,
  HASH_SPACE_END,
  type RangeSet,
  setContains,
  size,
  subtract,
} from "./range.ts";
import {
  shardDeadLeasesDeleted,
  shardHandovers,
  shardHandoverSeconds,
  shardMembers,
  shardOwnedFraction,
  shardRangeEnd,
  shardRangeStart,
} from "./metrics.ts";
import { DEFAULT_SHARD_TIMING, type ShardTiming } from "./timing.ts";

const log = getLogger(["cocoon-operator", "sharding"]);

export interface ShardScopeOptions {
  client: Pick<Client, "get" | "create" | "update" | "list" | "delete">;
  /**
   * Namespace of the member Leases (the operator's); a promise when it is read at start (the
   * service-account file), awaited by run().
   */
  namespace: string | Promise<string>;
  /** Unique per process. */
  identity: string;
  /** The POD_NAME the identity was made from, when set (ShardMemberOptions.podName). */
  podName?: string;
  timing?: ShardTiming;
  clock?: Clock;
  /** Hand-over Events go on this replica's member Lease. */
  recorder?: EventRecorder;
  /**
   * The filter the sharded caches list and watch with: set each round to every range this
   * replica announces (claimed, active, draining), so a claimed range is listed before it
   * becomes active.
   */
  cacheFilter?: MutableShardFilter;
  /** Whether the caches hold these ranges yet; a claim becomes active only once they do. */
  cachesHold?: (ranges: RangeSet) => boolean;
  /**
   * Name of the leader Lease (in `namespace`) a single-leader operator elects itself with. When
   * set, the group holds it as a fence (fence.ts): this replica reconciles nothing while anyone
   * outside the group holds it, and a single leader started beside live members stands by.
   */
  leaderLease?: string;
}

/** One admitted reconcile: its abort signal (a timed-out drain or an abandon) and its end. */
export interface ShardTicket {
  readonly signal: AbortSignal;
  done(): void;
}

interface InFlight {
  count: number;
  abort: AbortController;
}

/** One replica's shard membership and the gate state derived from it. */
export class ShardScope {
  readonly identity: string;
  readonly #opts: ShardScopeOptions;
  #member: ShardMember | undefined;
  #namespace = "";
  readonly #initial: ShardState;
  readonly #clock: Clock | undefined;
  readonly #hashes = new Map<string, bigint>();
  readonly #inFlight = new Map<string, InFlight>();
  readonly #listeners = new Set<(ranges: RangeSet) => void>();
  /** When the stop of each draining range (by its text) was carried out. */
  readonly #stoppedAt = new Map<string, number>();
  /** The share as of the last round, and since when it is that. */
  #desired = "";
  #desiredSince: number;
  /** When the previous round's step was taken (its step computed the share seen now). */
  #lastRoundAt: number | undefined;
  /** Set once the active ranges covered the whole share; cleared by an abandon. */
  #complete = false;
  /** The leader-Lease fence, once run() knows the namespace (leaderLease set). */
  #fence: LeaderFence | undefined;

  constructor(opts: ShardScopeOptions) {
    this.identity = opts.identity;
    this.#opts = opts;
    this.#clock = opts.clock;
    this.#desiredSince = this.#now();
    this.#initial = initialShardState(opts.identity);
  }

  /** Name of this replica's member Lease. */
  get leaseName(): string {
    return memberLeaseName(this.identity);
  }

  /** The ranges this replica acts on now (new work admitted). */
  get active(): RangeSet {
    return this.#state().active;
  }

  /** Runs the membership loop until signal aborts, then leaves (drain, empty held, delete). */
  async run(signal: AbortSignal): Promise<void> {
    if (this.#member) throw new Error("ShardScope.run called twice");
    this.#namespace = await this.#opts.namespace;
    const opts = this.#opts;
    const timing = opts.timing ?? DEFAULT_SHARD_TIMING;
    const fence = opts.leaderLease ? this.#startFence(opts.leaderLease, timing) : undefined;
    this.#member = new ShardMember({
      client: opts.client,
      namespace: this.#namespace,
      identity: opts.identity,
      podName: opts.podName,
      onDeadLeaseDeleted: (_, reason) => shardDeadLeasesDeleted.labels({ reason }).inc(),
      timing,
      clock: opts.clock,
      busyHashes: () => this.#roundHook(),
      cachesHold: opts.cachesHold,
      onStart: (ranges) => this.#onStart(ranges),
      onStop: (ranges) => this.#onStop(ranges),
      onRelease: (ranges, timedOut) => this.#onRelease(ranges, timedOut),
      onAbandon: (ranges) => this.#onAbandon(ranges),
      afterRound: fence
        ? (members, leaving, roundSignal) => fence.round(members, leaving, roundSignal)
        : undefined,
    });
    try {
      await this.#member.run(signal);
    } finally {
      fence?.stop();
      if (fence) leaderElectionMasterStatus.set({ name: opts.leaderLease! }, 0);
    }
  }

  /** The fence on the leader Lease; this replica reconciles only while it is open. */
  #startFence(name: string, timing: ShardTiming): LeaderFence {
    leaderElectionMasterStatus.set({ name }, 0);
    const fence = new LeaderFence({
      client: this.#opts.client,
      namespace: this.#namespace,
      name,
      identity: this.identity,
      timing,
      clock: this.#clock ?? realClock,
      // Namespaces whose events were dropped while closed are handed to the handlers again.
      onOpen: () => this.#activated(this.#state().active),
      onClose: (reason) => this.#abortIn([FULL_RANGE], reason),
      onStatus: (status, holder) => this.#fenceStatus(name, status, holder),
    });
    this.#fence = fence;
    return fence;
  }

  #fenceStatus(name: string, status: FenceStatus, holder: string): void {
    leaderElectionMasterStatus.set({ name }, status === "ours" ? 1 : 0);
    if (status !== "foreign") return;
    const lease: KubeObject = {
      apiVersion: "coordination.k8s.io/v1",
      kind: "Lease",
      metadata: { name: this.leaseName, namespace: this.#namespace },
    };
    this.#opts.recorder?.event(
      lease,
      "Normal",
      "WaitingForLeaderLease",
      `${this.identity} reconciles nothing while leader Lease ${this.#namespace}/${name} is ` +
        `held by ${holder}, outside the shard group`,
    );
  }

  #state(): ShardState {
    return this.#member?.state ?? this.#initial;
  }

  #others(): readonly MemberView[] {
    return this.#member?.members ?? [];
  }

  /**
   * Whether new work in this namespace is this replica's now: its range is active and, with a
   * leader Lease to fence on, the shard group holds that Lease.
   */
  holds(namespace: string): boolean {
    if (this.#fence && !this.#fence.open()) return false;
    return setContains(this.#state().active, this.#hash(namespace));
  }

  /** Who holds the leader Lease as this replica last saw it (undefined without a fence). */
  get fenceStatus(): FenceStatus | undefined {
    return this.#fence?.status;
  }

  /**
   * Admits one reconcile of a namespace: undefined when the namespace is not held (the caller
   * must not act), else a ticket whose done() must be called when the reconcile ends.
   */
  admit(namespace: string): ShardTicket | undefined {
    if (!this.holds(namespace)) return undefined;
    let entry = this.#inFlight.get(namespace);
    if (!entry) {
      entry = { count: 0, abort: new AbortController() };
      this.#inFlight.set(namespace, entry);
    }
    entry.count++;
    const held = entry;
    let ended = false;
    return {
      signal: held.abort.signal,
      done: () => {
        if (ended) return;
        ended = true;
        held.count--;
        if (held.count === 0 && this.#inFlight.get(namespace) === held) {
          this.#inFlight.delete(namespace);
        }
      },
    };
  }

  /** Namespaces with reconciles in flight (for tests and logs). */
  inFlight(): ReadonlyMap<string, number> {
    return new Map([...this.#inFlight].map(([ns, e]) => [ns, e.count]));
  }

  /** Calls listener with the ranges each time some become active; returns the unsubscribe. */
  onActivate(listener: (ranges: RangeSet) => void): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  /** Whether a namespace's hash lies in ranges. */
  namespaceIn(namespace: string, ranges: RangeSet): boolean {
    return setContains(ranges, this.#hash(namespace));
  }

  /**
   * /readyz: ready once this replica has acted on its whole share at least once, and not since
   * abandoned it. Later rebalancing does not flip it back (a drain is ordinary work).
   */
  ready(): boolean {
    if (!this.#complete) return false;
    // Standing by behind a foreign leader counts as ready, as a leader-election candidate is:
    // a rolling update keeps the old pod (that leader) until the new ones are ready.
    const fence = this.#fence?.status;
    return fence === undefined || fence === "ours" || fence === "member" || fence === "foreign";
  }

  #hash(namespace: string): bigint {
    let h = this.#hashes.get(namespace);
    if (h === undefined) {
      h = fnv1a64(namespace);
      this.#hashes.set(namespace, h);
    }
    return h;
  }

  #now(): number {
    return this.#clock ? this.#clock.now() : Date.now();
  }

  /** Called at the start of every step: the busy hashes, plus the per-round bookkeeping. */
  #roundHook(): bigint[] {
    const state = this.#state();
    const desired = formatRangeSet(state.desired);
    const now = this.#now();
    if (desired !== this.#desired) {
      this.#desired = desired;
      // The share changed in the previous round's step: count from then.
      this.#desiredSince = this.#lastRoundAt ?? now;
    }
    this.#lastRoundAt = now;
    // What the caches should hold: everything announced, so a claim is listed before it starts.
    this.#opts.cacheFilter?.set(announcedRanges(state));
    // A share that shrank onto what is already active completes without another start.
    if (state.desired.length > 0 && subtract(state.desired, state.active).length === 0) {
      this.#complete = true;
    }
    const others = this.#others().filter((m) => m.live && !m.leaving).length;
    shardMembers.set(others + 1);
    return [...this.#inFlight.keys()].map((ns) => this.#hash(ns));
  }

  #publishRanges(): void {
    const active = this.#state().active;
    shardOwnedFraction.set(Number(size(active)) / Number(HASH_SPACE_END));
    shardRangeStart.set(active.length > 0 ? Number(active[0].start) : 0);
    shardRangeEnd.set(active.length > 0 ? Number(active[active.length - 1].end) : 0);
  }

  #onStart(ranges: RangeSet): void {
    const seconds = (this.#now() - this.#desiredSince) / 1000;
    shardHandovers.labels({ direction: "acquired" }).inc();
    shardHandoverSeconds.labels({ direction: "acquired" }).observe(Math.max(0, seconds));
    const state = this.#state();
    if (state.desired.length > 0 && subtract(state.desired, state.active).length === 0) {
      this.#complete = true;
    }
    this.#publishRanges();
    this.#announce("ShardAcquired", "Normal", `acquired ${formatRangeSet(ranges)}`, ranges);
    this.#activated(ranges);
  }

  /** Tells the listeners that these ranges may be reconciled now. */
  #activated(ranges: RangeSet): void {
    if (ranges.length === 0) return;
    for (const listener of this.#listeners) {
      try {
        listener(ranges);
      } catch (err) {
        log.error("shard activation listener failed: {error}", { error: String(err) });
      }
    }
  }

  #onStop(ranges: RangeSet): void {
    this.#stoppedAt.set(formatRangeSet(ranges), this.#now());
    this.#publishRanges();
    this.#announce("ShardDraining", "Normal", `draining ${formatRangeSet(ranges)}`, ranges);
  }

  #onRelease(ranges: RangeSet, timedOut: boolean): void {
    if (timedOut) this.#abortIn(ranges, "shard drain timed out");
    const key = formatRangeSet(ranges);
    const since = this.#stoppedAt.get(key);
    this.#stoppedAt.delete(key);
    shardHandovers.labels({ direction: "released" }).inc();
    if (since !== undefined) {
      shardHandoverSeconds.labels({ direction: "released" }).observe(
        Math.max(0, (this.#now() - since) / 1000),
      );
    }
    // Two reasons rather than one with two types: a timed-out drain aborted work, worth its own.
    if (timedOut) {
      this.#announce(
        "ShardReleaseTimedOut",
        "Warning",
        `released ${key} after the drain timeout, in-flight reconciles aborted`,
        ranges,
      );
      return;
    }
    this.#announce(
      "ShardReleased",
      "Normal",
      `released ${key}`,
      ranges,
    );
  }

  #onAbandon(ranges: RangeSet): void {
    this.#abortIn(ranges, "shard ranges abandoned: membership lease not renewed in time");
    this.#complete = false;
    shardHandovers.labels({ direction: "abandoned" }).inc();
    this.#stoppedAt.clear();
    this.#publishRanges();
    this.#announce(
      "ShardAbandoned",
      "Warning",
      `abandoned ${formatRangeSet(ranges)}: lease not renewed within the renew deadline`,
      ranges,
    );
  }

  /** Aborts the in-flight reconciles of the namespaces in ranges. */
  #abortIn(ranges: RangeSet, reason: string): void {
    for (const [ns, entry] of this.#inFlight) {
      if (!this.namespaceIn(ns, ranges)) continue;
      entry.abort.abort(new Error(reason));
      // Later reconciles of the namespace (if it comes back) get a fresh signal.
      this.#inFlight.delete(ns);
    }
  }

  /** A log line with the range and the members, and an Event on this member's Lease. */
  #announce(reason: string, type: "Normal" | "Warning", message: string, ranges: RangeSet): void {
    const members = [
      this.identity,
      ...this.#others().filter((m) => m.live).map((m) => m.identity),
    ].sort();
    log.info("shard hand-over {reason} of {identity}: {ranges} (members {members})", {
      reason,
      identity: this.identity,
      ranges: formatRangeSet(ranges),
      members: members.join(","),
      active: formatRangeSet(this.#state().active),
    });
    const lease: KubeObject = {
      apiVersion: "coordination.k8s.io/v1",
      kind: "Lease",
      metadata: { name: this.leaseName, namespace: this.#namespace },
    };
    this.#opts.recorder?.event(
      lease,
      type,
      reason,
      `${this.identity} ${message} (members: ${members.join(", ")})`,
    );
  }
}
