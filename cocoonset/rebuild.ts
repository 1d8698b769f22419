/**
 * The rebuild budget of sub-agents: how often each slot's pod was deleted for a rebuild and when,
 * kept on the CocoonSet because the pod is gone after the delete it accounts for.
 */
import type { CocoonSet } from "../common/apis/v1/cocoonset_types.ts";
import { parseRfc3339, rfc3339Nano } from "../kube/mod.ts";
import { parseGoInt } from "../common/meta/annotations.ts";

/** CocoonSet annotation: JSON object keyed by slot, `{"count": N, "lastDeleted": RFC 3339}`. */
export const ANNOTATION_REBUILD_HISTORY = "cocoonset.cocoonstack.io/rebuild-history";
/** Pod annotation marking a sub-agent that used up its rebuilds (value "true"). */
export const ANNOTATION_DEAD_LETTER = "cocoonset.cocoonstack.io/dead-letter";
/** Rebuild deletes per slot before the next failure dead-letters the pod. */
export const MAX_REBUILD_ATTEMPTS = 4;

/** Slot → its rebuilds so far and when the last one deleted the pod (epoch ms). */
export type RebuildHistory = Map<number, { count: number; lastDeleted: number }>;

/** Reads the history; anything malformed is none at all (as Go's decoder), never a wedge. */
export function readRebuildHistory(cs: CocoonSet): RebuildHistory {
  const raw = cs.metadata.annotations?.[ANNOTATION_REBUILD_HISTORY];
  if (!raw) return new Map();
  try {
    return parseHistory(JSON.parse(raw)) ?? new Map();
  } catch {
    return new Map();
  }
}

function parseHistory(parsed: unknown): RebuildHistory | undefined {
  if (parsed === null || typeof parsed !== "object" || Array.isArray(parsed)) return undefined;
  const out: RebuildHistory = new Map();
  for (const [key, value] of Object.entries(parsed as Record<string, unknown>)) {
    const slot = parseGoInt(key, 32);
    // JSON null decodes to Go's zero value: an entry (or field) of null is count 0, never deleted.
    const { count = null, lastDeleted = null } = (value ?? {}) as Record<string, unknown>;
    if (slot === undefined || typeof value !== "object" || Array.isArray(value)) return undefined;
    if (count !== null && !(typeof count === "number" && Number.isInteger(count))) return undefined;
    const ms = typeof lastDeleted === "string" ? parseRfc3339(lastDeleted) : undefined;
    if (lastDeleted !== null && ms === undefined) return undefined;
    out.set(slot, { count: count ?? 0, lastDeleted: ms ?? 0 });
  }
  return out;
}

/** The annotation value (slots above replicas left out, keys in Go's string order); "" if empty. */
export function encodeRebuildHistory(replicas: number, history: RebuildHistory): string {
  const keys = [...history.keys()].filter((slot) => slot <= replicas).map(String).sort();
  if (keys.length === 0) return "";
  // By hand: a JS object lists integer-like keys numerically.
  const members = keys.map((key) => {
    const e = history.get(Number(key))!;
    const entry = { count: e.count, lastDeleted: rfc3339Nano(e.lastDeleted) };
    return `${JSON.stringify(key)}:${JSON.stringify(entry)}`;
  });
  return `{${members.join(",")}}`;
}

/** Wait before the next rebuild after priorCount rebuilds: 0, 1 s, 5 s, then 30 s. */
export function backoffDelayMs(priorCount: number): number {
  return [0, 1_000, 5_000][Math.max(priorCount, 0)] ?? 30_000;
}
