/**
 * Test helper: a discrete-event simulation of several shard members on one fake clock, sharing a
 * simulated API server that stores their Leases. Each member's round is three separate events
 * (renew, list, step) so other members' events interleave between them, as requests do. Faults:
 * joins, graceful leaves, crashes (SIGKILL: the member never runs again, its Lease stays),
 * restarts (the pod's process dies and a new one with the same POD_NAME starts a little later),
 * partitions (requests fail; sometimes a write lands but its answer is lost). Members delete dead
 * Leases as membership.ts does (members.ts leasesToDelete), held to the version they listed.
 */

import {
  actingRanges,
  announcedRanges,
  initialShardState,
  type ShardState,
  step,
} from "../handover.ts";
import { leasesToDelete, type MemberRecord, MemberTracker, type MemberView } from "../members.ts";
import {
  formatRangeSet,
  FULL_RANGE,
  intersect,
  rangeContains,
  type RangeSet,
  sameSet,
  union,
} from "../range.ts";
import { splitRanges } from "../split.ts";
import { fnv1a64 } from "../hash.ts";
import { deadLeaseRetentionMs, type ShardTiming } from "../timing.ts";

interface StoredLease {
  version: number;
  held: string;
  leaving: boolean;
  leaseDurationMs: number;
}

interface Member {
  identity: string;
  state: ShardState;
  tracker: MemberTracker;
  crashed: boolean;
  crashedAt?: number;
  /** Crashed by a restart of its pod: its process is gone, it acts no more. */
  restarted?: boolean;
  partitionedUntil: number;
  leaving: boolean;
  gone: boolean;
  renewal?: { sentAt: number; announced: RangeSet };
  members?: MemberView[];
  /** namespace hash → when its in-flight work ends */
  work: Map<bigint, number>;
}

interface SimEvent {
  at: number;
  seq: number;
  run: () => void;
}

export interface SimReport {
  violations: string[];
  handovers: number;
  finalCovered: boolean;
  finalBalanced: boolean;
  alive: number;
  /** Leases on the simulated server whose member does not run any more. */
  deadLeases: string[];
  /** Dead Leases the members deleted. */
  deletions: number;
  /** Each live member's sets, for failure messages. */
  states: string[];
  /** The simulated Leases, for failure messages. */
  server: string[];
}

export class HandoverSim {
  readonly violations: string[] = [];
  now = 0;
  handovers = 0;
  deletions = 0;
  readonly #timing: ShardTiming;
  readonly #random: () => number;
  readonly #server = new Map<string, StoredLease>();
  readonly #members: Member[] = [];
  #events: SimEvent[] = [];
  #seq = 0;
  #nextId = 0;
  readonly #namespaces: bigint[];

  constructor(timing: ShardTiming, random: () => number) {
    this.#timing = timing;
    this.#random = random;
    this.#namespaces = Array.from({ length: 60 }, (_, i) => fnv1a64(`ns-${i}`));
  }

  #schedule(at: number, run: () => void) {
    this.#events.push({ at, seq: this.#seq++, run });
  }

  #jitter(max: number): number {
    return Math.floor(this.#random() * max);
  }

  join(pod = `m${String(this.#nextId++).padStart(3, "0")}`): void {
    const identity = `${pod}_${this.#jitter(1e6)}`;
    const m: Member = {
      identity,
      state: initialShardState(""),
      tracker: new MemberTracker(this.#timing.expiryMarginMs, {
        deadLeaseRetentionMs: deadLeaseRetentionMs(this.#timing),
        podName: pod,
        self: identity,
      }),
      crashed: false,
      partitionedUntil: 0,
      leaving: false,
      gone: false,
      work: new Map(),
    };
    m.state = initialShardState(m.identity);
    this.#members.push(m);
    this.#schedule(this.now + this.#jitter(500), () => this.#renew(m));
  }

  #alive(): Member[] {
    return this.#members.filter((m) => !m.crashed && !m.gone);
  }

  #pick(filter: (m: Member) => boolean): Member | undefined {
    const candidates = this.#alive().filter(filter);
    return candidates.length ? candidates[this.#jitter(candidates.length)] : undefined;
  }

  crashOne(): void {
    const m = this.#pick(() => true);
    if (m) {
      m.crashed = true;
      m.crashedAt = this.now;
    }
  }

  /**
   * The process of one member's pod dies (container restart) and a new one, same POD_NAME, new
   * identity, starts 0.2–3 s later; the old one's Lease stays behind.
   */
  restartOne(): void {
    const m = this.#pick(() => true);
    if (!m) return;
    m.crashed = true;
    m.restarted = true;
    m.crashedAt = this.now;
    const pod = m.identity.slice(0, m.identity.indexOf("_"));
    this.#schedule(this.now + 200 + this.#jitter(2800), () => this.join(pod));
  }

  leaveOne(): void {
    const m = this.#pick((x) => !x.leaving);
    if (m) m.leaving = true;
  }

  partitionOne(durationMs: number): void {
    const m = this.#pick(() => true);
    if (m) m.partitionedUntil = this.now + durationMs;
  }

  /** Members that run and are not on their way out. */
  stayingCount(): number {
    return this.#alive().filter((m) => !m.leaving).length;
  }

  aliveCount(): number {
    return this.#alive().length;
  }

  #partitioned(m: Member): boolean {
    return this.now < m.partitionedUntil;
  }

  #renew(m: Member) {
    if (m.crashed || m.gone) return;
    const sentAt = this.now;
    const announced = announcedRanges(m.state);
    const write = () => {
      const prev = this.#server.get(m.identity);
      this.#server.set(m.identity, {
        version: (prev?.version ?? 0) + 1 + this.#jitter(3),
        held: formatRangeSet(announced),
        leaving: m.leaving,
        leaseDurationMs: this.#timing.leaseDurationMs,
      });
    };
    if (this.#partitioned(m)) {
      if (this.#random() < 0.2) write(); // landed, answer lost
      m.renewal = undefined;
    } else {
      write();
      m.renewal = { sentAt, announced };
      const deadline = sentAt + this.#timing.renewDeadlineMs;
      this.#schedule(deadline, () => this.#deadlineCheck(m));
    }
    this.#schedule(this.now + 1 + this.#jitter(400), () => this.#list(m));
  }

  #list(m: Member) {
    if (m.crashed || m.gone) return;
    if (this.#partitioned(m)) {
      m.members = undefined;
    } else {
      const records: MemberRecord[] = [...this.#server].map(([identity, l]) => ({
        identity,
        version: String(l.version),
        leaseDurationMs: l.leaseDurationMs,
        held: l.held,
        leaving: l.leaving,
      }));
      m.members = m.tracker.observe(records, this.now);
      for (const dead of leasesToDelete(m.identity, m.members, m.leaving)) {
        this.#schedule(this.now + 1 + this.#jitter(300), () => this.#deleteLease(m, dead));
      }
    }
    this.#schedule(this.now + 1 + this.#jitter(300), () => this.#step(m));
  }

  /** A delete held to the version listed: a Lease renewed since stays. */
  #deleteLease(m: Member, dead: MemberView) {
    if (m.crashed || m.gone || this.#partitioned(m)) return;
    const lease = this.#server.get(dead.identity);
    if (lease && String(lease.version) === dead.version) {
      this.#server.delete(dead.identity);
      this.deletions++;
    }
  }

  #busy(m: Member): bigint[] {
    for (const [h, until] of m.work) if (until <= this.now) m.work.delete(h);
    return [...m.work.keys()];
  }

  #apply(m: Member, obs: { renewal?: Member["renewal"]; members?: MemberView[] }) {
    const before = actingRanges(m.state);
    const result = step(
      m.state,
      { ...obs, busyHashes: this.#busy(m), leaving: m.leaving },
      this.now,
      this.#timing,
    );
    m.state = result.state;
    for (const a of result.actions) {
      if (a.type === "start") this.handovers++;
      if (a.type === "abandon" || (a.type === "release" && a.timedOut)) {
        // Aborted: the work stops now.
        for (const h of [...m.work.keys()]) {
          if (a.ranges.some((r) => rangeContains(r, h))) m.work.delete(h);
        }
      }
      if (a.type === "left") {
        this.#server.delete(m.identity);
        m.gone = true;
      }
    }
    // New work only in active ranges; a release must never drop running work silently.
    for (const h of this.#busy(m)) {
      if (!actingRanges(m.state).some((r) => rangeContains(r, h))) {
        this.violations.push(`${this.now}: ${m.identity} gave up ${h} while work runs there`);
      }
    }
    void before;
    this.#check();
  }

  #step(m: Member) {
    if (m.crashed || m.gone) return;
    this.#apply(m, { renewal: m.renewal, members: m.members });
    m.renewal = undefined;
    m.members = undefined;
    if (!m.gone) {
      for (const h of this.#namespaces) {
        if (
          this.#random() < 0.05 && !m.work.has(h) &&
          m.state.active.some((r) => rangeContains(r, h))
        ) m.work.set(h, this.now + this.#jitter(this.#timing.drainTimeoutMs * 1.3));
      }
      const period = this.#timing.retryPeriodMs;
      this.#schedule(this.now + period + this.#jitter(period / 5), () => this.#renew(m));
    }
  }

  #deadlineCheck(m: Member) {
    if (m.crashed || m.gone) return;
    this.#apply(m, {});
  }

  /** The invariant: no two members act on one hash; a crashed one counts until its Lease ends. */
  #check() {
    const acting: { id: string; ranges: RangeSet }[] = [];
    for (const m of this.#members) {
      if (m.gone) continue;
      if (m.restarted) continue; // its process is gone (the restart's premise)
      if (m.crashed) {
        const until = (m.state.lastRenewalAt ?? -Infinity) + this.#timing.leaseDurationMs;
        if (this.now < until) acting.push({ id: m.identity, ranges: actingRanges(m.state) });
        continue;
      }
      const ranges = actingRanges(m.state);
      if (
        ranges.length > 0 &&
        // Strictly after: at the deadline instant itself the member's own timer is due.
        this.now - (m.state.lastRenewalAt ?? -Infinity) > this.#timing.renewDeadlineMs
      ) {
        this.violations.push(`${this.now}: ${m.identity} acts past its renew deadline`);
      }
      acting.push({ id: m.identity, ranges });
    }
    for (let i = 0; i < acting.length; i++) {
      for (let j = i + 1; j < acting.length; j++) {
        if (intersect(acting[i].ranges, acting[j].ranges).length > 0) {
          this.violations.push(
            `${this.now}: ${acting[i].id} and ${acting[j].id} both act on ${
              formatRangeSet(intersect(acting[i].ranges, acting[j].ranges))
            }`,
          );
        }
      }
    }
  }

  /** Runs events until `until` (sim ms). */
  runUntil(until: number): void {
    for (;;) {
      this.#events.sort((a, b) => a.at - b.at || a.seq - b.seq);
      const next = this.#events[0];
      if (!next || next.at > until) break;
      this.#events.shift();
      this.now = next.at;
      next.run();
      if (this.violations.length > 20) return;
    }
    this.now = until;
  }

  report(): SimReport {
    const alive = this.#alive();
    const covered = union([], alive.flatMap((m) => [...m.state.active]));
    const split = splitRanges(alive.map((m) => m.identity));
    return {
      violations: this.violations,
      handovers: this.handovers,
      finalCovered: sameSet(covered, [FULL_RANGE]),
      finalBalanced: alive.every((m) => sameSet(m.state.active, [split.get(m.identity)!])),
      alive: alive.length,
      deadLeases: [...this.#server.keys()].filter((id) => !alive.some((m) => m.identity === id)),
      deletions: this.deletions,
      states: alive.map((m) =>
        `${m.identity} leaving=${m.leaving} active=${formatRangeSet(m.state.active)} pending=${
          formatRangeSet(m.state.pending)
        } draining=${m.state.draining.length} desired=${formatRangeSet(m.state.desired)}`
      ),
      server: [...this.#server].map(([id, l]) => `${id} held=${l.held} leaving=${l.leaving}`),
    };
  }
}
