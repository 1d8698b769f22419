/**
 * Writing a CocoonSet's status, one job per function: merge the pass's conditions into the stored
 * ones (mergeConditions), tell whether anything changed (statusEqual), ask the server whether an
 * unchanged copy is current (confirmCopyCurrent), remember what this process wrote
 * (copyBehindOwnWrite, rememberWritten), and tell whether a write refused with Conflict may be
 * redone on a re-read copy (decisionInputs, sameDecisionInputs). writeStatus composes them.
 */
import { deepCopy, isConflict, patchStatus } from "../kube/mod.ts";
import type { Reader, Writer } from "../kube/mod.ts";
import { sameJson } from "../common/k8s/same_json.ts";
import type { CocoonSet, CocoonSetStatus } from "../common/apis/v1/cocoonset_types.ts";
import { CocoonSets } from "../common/apis/v1/resources.ts";
import { setStatusCondition } from "../common/k8s/condition.ts";

/** Set UID → the status this process last wrote (CocoonSetDeps.writtenStatuses). */
export type WrittenStatuses = Map<string, CocoonSetStatus>;

/**
 * next with its conditions merged into the stored ones: other condition types are kept, and a
 * condition whose status did not flip keeps its stored lastTransitionTime. stored is not changed.
 */
export function mergeConditions(
  stored: CocoonSetStatus | undefined,
  next: CocoonSetStatus,
  now: () => Date,
): CocoonSetStatus {
  const merged = deepCopy(stored?.conditions ?? []);
  for (const c of next.conditions ?? []) setStatusCondition(merged, c, now);
  const status: CocoonSetStatus = { ...next };
  if (merged.length > 0) status.conditions = merged;
  else delete status.conditions;
  return status;
}

/**
 * Whether a status equal to the cached copy may still be stale: this process last wrote
 * something else for the set, which the copy does not show yet.
 */
export function copyBehindOwnWrite(
  written: WrittenStatuses | undefined,
  uid: string,
  status: CocoonSetStatus,
): boolean {
  const mine = written?.get(uid);
  return mine !== undefined && !statusEqual(mine, status);
}

/** Remembers the status just written for the set (a copy: cs changes later). */
export function rememberWritten(
  written: WrittenStatuses | undefined,
  uid: string,
  status: CocoonSetStatus | undefined,
): void {
  written?.set(uid, deepCopy(status ?? {}));
}

/**
 * An empty status patch carrying cs's resourceVersion: a Conflict says cs is older than the
 * stored set (the pass is retried from fresh data); success writes nothing.
 */
export async function confirmCopyCurrent(
  client: Writer,
  cs: CocoonSet,
  signal?: AbortSignal,
): Promise<void> {
  await client.patch(CocoonSets, cs.metadata.namespace ?? "", cs.metadata.name ?? "", "merge", {
    metadata: { resourceVersion: cs.metadata.resourceVersion },
  }, { subresource: "status", signal });
}

/**
 * How many times a status write refused with Conflict is redone on a re-read copy before the
 * Conflict goes to the caller (and the pass is retried from the start).
 */
export const MAX_STATUS_WRITE_RETRIES = 2;

/**
 * Merges next's conditions into the stored ones (keeping other condition types and the
 * timestamps of unflipped ones), compares with what is stored and, when different, patches the
 * status subresource. cs is refreshed in place from the server's answer. Returns whether a write
 * was made.
 *
 * The patch carries the resourceVersion cs was read at: a merge patch leaves out every field
 * that equals cs, so one computed from a cached copy older than the stored status would keep the
 * stored phase next to this pass's conditions. Such a write fails with Conflict instead.
 *
 * With fresh (an uncached reader), a Conflict is answered by reading the set again: when the
 * stored copy is newer (another resourceVersion) but holds everything the pass decided from
 * (sameDecisionInputs), next is the pass's own conclusion on it too, so it is merged into that
 * copy and written again, at most MAX_STATUS_WRITE_RETRIES times; cs then becomes that copy.
 * Otherwise — no reader, a spec or phase that moved, or a Conflict the re-read cannot explain —
 * the Conflict is thrown and the pass is retried from fresh data.
 *
 * A status equal to cs sends no write, so the lock alone cannot see a cs older than this
 * process's own last write (written, by set UID): when cs shows something else than that write,
 * an empty patch carrying cs's resourceVersion asks the server whether cs is current, and a
 * Conflict retries the pass from fresh data.
 */
export async function writeStatus(
  client: Writer,
  cs: CocoonSet,
  next: CocoonSetStatus,
  now: () => Date,
  signal?: AbortSignal,
  written?: WrittenStatuses,
  fresh?: Reader,
): Promise<boolean> {
  let current = false;
  for (let attempt = 0;; attempt++) {
    // Taken before the write: a refused patch may leave cs half-changed.
    const seen = fresh ? decisionInputs(cs) : undefined;
    try {
      return await writeOnce(client, cs, next, now, current, signal, written);
    } catch (err) {
      if (!seen || !isConflict(err) || attempt >= MAX_STATUS_WRITE_RETRIES) throw err;
      const stored = await fresh!.get(
        CocoonSets,
        cs.metadata.namespace ?? "",
        cs.metadata.name ?? "",
        { signal },
      );
      if (!sameDecisionInputs(seen, stored)) throw err;
      for (const k of Object.keys(cs)) delete (cs as unknown as Record<string, unknown>)[k];
      Object.assign(cs, stored);
      current = true;
    }
  }
}

/**
 * One write of writeStatus. current: cs was just read uncached, so an unchanged status needs no
 * confirmation that cs is current.
 */
async function writeOnce(
  client: Writer,
  cs: CocoonSet,
  next: CocoonSetStatus,
  now: () => Date,
  current: boolean,
  signal?: AbortSignal,
  written?: WrittenStatuses,
): Promise<boolean> {
  const status = mergeConditions(cs.status, next, now);
  const uid = cs.metadata.uid ?? "";
  if (statusEqual(cs.status, status)) {
    if (!copyBehindOwnWrite(written, uid, status)) return false;
    if (!current) await confirmCopyCurrent(client, cs, signal);
    written?.delete(uid);
    return false;
  }
  await patchStatus(client, CocoonSets, cs, (c) => {
    c.status = status;
  }, { optimisticLock: true, signal });
  rememberWritten(written, uid, cs.status);
  return true;
}

/** What a pass decided from in a copy of the set, and the resourceVersion of that copy. */
export interface DecisionInputs {
  resourceVersion?: string;
  /** uid, generation, deletion, spec and the status fields steps read, as JSON. */
  key: string;
}

/** The decision inputs of cs (see sameDecisionInputs). */
export function decisionInputs(cs: CocoonSet): DecisionInputs {
  const m = cs.metadata;
  const s = cs.status;
  return {
    resourceVersion: m.resourceVersion,
    key: JSON.stringify({
      uid: m.uid ?? "",
      generation: m.generation ?? 0,
      deleting: Boolean(m.deletionTimestamp),
      spec: cs.spec,
      phase: s?.phase ?? "",
      agents: (s?.agents ?? []).map((a) => [a.slot, a.vmName ?? ""]),
      toolboxes: (s?.toolboxes ?? []).map((t) => [t.name, t.vmName ?? ""]),
    }),
  };
}

/**
 * Whether stored, read after a Conflict, is a newer copy of the set that a pass which decided
 * from seen would have reached the same conclusions on: another resourceVersion (a Conflict with
 * the same one is not explained by the re-read, and redoing the write would only repeat it), the
 * same UID, generation and spec, not deleted since, and the same status fields the steps decide
 * from — the phase (migration, waking, a failed main) and the VM and toolbox names (tag gate, VM
 * collisions). The rest of the status (counts, conditions, per-pod details) is the pass's own
 * output, which its status replaces.
 */
export function sameDecisionInputs(seen: DecisionInputs, stored: CocoonSet): boolean {
  if (stored.metadata.resourceVersion === seen.resourceVersion) return false;
  const now = decisionInputs(stored);
  // Spec fields in another key order are the same spec.
  return now.key === seen.key || sameJson(JSON.parse(now.key), JSON.parse(seen.key));
}

/**
 * Semantic equality of two statuses: empty strings, zero optional numbers and empty lists equal
 * absent ones, as the Go types' omitempty makes them; the four counters always count.
 */
export function statusEqual(
  a: CocoonSetStatus | undefined,
  b: CocoonSetStatus | undefined,
): boolean {
  return sameJson(normalizeStatus(a), normalizeStatus(b));
}

function normalizeStatus(s: CocoonSetStatus | undefined): Record<string, unknown> {
  const v = s ?? {};
  const out: Record<string, unknown> = {
    readyAgents: v.readyAgents ?? 0,
    desiredAgents: v.desiredAgents ?? 0,
    readyToolboxes: v.readyToolboxes ?? 0,
    desiredToolboxes: v.desiredToolboxes ?? 0,
  };
  if (v.observedGeneration) out.observedGeneration = v.observedGeneration;
  if (v.phase) out.phase = v.phase;
  if (v.agents?.length) out.agents = v.agents.map((a) => omitEmpty(a, ["slot", "role"]));
  if (v.toolboxes?.length) out.toolboxes = v.toolboxes.map((t) => omitEmpty(t, ["name"]));
  if (v.conditions?.length) out.conditions = v.conditions.map((c) => omitEmpty(c, ["type"]));
  return out;
}

/** Drops "" / 0 / undefined fields except the ones the wire always carries. */
export function omitEmpty<T extends object>(obj: T, keep: readonly (keyof T)[]): T {
  const out = {} as T;
  for (const [k, v] of Object.entries(obj) as [keyof T, unknown][]) {
    if (keep.includes(k) || (v !== "" && v !== 0 && v !== undefined && v !== null)) {
      out[k] = v as T[keyof T];
    }
  }
  return out;
}
