/**
 * "No `:hibernate` tag deleted while a pod still needs it", judged after the fact from three
 * records on one clock (this machine's): the simulator's events (each push with its digest, each
 * VM coming up with the digest it restored from), the registry proxy's request log (every
 * DELETE the operator sent, with its outcome), and the moments the test released a VM's
 * snapshot by deleting its owner.
 *
 * A VM holds its snapshot from the moment a hibernation pushed `<vm>:hibernate` until a VM of
 * that name is up again, or its owner is deleted. That is the span in which the set is
 * Suspending/Suspended/Waking/Migrating for the VM, or a CocoonHibernation is Hibernated/Waking
 * for its pod, measured by what the VM actually did rather than by phases. Then:
 *
 * - a successful DELETE of the held digest while held is a violation (distribution answers a
 *   delete by tag with 400, so the operator deletes by digest; a digest is mapped back to its
 *   push, so deleting a superseded snapshot is told apart from deleting the one still needed);
 * - a VM that comes up while holding a snapshot must have been restored from exactly that
 *   digest: a fresh boot, or a restore of another push, means the VM's state was lost.
 *
 * A violation reads as a timeline of that VM: pushes, VM states, registry requests, releases and
 * the scenario's own notes (kills, phase changes), relative to the first line.
 *
 * @module
 */
import type { NumberedSimEvent } from "../../sim/events.ts";
import type { ProxiedRequest } from "../harness/registry_proxy.ts";

/**
 * Something the scenario wants on the timeline: about the VMs whose names start with vmPrefix,
 * or, without one, about every VM (shown near that VM's own lines only).
 */
export interface Note {
  at: number;
  text: string;
  vmPrefix?: string;
}

/** How far around a VM's own lines its timeline shows notes that concern every VM (ms). */
const GLOBAL_NOTE_MARGIN_MS = 3_000;

/** What the guard judges. */
export interface SnapshotRecords {
  /** Repository prefix under the registry (OCI_REGISTRY's path). */
  prefix: string;
  simEvents: readonly NumberedSimEvent[];
  requests: readonly ProxiedRequest[];
  /** VM name → when its owner was deleted (from then on its snapshot may go). */
  released: ReadonlyMap<string, number>;
  notes?: readonly Note[];
}

/** One broken rule. */
export interface SnapshotViolation {
  vm: string;
  at: number;
  what: string;
}

/** The outcome: violations, and counts for the scenario's figure. */
export interface SnapshotVerdict {
  violations: SnapshotViolation[];
  /** Hibernation pushes seen. */
  holds: number;
  /** Holds ended by a VM restored from its snapshot. */
  restores: number;
  /** Successful `:hibernate` deletes. */
  hibernateDeletes: number;
  /** A readable timeline of one VM. */
  timeline(vm: string): string;
  /** Throws with each violation and its VM's timeline. */
  assertNone(): void;
}

const HIBERNATE = "hibernate";

/** `/v2/<prefix>/<vm>/manifests/<ref>` → vm and ref; undefined for other paths. */
export function manifestTarget(
  prefix: string,
  path: string,
): { vm: string; ref: string } | undefined {
  const m = path.match(/^\/v2\/(.+)\/manifests\/([^/]+)$/);
  if (!m || !m[1].startsWith(`${prefix}/`)) return undefined;
  return { vm: m[1].slice(prefix.length + 1), ref: decodeURIComponent(m[2]) };
}

/** Judges the records; see the module doc. */
export function judgeSnapshots(r: SnapshotRecords): SnapshotVerdict {
  // Every digest the simulator pushed, to name what a digest DELETE removed.
  const pushedAs = new Map<string, { vm: string; tag: string }>();
  for (const e of r.simEvents) {
    if (e.type !== "pushed" || !e.digest || !e.detail) continue;
    const i = e.detail.lastIndexOf(":");
    pushedAs.set(e.digest, { vm: e.detail.slice(0, i), tag: e.detail.slice(i + 1) });
  }

  type Item =
    | { at: number; order: number; kind: "sim"; e: NumberedSimEvent }
    | { at: number; order: number; kind: "req"; q: ProxiedRequest; vm: string; ref: string }
    | { at: number; order: number; kind: "release"; vm: string };
  const items: Item[] = [];
  for (const e of r.simEvents) items.push({ at: e.at, order: e.seq, kind: "sim", e });
  r.requests.forEach((q, i) => {
    const t = manifestTarget(r.prefix, q.path);
    if (t) items.push({ at: q.at, order: i, kind: "req", q, vm: t.vm, ref: t.ref });
  });
  for (const [vm, at] of r.released) items.push({ at, order: 0, kind: "release", vm });
  items.sort((a, b) => a.at - b.at || a.order - b.order);

  const held = new Map<string, { digest: string; since: number }>();
  const released = new Set<string>();
  const violations: SnapshotViolation[] = [];
  let holds = 0;
  let restores = 0;
  let hibernateDeletes = 0;

  for (const it of items) {
    if (it.kind === "release") {
      released.add(it.vm);
      held.delete(it.vm);
      continue;
    }
    if (it.kind === "sim") {
      const vm = it.e.vmName ?? "";
      if (!vm || released.has(vm)) continue;
      if (it.e.type === "pushed" && it.e.detail === `${vm}:${HIBERNATE}`) {
        held.set(vm, { digest: it.e.digest ?? "", since: it.at });
        holds++;
      } else if (it.e.type === "ready") {
        const h = held.get(vm);
        if (!h) continue;
        held.delete(vm);
        if (it.e.digest === h.digest) {
          restores++;
        } else {
          violations.push({
            vm,
            at: it.at,
            what: it.e.digest
              ? `${it.e.namespace}/${it.e.name} came up restored from ${it.e.digest}, not from ` +
                `the snapshot ${h.digest} its VM was holding`
              : `${it.e.namespace}/${it.e.name} booted fresh while its VM held snapshot ` +
                `${h.digest} (its state is lost)`,
          });
        }
      }
      continue;
    }
    const { q, vm, ref } = it;
    if (q.method !== "DELETE" || q.status < 200 || q.status >= 300) continue;
    const removed = ref.startsWith("sha256:") ? pushedAs.get(ref) : { vm, tag: ref };
    if (removed?.tag !== HIBERNATE) continue;
    hibernateDeletes++;
    const h = held.get(vm);
    if (!h || released.has(vm)) continue;
    if (ref.startsWith("sha256:") && ref !== h.digest) continue;
    violations.push({
      vm,
      at: it.at,
      what: `DELETE ${q.path} (${q.status}) removed ${vm}:${HIBERNATE} while its VM needed it ` +
        `(held since ${iso(h.since)}, not restored yet)`,
    });
  }

  const timeline = (vm: string): string => {
    const lines: { at: number; text: string }[] = [];
    for (const e of r.simEvents) {
      if (e.vmName !== vm) continue;
      const extra = [e.detail, e.digest].filter(Boolean).join(" ");
      lines.push({
        at: e.at,
        text: `sim ${e.type} ${e.namespace}/${e.name}${extra ? ` ${extra}` : ""}`,
      });
    }
    for (const q of r.requests) {
      if (manifestTarget(r.prefix, q.path)?.vm !== vm) continue;
      lines.push({ at: q.at, text: `registry ${q.method} ${q.path} → ${q.status}` });
    }
    const rel = r.released.get(vm);
    if (rel !== undefined) lines.push({ at: rel, text: "owner deleted: snapshot released" });
    const from = Math.min(...lines.map((l) => l.at)) - GLOBAL_NOTE_MARGIN_MS;
    const to = Math.max(...lines.map((l) => l.at)) + GLOBAL_NOTE_MARGIN_MS;
    for (const n of r.notes ?? []) {
      const mine = n.vmPrefix !== undefined && vm.startsWith(n.vmPrefix);
      const near = n.vmPrefix === undefined && n.at >= from && n.at <= to;
      if (mine || near) lines.push({ at: n.at, text: n.text });
    }
    lines.sort((a, b) => a.at - b.at);
    const t0 = lines[0]?.at ?? 0;
    return lines.map((l) => `  +${String(l.at - t0).padStart(6)} ms  ${l.text}`).join("\n");
  };

  return {
    violations,
    holds,
    restores,
    hibernateDeletes,
    timeline,
    assertNone() {
      if (violations.length === 0) return;
      const parts = violations.map((v) =>
        `${iso(v.at)} ${v.vm}: ${v.what}\ntimeline of ${v.vm}:\n${timeline(v.vm)}`
      );
      throw new Error(`snapshot rule broken:\n${parts.join("\n\n")}`);
    },
  };
}

function iso(ms: number): string {
  return new Date(ms).toISOString();
}
