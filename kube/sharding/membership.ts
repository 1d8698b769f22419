/**
 * The membership loop of one shard member: every retry period it renews its own member Lease
 * (writing the ranges it announces), lists all member Leases with a quorum read, and feeds both
 * to the hand-over {@linkcode step}; the actions go to the callbacks, one at a time, in order.
 *
 * Order matters for safety: the list of a round is sent only after that round's renewal was
 * answered, so a claim written in the renewal is visible to every member that lists later (the
 * "write, then read" half of the protocol in handover.ts). The list carries no resourceVersion,
 * so the API server answers it from a consistent read, never from a stale cache.
 *
 * Each request is cut off after one retry period, and a timer fires at the renew deadline, so
 * a member whose API server stopped answering abandons its ranges on time even while requests
 * hang. Abandon means the callbacks must abort in-flight work; the safety margin covers requests
 * already on the wire.
 *
 * After each round's step the member deletes the dead member Leases members.ts points out (this
 * pod's previous process's at once; long-expired ones when it sorts first among the live
 * members), each with its observed resourceVersion as the delete's precondition, so a Lease
 * renewed since that list is never deleted (the API server answers 409 instead).
 *
 * @module
 */
import { getLogger } from "@logtape/logtape";
import type { Client } from "../client.ts";
import { type Clock, realClock, sleep } from "../clock.ts";
import { type Lease, Leases } from "../core.ts";
import { isConflict, isNotFound } from "../errors.ts";
import { rfc3339Micro } from "../time.ts";
import {
  announcedRanges,
  initialShardState,
  type ShardAction,
  type ShardObservation,
  type ShardState,
  step,
} from "./handover.ts";
import {
  type DeadReason,
  leasesToDelete,
  type MemberRecord,
  MemberTracker,
  type MemberView,
} from "./members.ts";
import { formatRangeSet, type RangeSet } from "./range.ts";
import {
  deadLeaseRetentionMs,
  DEFAULT_SHARD_TIMING,
  type ShardTiming,
  validateShardTiming,
} from "./timing.ts";

const log = getLogger(["cocoon-operator", "sharding"]);

/** Label on every member Lease; its value names the group of members that split one space. */
export const MEMBER_GROUP_LABEL = "sharding.cocoonstack.io/group";
/** Annotation: the ranges the member may act on (active, draining, claimed). */
export const HELD_ANNOTATION = "sharding.cocoonstack.io/held";
/** Annotation: the member's share of the split as it last computed it (for people). */
export const DESIRED_ANNOTATION = "sharding.cocoonstack.io/desired";
/** Annotation "true": the member is shutting down; others leave it out of the split. */
export const LEAVING_ANNOTATION = "sharding.cocoonstack.io/leaving";

/**
 * The member Lease's name: the prefix and the identity reduced to what a Lease name allows
 * (lowercase letters, digits, "-", "."). The identity itself goes in spec.holderIdentity and
 * is what the split sorts; only the name is reduced.
 */
export function memberLeaseName(identity: string, prefix = "cocoon-operator-shard-"): string {
  const reduced = identity.toLowerCase().replace(/[^a-z0-9.-]+/g, "-");
  return (prefix + reduced).slice(0, 253).replace(/[^a-z0-9]+$/, "");
}

/** What the member does with its actions; each may be async and is awaited before the next. */
export interface ShardCallbacks {
  /** Start acting on these ranges. */
  onStart(ranges: RangeSet): void | Promise<void>;
  /** Take no new work in these ranges. */
  onStop(ranges: RangeSet): void | Promise<void>;
  /** The ranges are given back (timedOut: abort what still runs there first). */
  onRelease(ranges: RangeSet, timedOut: boolean): void | Promise<void>;
  /** The renew deadline passed: stop at once, aborting in-flight work. */
  onAbandon(ranges: RangeSet): void | Promise<void>;
}

export interface ShardMemberOptions extends ShardCallbacks {
  client: Pick<Client, "get" | "create" | "update" | "list" | "delete">;
  /** Namespace of the member Leases (the operator's). */
  namespace: string;
  /** Unique per process (leaderIdentity()). */
  identity: string;
  /**
   * The POD_NAME the identity was made from, only when that variable was set (never the
   * HOSTNAME fallback): another member `<podName>_<suffix>` is then this pod's previous process,
   * dead, and its Lease is ignored and deleted at once. The identity must start with
   * `<podName>_`.
   */
  podName?: string;
  /** Called after this member deleted a dead member's Lease (for a metric). */
  onDeadLeaseDeleted?: (identity: string, reason: DeadReason) => void;
  /** Value of {@linkcode MEMBER_GROUP_LABEL}; members with the same group split one space. */
  group?: string;
  timing?: ShardTiming;
  clock?: Clock;
  /** Hashes of the namespaces with reconciles in flight (for the drain). */
  busyHashes?: () => readonly bigint[];
  /** Whether the caches hold these ranges yet (see ShardObservation.cachesHold). */
  cachesHold?: (ranges: RangeSet) => boolean;
  /** On shutdown, drain and give the ranges back before deleting the Lease (default true). */
  leaveOnStop?: boolean;
  /**
   * Called at the end of every round, leave rounds included, with the other members as last
   * listed (the leader-Lease fence, fence.ts). Awaited: the next round waits for it.
   */
  afterRound?: (
    members: readonly MemberView[],
    leaving: boolean,
    signal: AbortSignal,
  ) => Promise<void>;
}

/** One member of a sharded operator. Construct, then await run(signal). */
export class ShardMember {
  readonly #opts: ShardMemberOptions;
  readonly #timing: ShardTiming;
  readonly #clock: Clock;
  readonly #tracker: MemberTracker;
  readonly #leaseName: string;
  #state: ShardState;
  #lease?: Lease;
  #members: readonly MemberView[] = [];
  #actions: Promise<void> = Promise.resolve();
  #deadlineTimer?: number;
  #running = false;
  /** Dead Leases whose delete failed unexpectedly (identity@version), warned about once. */
  readonly #warnedDeletes = new Set<string>();

  constructor(opts: ShardMemberOptions) {
    if (!opts.identity) throw new Error("shard member identity is empty");
    if (opts.podName !== undefined && !opts.identity.startsWith(`${opts.podName}_`)) {
      throw new Error(
        `shard member identity ${JSON.stringify(opts.identity)} is not made from POD_NAME ` +
          JSON.stringify(opts.podName),
      );
    }
    this.#opts = opts;
    this.#timing = validateShardTiming(opts.timing ?? DEFAULT_SHARD_TIMING);
    this.#clock = opts.clock ?? realClock;
    this.#tracker = new MemberTracker(this.#timing.expiryMarginMs, {
      deadLeaseRetentionMs: deadLeaseRetentionMs(this.#timing),
      podName: opts.podName || undefined,
      self: opts.identity,
    });
    this.#leaseName = memberLeaseName(opts.identity);
    this.#state = initialShardState(opts.identity);
  }

  /** The hand-over state after the last step. */
  get state(): ShardState {
    return this.#state;
  }

  /** The other members as last listed. */
  get members(): readonly MemberView[] {
    return this.#members;
  }

  /** Name of this member's Lease. */
  get leaseName(): string {
    return this.#leaseName;
  }

  /** Runs rounds until the signal aborts, then leaves (unless leaveOnStop is false). */
  async run(signal: AbortSignal): Promise<void> {
    if (this.#running) throw new Error("ShardMember.run called twice");
    this.#running = true;
    try {
      while (!signal.aborted) {
        await this.#round(false, signal);
        await sleep(this.#clock, this.#timing.retryPeriodMs, signal).catch(() => {});
      }
      if (this.#opts.leaveOnStop ?? true) await this.#leave();
    } finally {
      this.#clearDeadline();
      await this.#actions;
    }
  }

  /** Drains out, bounded by one lease duration, then deletes the Lease. */
  async #leave(): Promise<void> {
    const budget = new AbortController();
    const timer = this.#clock.setTimeout(() => budget.abort(), this.#timing.leaseDurationMs);
    try {
      while (!budget.signal.aborted && !this.#state.left) {
        await this.#round(true, budget.signal);
        if (this.#state.left) break;
        await sleep(this.#clock, this.#timing.retryPeriodMs, budget.signal).catch(() => {});
      }
    } finally {
      this.#clock.clearTimeout(timer);
    }
    if (!this.#state.left) {
      // Out of time: stop everything; the Lease then still names the ranges, which keeps them
      // blocked for others until it expires, so deleting it below is safe.
      this.#apply({ busyHashes: [], leaving: true }, Number.POSITIVE_INFINITY);
    }
    await this.#actions;
    try {
      await this.#opts.client.delete(Leases, this.#opts.namespace, this.#leaseName);
    } catch (err) {
      if (!isNotFound(err)) {
        log.warn("could not delete shard member lease {lease}: {error}", {
          lease: this.#leaseName,
          error: String(err),
        });
      }
    }
  }

  async #round(leaving: boolean, signal: AbortSignal): Promise<void> {
    const sentAt = this.#clock.now();
    const announced = announcedRanges(this.#state);
    let renewal: ShardObservation["renewal"];
    try {
      await this.#withTimeout(signal, (s) => this.#renew(sentAt, announced, leaving, s));
      renewal = { sentAt, announced };
    } catch (err) {
      log.warn("could not renew shard member lease {lease}: {error}", {
        lease: this.#leaseName,
        error: String(err),
      });
    }
    let members: MemberView[] | undefined;
    if (renewal) {
      try {
        const list = await this.#withTimeout(signal, (s) =>
          this.#opts.client.list(Leases, {
            namespace: this.#opts.namespace,
            labelSelector: { [MEMBER_GROUP_LABEL]: this.#group() },
            signal: s,
          }));
        members = this.#tracker.observe(list.items.map(toRecord), this.#clock.now());
        this.#members = members.filter((m) => m.identity !== this.#opts.identity);
        for (const m of members) {
          if (m.problem) {
            log.warn("shard member {member}: {problem}", {
              member: m.identity,
              problem: m.problem,
            });
          }
        }
      } catch (err) {
        log.warn("could not list shard member leases: {error}", { error: String(err) });
      }
    }
    const busyHashes = this.#opts.busyHashes?.() ?? [];
    const cachesHold = this.#opts.cachesHold;
    this.#apply({ renewal, members, busyHashes, leaving, cachesHold }, this.#clock.now());
    if (renewal) this.#armDeadline();
    if (members) {
      await this.#deleteDead(leasesToDelete(this.#opts.identity, members, leaving), signal);
    }
    if (this.#opts.afterRound) {
      try {
        await this.#opts.afterRound(this.#members, leaving, signal);
      } catch (err) {
        log.error("shard member {identity}: end-of-round hook failed: {error}", {
          identity: this.#opts.identity,
          error: String(err),
        });
      }
    }
  }

  /** Deletes dead members' Leases, each only if still at the resourceVersion it was seen at. */
  async #deleteDead(dead: readonly MemberView[], signal: AbortSignal): Promise<void> {
    for (const view of dead) {
      if (signal.aborted) return;
      if (!view.version) continue; // no precondition to hold it to: leave it be
      const name = view.leaseName ?? memberLeaseName(view.identity);
      const fields = {
        member: view.identity,
        lease: name,
        reason: view.dead,
        resourceVersion: view.version,
      };
      try {
        await this.#withTimeout(
          signal,
          (s) =>
            this.#opts.client.delete(Leases, this.#opts.namespace, name, {
              preconditions: { resourceVersion: view.version },
              signal: s,
            }),
        );
      } catch (err) {
        if (isConflict(err) && view.dead === "predecessor") {
          // Only its holder writes a member Lease: the "previous process" just renewed it.
          log.warn(
            "member Lease {lease} of {member} changed although its pod's operator process was " +
              "restarted: do two operator processes share POD_NAME?",
            fields,
          );
        } else if (isConflict(err) || isNotFound(err)) {
          log.debug("member Lease {lease} of {member} was renewed or deleted meanwhile", fields);
        } else {
          const key = `${view.identity}@${view.version}`;
          if (!this.#warnedDeletes.has(key)) {
            this.#warnedDeletes.add(key);
            log.warn(
              "could not delete member Lease {lease} of dead shard member {member}: {error}",
              {
                ...fields,
                error: String(err),
              },
            );
          }
        }
        continue;
      }
      log.info(
        view.dead === "predecessor"
          ? "deleted member Lease {lease} of {member}, this pod's previous operator process"
          : "deleted member Lease {lease} of dead shard member {member}, not renewed for " +
            "at least {expiredMs} ms",
        {
          ...fields,
          expiredMs: this.#timing.leaseDurationMs + this.#timing.expiryMarginMs +
            deadLeaseRetentionMs(this.#timing),
        },
      );
      if (view.dead) this.#opts.onDeadLeaseDeleted?.(view.identity, view.dead);
    }
  }

  /** Steps, then queues the actions behind those still being carried out. */
  #apply(obs: ShardObservation, now: number): void {
    const result = step(this.#state, obs, now, this.#timing);
    this.#state = result.state;
    for (const action of result.actions) {
      this.#actions = this.#actions.then(() => this.#perform(action));
    }
  }

  async #perform(action: ShardAction): Promise<void> {
    const ranges = "ranges" in action ? formatRangeSet(action.ranges) : "";
    try {
      switch (action.type) {
        case "start":
          log.info("shard member {identity} starts ranges {ranges}", {
            identity: this.#opts.identity,
            ranges,
          });
          await this.#opts.onStart(action.ranges);
          break;
        case "stop":
          log.info("shard member {identity} drains ranges {ranges}", {
            identity: this.#opts.identity,
            ranges,
          });
          await this.#opts.onStop(action.ranges);
          break;
        case "release":
          log.info("shard member {identity} releases ranges {ranges} (timed out: {timedOut})", {
            identity: this.#opts.identity,
            ranges,
            timedOut: action.timedOut,
          });
          await this.#opts.onRelease(action.ranges, action.timedOut);
          break;
        case "abandon":
          log.warn("shard member {identity} abandons ranges {ranges}: no renewal for {ms} ms", {
            identity: this.#opts.identity,
            ranges,
            ms: this.#timing.renewDeadlineMs,
          });
          await this.#opts.onAbandon(action.ranges);
          break;
        case "left":
          log.info("shard member {identity} left", { identity: this.#opts.identity });
          break;
      }
    } catch (err) {
      log.error("shard member {identity}: {action} callback failed: {error}", {
        identity: this.#opts.identity,
        action: action.type,
        error: String(err),
      });
    }
  }

  /** The step at the renew deadline, in case no round gets there (hanging requests). */
  #armDeadline(): void {
    this.#clearDeadline();
    const at = (this.#state.lastRenewalAt ?? this.#clock.now()) + this.#timing.renewDeadlineMs;
    this.#deadlineTimer = this.#clock.setTimeout(() => {
      this.#deadlineTimer = undefined;
      this.#apply({ busyHashes: this.#opts.busyHashes?.() ?? [] }, this.#clock.now());
    }, Math.max(0, at - this.#clock.now()));
  }

  #clearDeadline(): void {
    if (this.#deadlineTimer !== undefined) this.#clock.clearTimeout(this.#deadlineTimer);
    this.#deadlineTimer = undefined;
  }

  #group(): string {
    return this.#opts.group ?? "cocoon-operator";
  }

  async #withTimeout<T>(signal: AbortSignal, call: (s: AbortSignal) => Promise<T>): Promise<T> {
    const cut = new AbortController();
    const timer = this.#clock.setTimeout(() => cut.abort(), this.#timing.retryPeriodMs);
    try {
      return await call(AbortSignal.any([signal, cut.signal]));
    } finally {
      this.#clock.clearTimeout(timer);
    }
  }

  async #renew(
    sentAt: number,
    announced: RangeSet,
    leaving: boolean,
    signal: AbortSignal,
  ): Promise<void> {
    const annotations = {
      [HELD_ANNOTATION]: formatRangeSet(announced),
      [DESIRED_ANNOTATION]: formatRangeSet(this.#state.desired),
      [LEAVING_ANNOTATION]: String(leaving),
    };
    const spec = {
      holderIdentity: this.#opts.identity,
      leaseDurationSeconds: this.#timing.leaseDurationMs / 1000,
      renewTime: rfc3339Micro(sentAt),
    };
    if (!this.#lease) {
      try {
        this.#lease = await this.#opts.client.get(Leases, this.#opts.namespace, this.#leaseName, {
          signal,
        });
      } catch (err) {
        if (!isNotFound(err)) throw err;
        this.#lease = await this.#opts.client.create(Leases, {
          apiVersion: "coordination.k8s.io/v1",
          kind: "Lease",
          metadata: {
            name: this.#leaseName,
            namespace: this.#opts.namespace,
            labels: { [MEMBER_GROUP_LABEL]: this.#group() },
            annotations,
          },
          spec: { ...spec, acquireTime: rfc3339Micro(sentAt) },
        }, { signal });
        return;
      }
    }
    const current = this.#lease;
    try {
      this.#lease = await this.#opts.client.update(Leases, {
        ...current,
        metadata: {
          ...current.metadata,
          labels: { ...current.metadata?.labels, [MEMBER_GROUP_LABEL]: this.#group() },
          annotations: { ...current.metadata?.annotations, ...annotations },
        },
        spec: { ...current.spec, ...spec },
      }, { signal });
    } catch (err) {
      // Read it afresh next round (a conflict, or it was deleted).
      this.#lease = undefined;
      throw err;
    }
  }
}

function toRecord(lease: Lease): MemberRecord {
  const annotations = lease.metadata?.annotations ?? {};
  return {
    identity: lease.spec?.holderIdentity ?? "",
    version: lease.metadata?.resourceVersion ?? "",
    name: lease.metadata?.name,
    leaseDurationMs: (lease.spec?.leaseDurationSeconds ?? 0) * 1000,
    held: annotations[HELD_ANNOTATION] ?? "",
    leaving: annotations[LEAVING_ANNOTATION] === "true",
  };
}
