/**
 * Comparing two behaviour digests (tests/digest/digest.ts). Two kinds of finding:
 * - a key on one side only: the code did something the other never did (or stopped doing it), a
 *   behaviour difference whatever the counts;
 * - a count that moved by more than the tolerance: counts follow timing (requeues, retries,
 *   watch restarts, Lease renewals), so only a move beyond what two runs of the same code show is
 *   reported. The default tolerance came from measuring that (docs/development.md).
 *
 * Sections in ADVISORY are printed but do not fail the comparison: their keys themselves follow
 * timing (a 409 or a 404 answer happens in one run and not the next; a merge patch carries the
 * fields that changed since the last write, which depends on how events were batched).
 *
 * @module
 */
import { type Digest, type Section, SECTIONS } from "./digest.ts";

/** When two counts of one key count as the same. */
export interface Tolerance {
  /** Allowed absolute difference, whatever the size of the counts. */
  absolute: number;
  /** Allowed difference as a share of the larger count (0.25 = 25 %). */
  relative: number;
}

/**
 * The default: a count difference is reported when it exceeds both 3 and 25 % of the larger
 * count. Four passing e2e runs of the same code (six pairs) never moved a count of `requests`,
 * `events`, `statusWrites` or `registry` by more than 3 and more than 9.7 % at once, and moved
 * small counts by up to 2 (Lease renewals, LeaderElection Events); 25 % leaves room for a
 * busier machine and still reports a doubled count (50 %) or a third more (> 25 %). Measured
 * on 2026-12-01, see docs/development.md ("Behaviour digest").
 */
export const DEFAULT_TOLERANCE: Tolerance = { absolute: 3, relative: 0.25 };

/** Sections whose differences are reported but never fail a comparison (see module doc). */
export const ADVISORY: ReadonlySet<Section> = new Set([
  "responses",
  "eventRepeats",
  "statusFields",
  "registryResponses",
]);

/** Sections compared by key only (the count is how many scrapes saw the key). */
const KEYS_ONLY: ReadonlySet<Section> = new Set(["metrics"]);

/** One finding of a comparison. */
export interface Finding {
  section: Section;
  key: string;
  before: number | undefined;
  after: number | undefined;
  kind: "only-before" | "only-after" | "count";
  advisory: boolean;
}

/** Whether two counts differ beyond the tolerance. */
export function beyondTolerance(a: number, b: number, tol: Tolerance): boolean {
  const diff = Math.abs(a - b);
  return diff > tol.absolute && diff > tol.relative * Math.max(a, b);
}

/** Every difference between two digests, section by section, keys sorted. */
export function compareDigests(
  before: Digest,
  after: Digest,
  tol: Tolerance = DEFAULT_TOLERANCE,
): Finding[] {
  const findings: Finding[] = [];
  for (const section of SECTIONS) {
    const a = before[section] ?? {};
    const b = after[section] ?? {};
    const keys = [...new Set([...Object.keys(a), ...Object.keys(b)])].sort();
    const advisory = ADVISORY.has(section);
    for (const key of keys) {
      const x = a[key];
      const y = b[key];
      if (x === undefined || y === undefined) {
        findings.push({
          section,
          key,
          before: x,
          after: y,
          kind: x === undefined ? "only-after" : "only-before",
          advisory,
        });
      } else if (!KEYS_ONLY.has(section) && beyondTolerance(x, y, tol)) {
        findings.push({ section, key, before: x, after: y, kind: "count", advisory });
      }
    }
  }
  return findings;
}

/**
 * The largest relative count difference per section over keys both digests hold (what a
 * tolerance must allow for two runs of the same code), and the keys found on one side only.
 */
export function variation(
  a: Digest,
  b: Digest,
): Record<Section, { keys: number; oneSided: number; maxAbsolute: number; maxRelative: number }> {
  const out = {} as Record<
    Section,
    { keys: number; oneSided: number; maxAbsolute: number; maxRelative: number }
  >;
  for (const section of SECTIONS) {
    const x = a[section] ?? {};
    const y = b[section] ?? {};
    const keys = new Set([...Object.keys(x), ...Object.keys(y)]);
    let oneSided = 0;
    let maxAbsolute = 0;
    let maxRelative = 0;
    for (const k of keys) {
      if (x[k] === undefined || y[k] === undefined) {
        oneSided++;
        continue;
      }
      const diff = Math.abs(x[k] - y[k]);
      maxAbsolute = Math.max(maxAbsolute, diff);
      maxRelative = Math.max(maxRelative, diff / Math.max(x[k], y[k]));
    }
    out[section] = {
      keys: keys.size,
      oneSided,
      maxAbsolute,
      maxRelative: Math.round(maxRelative * 1000) / 1000,
    };
  }
  return out;
}

/** A finding as one line of text. */
export function formatFinding(f: Finding): string {
  const tag = f.advisory ? " (advisory)" : "";
  switch (f.kind) {
    case "only-before":
      return `${f.section}${tag}: only before: ${f.key} (${f.before})`;
    case "only-after":
      return `${f.section}${tag}: only after: ${f.key} (${f.after})`;
    case "count":
      return `${f.section}${tag}: count ${f.before} -> ${f.after}: ${f.key}`;
  }
}
