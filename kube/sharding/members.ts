/**
 * What a member knows of the others: their member Leases, read with a quorum list, turned into
 * views with expiry measured on the local clock. As client-go's leader election, a Lease counts
 * as renewed when this member sees its record change (here: its resourceVersion), and it expires
 * leaseDuration after that observation, so clock differences between nodes do not matter.
 *
 * A member whose Lease vanished (deleted by hand, or by a member that left) keeps blocking the
 * ranges it last announced until that same deadline: a deleted Lease is not proof that its
 * holder stopped. A member that left announced nothing, so it blocks nothing.
 *
 * Two kinds of Lease are dead and may be deleted ({@linkcode MemberView.dead}, carried out by
 * membership.ts with the observed resourceVersion as a precondition):
 * - "expired": unchanged for its lease duration, the safety margin and the retention on top,
 *   all on this member's clock. It blocks nothing; deleting it only spares members that
 *   start later (and have never seen it) from counting it live for a lease duration.
 * - "predecessor": with POD_NAME known, a Lease whose identity is `<POD_NAME>_<other suffix>` is
 *   this pod's previous operator process (a container restart): pod names are unique and a pod
 *   runs one operator process, so that process is gone. It is neither live nor blocking at once.
 *
 * @module
 */

import { FULL_RANGE, parseRangeSet, type RangeSet } from "./range.ts";

/** One member Lease as read from the API server (only what membership uses). */
export interface MemberRecord {
  /** spec.holderIdentity */
  readonly identity: string;
  /** metadata.resourceVersion: changes on every renewal. */
  readonly version: string;
  /** metadata.name, for the delete (absent: the name memberLeaseName gives the identity). */
  readonly name?: string;
  /** spec.leaseDurationSeconds × 1000 */
  readonly leaseDurationMs: number;
  /** The `held` annotation: ranges the member may act on (active, draining or claimed). */
  readonly held: string;
  /** The `leaving` annotation is "true": drop it from the split, it is draining out. */
  readonly leaving: boolean;
}

/** Another member as this one sees it. */
export interface MemberView {
  readonly identity: string;
  /** What it announced it may act on; unreadable text counts as the whole space. */
  readonly held: RangeSet;
  readonly leaving: boolean;
  /** Its Lease has not expired: it gets a share of the split. */
  readonly live: boolean;
  /** Its held ranges are still taken: live, or expired for less than the safety margin. */
  readonly blocking: boolean;
  /** Set when the held annotation could not be read (it then blocks everything). */
  readonly problem?: string;
  /**
   * Set when its Lease is still on the server and may be deleted (see the module
   * documentation): "expired" long enough to block nothing, or "predecessor", this pod's
   * previous process.
   */
  readonly dead?: DeadReason;
  /** metadata.resourceVersion as last observed: the precondition of a delete. */
  readonly version?: string;
  /** metadata.name of its Lease, when the list gave it. */
  readonly leaseName?: string;
}

/** Why a member Lease may be deleted. */
export type DeadReason = "expired" | "predecessor";

export interface MemberTrackerOptions {
  /**
   * How long past its observed expiry plus the safety margin a Lease that nobody renews is kept
   * before it counts as dead ("expired"); default 0.
   */
  readonly deadLeaseRetentionMs?: number;
  /**
   * This process's POD_NAME (only when that variable is set, never the HOSTNAME fallback) and
   * its own identity: another identity `<podName>_<suffix>` is this pod's previous process.
   */
  readonly podName?: string;
  readonly self?: string;
}

/**
 * Whether `identity` is the identity of an earlier process of pod `podName`: leaderIdentity()
 * writes `<POD_NAME>_<uuid>`, and a pod name holds no "_", so the suffix is one word.
 */
export function isPredecessor(identity: string, podName: string, self: string): boolean {
  if (!podName || identity === self || !identity.startsWith(`${podName}_`)) return false;
  const suffix = identity.slice(podName.length + 1);
  return suffix.length > 0 && !suffix.includes("_");
}

interface Seen {
  record: MemberRecord;
  observedAt: number;
  vanished: boolean;
}

/** Remembers when each member's Lease was last seen changing. */
export class MemberTracker {
  readonly #seen = new Map<string, Seen>();
  readonly #retentionMs: number;
  readonly #podName: string;
  readonly #self: string;

  constructor(readonly expiryMarginMs: number, opts: MemberTrackerOptions = {}) {
    this.#retentionMs = opts.deadLeaseRetentionMs ?? 0;
    this.#podName = opts.podName ?? "";
    this.#self = opts.self ?? "";
  }

  /** Folds in one quorum list of all member Leases, read at `now`; returns every known member. */
  observe(records: readonly MemberRecord[], now: number): MemberView[] {
    const present = new Set<string>();
    for (const record of records) {
      if (!record.identity) continue;
      present.add(record.identity);
      const prev = this.#seen.get(record.identity);
      if (!prev || prev.vanished || prev.record.version !== record.version) {
        this.#seen.set(record.identity, { record, observedAt: now, vanished: false });
      }
    }
    const views: MemberView[] = [];
    for (const [identity, seen] of this.#seen) {
      if (!present.has(identity)) seen.vanished = true;
      const expiresAt = seen.observedAt + seen.record.leaseDurationMs;
      let held: RangeSet;
      let problem: string | undefined;
      try {
        held = parseRangeSet(seen.record.held);
      } catch (err) {
        held = [FULL_RANGE];
        problem = `unreadable held annotation ${JSON.stringify(seen.record.held)}: ${
          (err as Error).message
        }`;
      }
      const predecessor = this.#podName !== "" &&
        isPredecessor(identity, this.#podName, this.#self);
      const live = !predecessor && !seen.vanished && now < expiresAt;
      const blocking = !predecessor && now < expiresAt + this.expiryMarginMs && held.length > 0;
      if (seen.vanished && !blocking) {
        this.#seen.delete(identity);
        continue;
      }
      let dead: DeadReason | undefined;
      if (!seen.vanished) {
        if (predecessor) dead = "predecessor";
        else if (now >= expiresAt + this.expiryMarginMs + this.#retentionMs) dead = "expired";
      }
      views.push({
        identity,
        held,
        leaving: seen.record.leaving,
        live,
        blocking,
        problem,
        ...(dead ? { dead, version: seen.record.version, leaseName: seen.record.name } : {}),
      });
    }
    return views.sort((a, b) => (a.identity < b.identity ? -1 : a.identity > b.identity ? 1 : 0));
  }
}

/**
 * The dead Leases `self` should delete now: this pod's predecessors always; "expired" ones only
 * when `self` sorts first among the live, non-leaving members (itself included), so usually one
 * member collects them. Two collecting at once is harmless: the delete carries the observed
 * resourceVersion, so the second gets 404 and a renewed Lease 409.
 */
export function leasesToDelete(
  self: string,
  views: readonly MemberView[],
  leaving = false,
): MemberView[] {
  const others = views.filter((v) => v.identity !== self);
  const predecessors = others.filter((v) => v.dead === "predecessor");
  if (leaving) return predecessors;
  const first = others.filter((v) => v.live && !v.leaving).every((v) => self < v.identity);
  return first ? others.filter((v) => v.dead !== undefined) : predecessors;
}
