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
 * @module
 */

import { FULL_RANGE, parseRangeSet, type RangeSet } from "./range.ts";

/** One member Lease as read from the API server (only what membership uses). */
export interface MemberRecord {
  /** spec.holderIdentity */
  readonly identity: string;
  /** metadata.resourceVersion: changes on every renewal. */
  readonly version: string;
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
}

interface Seen {
  record: MemberRecord;
  observedAt: number;
  vanished: boolean;
}

/** Remembers when each member's Lease was last seen changing. */
export class MemberTracker {
  readonly #seen = new Map<string, Seen>();

  constructor(readonly expiryMarginMs: number) {}

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
      const live = !seen.vanished && now < expiresAt;
      const blocking = now < expiresAt + this.expiryMarginMs && held.length > 0;
      if (seen.vanished && !blocking) {
        this.#seen.delete(identity);
        continue;
      }
      views.push({ identity, held, leaving: seen.record.leaving, live, blocking, problem });
    }
    return views.sort((a, b) => (a.identity < b.identity ? -1 : a.identity > b.identity ? 1 : 0));
  }
}
