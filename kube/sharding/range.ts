/**
 * Ranges of the 64-bit hash space: half-open `[start, end)` as the server's shardRange() reads
 * them (start inclusive, end exclusive, end at most 2^64), and sets of disjoint ranges kept
 * sorted and merged so equal sets compare equal.
 *
 * @module
 */

/** 2^64: the exclusive end of the hash space. */
export const HASH_SPACE_END = 1n << 64n;

/** `[start, end)` with 0 <= start < end <= 2^64. */
export interface HashRange {
  readonly start: bigint;
  readonly end: bigint;
}

/** Sorted, disjoint, non-adjacent ranges (adjacent ones are merged). */
export type RangeSet = readonly HashRange[];

/** The whole hash space. */
export const FULL_RANGE: HashRange = { start: 0n, end: HASH_SPACE_END };

/** A range, checked: throws when it is empty or leaves the hash space. */
export function hashRange(start: bigint, end: bigint): HashRange {
  if (start < 0n || end > HASH_SPACE_END || start >= end) {
    throw new RangeError(`invalid hash range [${formatBound(start)}, ${formatBound(end)})`);
  }
  return { start, end };
}

/** True when `hash` lies in `[range.start, range.end)`. */
export function rangeContains(range: HashRange, hash: bigint): boolean {
  return range.start <= hash && hash < range.end;
}

/** True when some range of `set` holds `hash`. */
export function setContains(set: RangeSet, hash: bigint): boolean {
  return set.some((r) => rangeContains(r, hash));
}

/**
 * A bound as the server writes it: "0x" and 16 lowercase hex digits, except 2^64, which is
 * "0x10000000000000000" (17 digits, the only value the server accepts with 17).
 */
export function formatBound(bound: bigint): string {
  if (bound === HASH_SPACE_END) return "0x10000000000000000";
  return "0x" + bound.toString(16).padStart(16, "0");
}

/** Parses a bound in the server's strict form; throws with the reason otherwise. */
export function parseBound(text: string): bigint {
  if (text === "0x10000000000000000") return HASH_SPACE_END;
  if (!/^0x[0-9a-f]{16}$/.test(text)) {
    throw new SyntaxError(
      `hash bound ${JSON.stringify(text)} is not "0x" and 16 lowercase hex digits`,
    );
  }
  return BigInt(text);
}

/** Sorts and merges overlapping or adjacent ranges; drops empty ones. */
export function normalize(ranges: Iterable<HashRange>): RangeSet {
  const sorted = [...ranges].filter((r) => r.start < r.end).sort((a, b) =>
    a.start < b.start ? -1 : a.start > b.start ? 1 : 0
  );
  const out: HashRange[] = [];
  for (const r of sorted) {
    const last = out[out.length - 1];
    if (last && r.start <= last.end) {
      if (r.end > last.end) out[out.length - 1] = { start: last.start, end: r.end };
    } else {
      out.push(r);
    }
  }
  return out;
}

/** a ∪ b */
export function union(a: RangeSet, b: RangeSet): RangeSet {
  return normalize([...a, ...b]);
}

/** a ∩ b */
export function intersect(a: RangeSet, b: RangeSet): RangeSet {
  const out: HashRange[] = [];
  for (const x of a) {
    for (const y of b) {
      const start = x.start > y.start ? x.start : y.start;
      const end = x.end < y.end ? x.end : y.end;
      if (start < end) out.push({ start, end });
    }
  }
  return normalize(out);
}

/** a − b */
export function subtract(a: RangeSet, b: RangeSet): RangeSet {
  let rest: HashRange[] = [...a];
  for (const y of b) {
    const next: HashRange[] = [];
    for (const x of rest) {
      if (y.end <= x.start || y.start >= x.end) {
        next.push(x);
        continue;
      }
      if (x.start < y.start) next.push({ start: x.start, end: y.start });
      if (y.end < x.end) next.push({ start: y.end, end: x.end });
    }
    rest = next;
  }
  return normalize(rest);
}

/** True when a and b share at least one hash. */
export function overlaps(a: RangeSet, b: RangeSet): boolean {
  return intersect(a, b).length > 0;
}

/** True when both sets hold the same hashes. */
export function sameSet(a: RangeSet, b: RangeSet): boolean {
  const x = normalize(a);
  const y = normalize(b);
  return x.length === y.length &&
    x.every((r, i) => r.start === y[i].start && r.end === y[i].end);
}

/** Number of hashes in the set. */
export function size(set: RangeSet): bigint {
  return set.reduce((n, r) => n + (r.end - r.start), 0n);
}

/**
 * The compact text a member writes into its Lease annotations: "start-end" bounds (server
 * form) joined by ",", "" for the empty set.
 */
export function formatRangeSet(set: RangeSet): string {
  return normalize(set).map((r) => `${formatBound(r.start)}-${formatBound(r.end)}`).join(",");
}

/** Reads {@linkcode formatRangeSet}'s text; throws with the offending part on bad input. */
export function parseRangeSet(text: string): RangeSet {
  if (text.trim() === "") return [];
  return normalize(
    text.split(",").map((part) => {
      const [start, end, extra] = part.trim().split("-");
      if (start === undefined || end === undefined || extra !== undefined) {
        throw new SyntaxError(`hash range ${JSON.stringify(part)} is not "start-end"`);
      }
      return hashRange(parseBound(start), parseBound(end));
    }),
  );
}
