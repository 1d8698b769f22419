/**
 * The writer audit of the sharding e2e suite, on the replicas' own structured logs.
 *
 * Why the logs and not managedFields or an API server audit log: every replica runs under the same
 * service account, field manager (`cocoon-operator`) and User-Agent, so the API server cannot tell
 * them apart. The logs can: each process logs its hand-overs (`shard hand-over …`, with the ranges
 * it took or gave back) and every CocoonSet pass line carries `namespace` and `cocoonset`,
 * including the line of every pod it creates. All processes run on this machine, so their
 * timestamps share one clock.
 *
 * From a process's hand-over lines the audit rebuilds, per namespace, the intervals in which that
 * process was allowed to act on it (from ShardAcquired of a range holding the namespace's hash to
 * ShardReleased/ShardAbandoned of it, or to the process's death). It then checks that the
 * intervals of different processes never overlap, and that every pass line falls inside an
 * interval of the process that wrote it. Private to tests/e2e/.
 *
 * @module
 */
import assert from "node:assert/strict";
import { fnv1a64 } from "../../kube/sharding/hash.ts";
import {
  parseRangeSet,
  type RangeSet,
  setContains,
  subtract,
  union,
} from "../../kube/sharding/range.ts";
import type { LogLine } from "../faults/_support.ts";

/** The log of one operator process (a restarted replica is a new process). */
export interface ProcessLog {
  /** For messages: `replica <i> #<generation>`. */
  name: string;
  lines: readonly LogLine[];
  /** When it was SIGKILLed (it acts until then at the latest); Infinity while it runs. */
  endedAt: number;
}

/** One span in which a process may act on a namespace: [from, to]. */
export interface ActingSpan {
  process: string;
  from: number;
  to: number;
}

/** The identity a process announced in its shard lines ("" before any). */
export function identityOf(lines: readonly LogLine[]): string {
  for (const l of lines) {
    const id = l.properties.identity;
    if (typeof id === "string" && id !== "") return id;
  }
  return "";
}

const HANDOVER = "shard hand-over";

/** The spans of each namespace in which process p was acting on it. */
export function actingSpans(
  p: ProcessLog,
  namespaces: readonly string[],
): Map<string, ActingSpan[]> {
  const hashes = new Map(namespaces.map((ns) => [ns, fnv1a64(ns)]));
  const spans = new Map<string, ActingSpan[]>(namespaces.map((ns) => [ns, []]));
  const openSince = new Map<string, number>();
  let acting: RangeSet = [];
  const settle = (at: number) => {
    for (const [ns, h] of hashes) {
      const inside = setContains(acting, h);
      const since = openSince.get(ns);
      if (inside && since === undefined) openSince.set(ns, at);
      if (!inside && since !== undefined) {
        spans.get(ns)!.push({ process: p.name, from: since, to: at });
        openSince.delete(ns);
      }
    }
  };
  for (const line of p.lines) {
    if (!line.message.startsWith(HANDOVER)) continue;
    const ranges = parseRangeSet(String(line.properties.ranges ?? ""));
    switch (line.properties.reason) {
      case "ShardAcquired":
        acting = union(acting, ranges);
        break;
      case "ShardReleased":
      case "ShardAbandoned":
        acting = subtract(acting, ranges);
        break;
        // ShardDraining: no new work, but what runs may still write until the release.
    }
    settle(line.at);
  }
  for (const [ns, since] of openSince) {
    spans.get(ns)!.push({ process: p.name, from: since, to: p.endedAt });
  }
  return spans;
}

/** What the audit found, for the scenario's figure. */
export interface AuditFigure {
  passLines: number;
  podCreates: number;
  /** Acting spans over all namespaces and processes (60 namespaces never moving: 60). */
  namespaceSpans: number;
}

/**
 * Asserts the writer audit over every process's log: no two processes acting on one namespace
 * at once, every pass line of a namespace inside its writer's span, no pod created twice.
 */
export function auditWriters(
  processes: readonly ProcessLog[],
  namespaces: readonly string[],
): AuditFigure {
  const byNs = new Map<string, ActingSpan[]>(namespaces.map((ns) => [ns, []]));
  const own = new Map<string, Map<string, ActingSpan[]>>();
  for (const p of processes) {
    const spans = actingSpans(p, namespaces);
    own.set(p.name, spans);
    for (const [ns, list] of spans) byNs.get(ns)!.push(...list);
  }
  let namespaceSpans = 0;
  for (const [ns, list] of byNs) {
    list.sort((a, b) => a.from - b.from);
    namespaceSpans += list.length;
    for (let i = 1; i < list.length; i++) {
      const [prev, next] = [list[i - 1], list[i]];
      assert.ok(
        next.from >= prev.to,
        `${ns}: ${next.process} acted from ${iso(next.from)} while ${prev.process} still did ` +
          `(until ${iso(prev.to)})`,
      );
    }
  }
  const nsSet = new Set(namespaces);
  const created = new Map<string, string>();
  let passLines = 0;
  for (const p of processes) {
    const spans = own.get(p.name)!;
    for (const line of p.lines) {
      const ns = line.properties.namespace;
      if (typeof ns !== "string" || !nsSet.has(ns) || !("cocoonset" in line.properties)) continue;
      passLines++;
      assert.ok(
        spans.get(ns)!.some((s) => s.from <= line.at && line.at <= s.to),
        `${p.name} wrote ${ns}/${line.properties.cocoonset} at ${iso(line.at)} ` +
          `("${line.message}") outside its spans of ${ns}: ${JSON.stringify(spans.get(ns))}`,
      );
      if (line.message.startsWith("created ")) {
        const pod = String(line.properties.pod ?? "");
        const before = created.get(pod);
        assert.equal(before, undefined, `${pod} created by ${before} and again by ${p.name}`);
        created.set(pod, p.name);
      }
    }
  }
  return { passLines, podCreates: created.size, namespaceSpans };
}

const iso = (ms: number) => (Number.isFinite(ms) ? new Date(ms).toISOString() : "(running)");
