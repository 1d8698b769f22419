/**
 * Sub-agents: slots 1..replicas, each forked from the main VM and bound to the main's node.
 * Missing slots are created (a few at a time), extra slots deleted, and failed or drifted pods
 * replaced — a failed one only within its rebuild budget, after which it is dead-lettered and
 * left in place for a person to look at until the spec changes.
 */
import { CONDITION_TYPE_PROGRESSING } from "../common/apis/v1/conditions.ts";
import { CONDITION_TYPE_READY } from "../common/k8s/condition.ts";
import {
  deepCopy,
  isAlreadyExists,
  patchAnnotations,
  type Pod,
  Pods,
  wrapError,
} from "../kube/mod.ts";
import { CocoonSets } from "../common/apis/v1/resources.ts";
import { isPodReady, readLifecycleState } from "../common/meta/mod.ts";
import { subAgentDeadLetterTotal, subAgentRebuildTotal } from "../metrics/metrics.ts";
import { forEachLimited } from "./_fanout.ts";
import { classifyNameClash, reportNameClash } from "./name_clash.ts";
import { subAgentsBuildable } from "./validate.ts";
import { reportQuotaRefusal } from "./quota.ts";
import { buildAgentPod, isPodFailed } from "./pods.ts";
import { deletePod, emit, podRef, readStoredPod, type SetPass } from "./pass.ts";
import { podSpecMatchesAgent } from "./drift.ts";
import {
  ANNOTATION_DEAD_LETTER,
  ANNOTATION_REBUILD_HISTORY,
  backoffDelayMs,
  encodeRebuildHistory,
  MAX_REBUILD_ATTEMPTS,
  readRebuildHistory,
  type RebuildHistory,
} from "./rebuild.ts";
import { markRestoreIfHibernated } from "./restore.ts";
import { refuseCollidingCreate } from "./vm_collision.ts";

/** Sub-agent creates in flight at once during a scale-up. */
export const SUB_AGENT_CREATE_CONCURRENCY = 8;

/** Warning reason: a sub-agent used up its rebuilds and is left in place. */
export const REASON_SUB_AGENT_DEAD_LETTER = "SubAgentDeadLetter";
/** Normal reason: a failed sub-agent is deleted to be rebuilt. */
export const REASON_SUB_AGENT_REBUILDING = "SubAgentRebuilding";

/** What ensureSubAgents did. */
export interface SubAgentOutcome {
  /** A pod was created or deleted: the caller requeues at once to observe it. */
  changed: boolean;
  /** > 0: the earliest rebuild backoff that ends; the caller looks again then (ms). */
  requeueAfterMs: number;
  /** Slots whose pod is dead-lettered (for the status). */
  deadLettered: number[];
}

/**
 * Brings slots 1..replicas in line with the spec: triages existing pods (rebuild, drift,
 * dead-letter), creates missing ones forked from mainVMName on mainNodeName, and deletes slots
 * above replicas.
 */
export async function ensureSubAgents(
  pass: SetPass,
  mainVMName: string,
  mainNodeName: string,
): Promise<SubAgentOutcome> {
  const { cs, classified } = pass;
  const replicas = cs.spec.agent.replicas ?? 0;
  const out: SubAgentOutcome = { changed: false, requeueAfterMs: 0, deadLettered: [] };
  // Existing pods only: the work of a pass grows with the pods that exist, never with replicas.
  const slots = [...classified.sub.keys()].sort((a, b) => a - b);
  for (const slot of slots) {
    if (slot > replicas) continue;
    const t = await triageSubAgent(pass, classified.sub.get(slot)!, slot);
    if (t.deleted) out.changed = true;
    if (t.deadLettered) out.deadLettered.push(slot);
    if (t.waitMs > 0 && (out.requeueAfterMs === 0 || t.waitMs < out.requeueAfterMs)) {
      out.requeueAfterMs = t.waitMs;
    }
  }
  if (await createSubAgents(pass, replicas, mainVMName, mainNodeName)) out.changed = true;
  for (const slot of slots) {
    if (slot <= replicas) continue;
    const pod = classified.sub.get(slot)!;
    if (!await deletePod(pass, pod, `extra sub-agent slot ${slot}`)) continue;
    pass.log.info("deleted extra sub-agent {pod}", { pod: podRef(pod), slot });
    out.changed = true;
  }
  return out;
}

/** Slots 1..replicas without a pod, lazily: a scale-up never holds a list of every slot. */
function* missingSlots(pass: SetPass, replicas: number): Generator<number> {
  for (let slot = 1; slot <= replicas; slot++) {
    if (!pass.classified.sub.has(slot)) yield slot;
  }
}

/** Whether slots 1..replicas include one without a pod. */
function anySlotMissing(pass: SetPass, replicas: number): boolean {
  let present = 0;
  for (const slot of pass.classified.sub.keys()) if (slot >= 1 && slot <= replicas) present++;
  return present < replicas;
}

/**
 * Creates the missing slots, at most SUB_AGENT_CREATE_CONCURRENCY at a time; nothing when the
 * sub-agent shape is invalid (the problem is on the pass).
 */
async function createSubAgents(
  pass: SetPass,
  replicas: number,
  mainVMName: string,
  mainNodeName: string,
): Promise<boolean> {
  if (!anySlotMissing(pass, replicas)) return false;
  if (!await subAgentsBuildable(pass)) return false;
  // Resolved before the fan-out so the parallel creates share one CR list.
  const restorable = await pass.intent();
  let created = false;
  const missing = missingSlots(pass, replicas);
  await forEachLimited(missing, SUB_AGENT_CREATE_CONCURRENCY, pass.signal, async (slot, signal) => {
    const pod = buildAgentPod(pass.cs, slot, mainVMName, mainNodeName);
    try {
      await markRestoreIfHibernated(
        pass.deps,
        pod,
        restorable.has(pod.metadata.name ?? ""),
        signal,
      );
    } catch (err) {
      throw wrapError(`mark restore on sub-agent slot ${slot}`, err);
    }
    if (await refuseCollidingCreate(pass, pod, `sub-agent slot ${slot}`)) return;
    try {
      await pass.deps.client.create(Pods, pod, { signal });
    } catch (err) {
      if (reportQuotaRefusal(pass, `sub-agent slot ${slot}`, err)) return;
      if (!isAlreadyExists(err)) throw wrapError(`create sub-agent slot ${slot}`, err);
      // Usually the old pod of this slot is still terminating and its delete event brings us
      // back; a pod this set does not control is a name clash.
      const clash = await classifyNameClash(pass, pod.metadata.name ?? "");
      if (clash.kind === "foreign") reportNameClash(pass, `sub-agent slot ${slot}`, clash.pod);
      return;
    }
    pass.log.info("created sub-agent {pod}", { pod: podRef(pod), slot });
    created = true;
  });
  return created;
}

interface Triage {
  deleted: boolean;
  deadLettered: boolean;
  waitMs: number;
}

const KEEP: Triage = { deleted: false, deadLettered: false, waitMs: 0 };

/** Decides what happens to an existing sub-agent pod. */
async function triageSubAgent(pass: SetPass, pod: Pod, slot: number): Promise<Triage> {
  if (pod.metadata.annotations?.[ANNOTATION_DEAD_LETTER] === "true") {
    return await rebuildDeadLetteredOnDrift(pass, pod, slot);
  }
  if (isPodFailed(pod)) return await rebuildSubAgent(pass, pod, slot);
  if (!podSpecMatchesAgent(pod, pass.cs, slot)) {
    // Never replace a pod with one the server would refuse.
    if (!await subAgentsBuildable(pass)) return KEEP;
    pass.log.info("sub-agent {pod} slot {slot} drifted from the spec, deleting to recreate", {
      pod: podRef(pod),
      slot,
    });
    await deletePod(pass, pod, `drifted sub-agent slot ${slot}`);
    return { ...KEEP, deleted: true };
  }
  return KEEP;
}

/**
 * A dead-lettered pod stays until the spec changes: a spec edit is the person's fix, so it
 * earns the slot a fresh rebuild budget.
 */
async function rebuildDeadLetteredOnDrift(pass: SetPass, pod: Pod, slot: number): Promise<Triage> {
  if (podSpecMatchesAgent(pod, pass.cs, slot)) {
    // A dead-lettered pod that recovered by itself (Ready again) is not reported; it keeps its
    // mark, so a new failure is dead-lettered again without a rebuild.
    return { ...KEEP, deadLettered: !recovered(pod) };
  }
  if (!await subAgentsBuildable(pass)) return { ...KEEP, deadLettered: !recovered(pod) };
  const history = readRebuildHistory(pass.cs);
  if (history.has(slot)) {
    const next = new Map(history);
    next.delete(slot);
    try {
      await writeRebuildHistory(pass, next);
    } catch (err) {
      throw wrapError(`reset rebuild history of slot ${slot}`, err);
    }
  }
  pass.log.info(
    "dead-lettered sub-agent {pod} slot {slot} drifted, rebuilding with a fresh budget",
    {
      pod: podRef(pod),
      slot,
    },
  );
  await deletePod(pass, pod, `dead-lettered sub-agent slot ${slot}`);
  return { ...KEEP, deleted: true };
}

/** A pod that is Ready and no longer reports a failure. */
function recovered(pod: Pod): boolean {
  return isPodReady(pod) && !isPodFailed(pod);
}

/**
 * Deletes a failed sub-agent for a rebuild once its backoff has passed, or dead-letters it when
 * the budget is spent. The history is written before the delete, so a delete that fails can never
 * be retried around the budget.
 */
async function rebuildSubAgent(pass: SetPass, pod: Pod, slot: number): Promise<Triage> {
  const { cs } = pass;
  const ns = cs.metadata.namespace ?? "";
  const name = cs.metadata.name ?? "";
  const history = readRebuildHistory(cs);
  const entry = history.get(slot) ?? { count: 0, lastDeleted: 0 };
  if (entry.count >= MAX_REBUILD_ATTEMPTS) return await deadLetter(pass, pod, slot);
  const wait = backoffDelayMs(entry.count);
  if (wait > 0) {
    const remaining = wait - (pass.deps.clock.now() - entry.lastDeleted);
    if (remaining > 0) return { ...KEEP, waitMs: remaining };
  }
  // A rebuild never deletes a pod it cannot recreate; the budget is kept for when it can.
  if (!await subAgentsBuildable(pass)) return KEEP;
  const attempt = entry.count + 1;
  const next = new Map(history);
  next.set(slot, { count: attempt, lastDeleted: pass.deps.clock.now() });
  try {
    await writeRebuildHistory(pass, next);
  } catch (err) {
    throw wrapError(`persist rebuild history`, err);
  }
  pass.log.info(
    "sub-agent {pod} slot {slot} failed (phase {phase}, lifecycle {lifecycle}), rebuild {attempt}/{max}",
    {
      pod: podRef(pod),
      slot,
      phase: pod.status?.phase ?? "",
      lifecycle: readLifecycleState(pod),
      attempt,
      max: MAX_REBUILD_ATTEMPTS,
    },
  );
  await deletePod(pass, pod, `failed sub-agent slot ${slot}`);
  subAgentRebuildTotal.labels({ namespace: ns, cocoonset: name }).inc();
  emit(
    pass,
    "Normal",
    REASON_SUB_AGENT_REBUILDING,
    `slot ${slot} attempt ${attempt}/${MAX_REBUILD_ATTEMPTS}`,
  );
  return { ...KEEP, deleted: true };
}

/**
 * Marks a sub-agent whose budget is spent, once: the Event and the metric count pods, not passes.
 * The cached pod may predate this process's own mark (a pass queued before the mark's watch event
 * arrived lists the pod without it), so the live pod decides, read past the cache: already marked,
 * it is triaged as the next pass with a current cache would triage it; gone or replaced by a new
 * pod, the pass leaves the slot to the pass that event brings. The read is paid once per
 * dead-lettered pod, as a marked pod never reaches this path through a current cache.
 */
async function deadLetter(pass: SetPass, cached: Pod, slot: number): Promise<Triage> {
  const { cs } = pass;
  const live = await readStoredPod(
    pass,
    cached.metadata.namespace ?? "",
    cached.metadata.name ?? "",
    "re-read sub-agent before its dead letter",
  );
  if (!live || live.metadata.uid !== cached.metadata.uid) return KEEP;
  if (live.metadata.annotations?.[ANNOTATION_DEAD_LETTER] === "true") {
    return await rebuildDeadLetteredOnDrift(pass, live, slot);
  }
  await patchAnnotations(pass.deps.client, Pods, live, { [ANNOTATION_DEAD_LETTER]: "true" }, {
    signal: pass.signal,
  });
  subAgentDeadLetterTotal.labels({
    namespace: cs.metadata.namespace ?? "",
    cocoonset: cs.metadata.name ?? "",
  }).inc();
  emit(
    pass,
    "Warning",
    REASON_SUB_AGENT_DEAD_LETTER,
    `slot ${slot} exhausted ${MAX_REBUILD_ATTEMPTS} rebuilds; pod ${live.metadata.name} left in dead-letter`,
  );
  return { ...KEEP, deadLettered: true };
}

/**
 * Writes the history annotation (slots above replicas dropped; an empty history removes the
 * annotation) and mirrors it on the pass's CocoonSet so later slots of this pass see it. The
 * patch goes out from a copy: the rest of the pass acts on the set it read.
 */
async function writeRebuildHistory(pass: SetPass, history: RebuildHistory): Promise<void> {
  const { cs } = pass;
  const value = encodeRebuildHistory(cs.spec.agent.replicas ?? 0, history);
  if ((cs.metadata.annotations?.[ANNOTATION_REBUILD_HISTORY] ?? "") === value) return;
  await patchAnnotations(pass.deps.client, CocoonSets, deepCopy(cs), {
    [ANNOTATION_REBUILD_HISTORY]: value,
  }, { signal: pass.signal });
  const annotations = { ...cs.metadata.annotations };
  if (value) annotations[ANNOTATION_REBUILD_HISTORY] = value;
  else delete annotations[ANNOTATION_REBUILD_HISTORY];
  cs.metadata.annotations = annotations;
}

/**
 * Records dead-lettered slots on the pass: always on Ready, and on Progressing only once nothing
 * else moves (every other slot and toolbox exists and is Ready, no rebuild waits), so the
 * condition can be waited on. pendingRebuild: some slot waits for its rebuild backoff.
 */
export function reportDeadLetters(
  pass: SetPass,
  deadLettered: readonly number[],
  pendingRebuild: boolean,
): void {
  if (deadLettered.length === 0) return;
  const message = `sub-agent slots ${deadLettered.join(", ")} exhausted ` +
    `${MAX_REBUILD_ATTEMPTS} rebuilds; edit the agent spec to retry them`;
  pass.problems.push({
    condition: CONDITION_TYPE_READY,
    reason: REASON_SUB_AGENT_DEAD_LETTER,
    message,
  });
  if (!pendingRebuild && onlyDeadLettersLeft(pass, new Set(deadLettered))) {
    pass.problems.push({
      condition: CONDITION_TYPE_PROGRESSING,
      reason: REASON_SUB_AGENT_DEAD_LETTER,
      message,
    });
  }
}

/** Every wanted pod exists and every one but the dead-lettered is Ready. */
function onlyDeadLettersLeft(pass: SetPass, dead: ReadonlySet<number>): boolean {
  const { cs, classified } = pass;
  if (!classified.main || !isPodReady(classified.main)) return false;
  const replicas = cs.spec.agent.replicas ?? 0;
  let present = 0;
  for (const [slot, pod] of classified.sub) {
    if (slot < 1 || slot > replicas) return false; // an extra slot is still being removed
    present++;
    if (!dead.has(slot) && !isPodReady(pod)) return false;
  }
  if (present !== replicas) return false;
  for (const tb of cs.spec.toolboxes ?? []) {
    const pod = classified.toolbox.get(tb.name);
    if (!pod || !isPodReady(pod)) return false;
  }
  return classified.toolbox.size === (cs.spec.toolboxes?.length ?? 0);
}
