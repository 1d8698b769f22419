/**
 * The deterministic split of the hash space among live members: identities sorted by UTF-16
 * code unit (the same order on every replica, whatever the order the API server listed them),
 * each gets floor(2^64 / n) hashes in that order, the last also the remainder. Contiguous, full
 * coverage, no overlap.
 *
 * @module
 */

import { HASH_SPACE_END, type HashRange } from "./range.ts";

/** Each identity's range; an empty or duplicate-only input gives what its distinct members get. */
export function splitRanges(identities: Iterable<string>): Map<string, HashRange> {
  const sorted = [...new Set(identities)].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
  const out = new Map<string, HashRange>();
  if (sorted.length === 0) return out;
  const width = HASH_SPACE_END / BigInt(sorted.length);
  sorted.forEach((id, i) => {
    const start = width * BigInt(i);
    const end = i === sorted.length - 1 ? HASH_SPACE_END : start + width;
    out.set(id, { start, end });
  });
  return out;
}
