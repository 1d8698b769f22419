/**
 * Sub-agents: slots 1..replicas forked from the main's VM on its node. Failed ones are rebuilt
 * within their budget (rebuild.ts), then dead-lettered: left for a person until the spec changes.
 */
import { deepCopy, patchAnnotations, type Pod, Pods } from "../kube/mod.ts";
import { CONDITION_TYPE_PROGRESSING } from "../common/apis/v1/conditions.ts";
import { CocoonSets } from "../common/apis/v1/resources.ts";
import { CONDITION_TYPE_READY } from "../common/k8s/condition.ts";
import { isPodReady, readLifecycleState } from "../common/meta/mod.ts";
import { subAgentDeadLetterTotal, subAgentRebuildTotal } from "../metrics/metrics.ts";
import { forEachLimited } from "./_fanout.ts";
import { createPart } from "./create.ts";
import { restoreIntent } from "./restore.ts";
import { partBuildable } from "./validate.ts";
import { buildAgentPod, isPodFailed } from "./pods.ts";
import { deletePod, doing, emit, podRef, readSamePod, setLabels, type SetPass } from "./pass.ts";
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

/** Sub-agent creates in flight at once during a scale-up. */
export const SUB_AGENT_CREATE_CONCURRENCY = 8;

/** Warning reason: a sub-agent used up its rebuilds and is left in place. */
export const REASON_SUB_AGENT_DEAD_LETTER = "SubAgentDeadLetter";
/** Normal reason: a failed sub-agent is deleted to be rebuilt. */
export const REASON_SUB_AGENT_REBUILDING = "SubAgentRebuilding";

/** What ensureSubAgents did. */
export interface SubAgentOutcome {
  /** A pod was created or deleted: the pass looks again at once. */
  changed: boolean;
  /** > 0: when the earliest rebuild backoff ends (ms). */
  requeueAfterMs: number;
  /** Slots whose pod is dead-lettered. */
  deadLettered: number[];
}

/** What happened to one existing slot. */
interface Triage {
  deleted?: boolean;
  deadLettered?: boolean;
  waitMs?: number;
}

/**
 * The Sub-agents step: triages the existing slots, creates the missing ones forked from
 * mainVMName on mainNodeName, deletes those above replicas.
 */
export async function ensureSubAgents(
  pass: SetPass,
  mainVMName: string,
  mainNodeName: string,
): Promise<SubAgentOutcome> {
  const { cs, classified } = pass;
  const replicas = cs.spec.agent.replicas ?? 0;
  const out: SubAgentOutcome = { changed: false, requeueAfterMs: 0, deadLettered: [] };
  const slots = [...classified.sub.keys()].sort((a, b) => a - b);
  for (const slot of slots.filter((s) => s <= replicas)) {
    const t = await triageSubAgent(pass, classified.sub.get(slot)!, slot);
    if (t.deleted) out.changed = true;
    if (t.deadLettered) out.deadLettered.push(slot);
    if (t.waitMs) out.requeueAfterMs = Math.min(t.waitMs, out.requeueAfterMs || Infinity);
  }
  if (await createSubAgents(pass, replicas, mainVMName, mainNodeName)) out.changed = true;
  for (const slot of slots.filter((s) => s > replicas)) {
    const pod = classified.sub.get(slot)!;
    if (!await deletePod(pass, pod, `extra sub-agent slot ${slot}`)) continue;
    pass.log.info("deleted extra sub-agent {pod}", { pod: podRef(pod), slot });
    out.changed = true;
  }
  return out;
}

/**
 * Creates the missing slots (none while the shape is refused), pulled one by one: work grows with
 * the pods that exist, never with replicas.
 */
async function createSubAgents(
  pass: SetPass,
  replicas: number,
  mainVMName: string,
  mainNodeName: string,
): Promise<boolean> {
  let present = 0;
  for (const slot of pass.classified.sub.keys()) if (slot >= 1 && slot <= replicas) present++;
  if (present >= replicas || !await partBuildable(pass)) return false;
  // Resolved before the fan-out, so the creates share one list.
  const restorable = await restoreIntent(pass);
  function* missing(): Generator<number> {
    for (let slot = 1; slot <= replicas; slot++) if (!pass.classified.sub.has(slot)) yield slot;
  }
  let created = false;
  const limit = SUB_AGENT_CREATE_CONCURRENCY;
  await forEachLimited(missing(), limit, pass.signal, async (slot, signal) => {
    const pod = buildAgentPod(pass.cs, slot, mainVMName, mainNodeName);
    const intent = restorable.has(pod.metadata.name ?? "");
    if (!await createPart(pass, pod, `sub-agent slot ${slot}`, intent, signal)) return;
    pass.log.info("created sub-agent {pod}", { pod: podRef(pod), slot });
    created = true;
  });
  return created;
}

/** Decides what happens to an existing sub-agent pod; a pod is never replaced by a refused one. */
async function triageSubAgent(pass: SetPass, pod: Pod, slot: number): Promise<Triage> {
  if (pod.metadata.annotations?.[ANNOTATION_DEAD_LETTER] === "true") {
    return await rebuildDeadLetteredOnDrift(pass, pod, slot);
  }
  if (isPodFailed(pod)) return await rebuildSubAgent(pass, pod, slot);
  if (podSpecMatchesAgent(pod, pass.cs, slot) || !await partBuildable(pass)) return {};
  pass.log.info("sub-agent {pod} slot {slot} drifted from the spec, deleting to recreate", {
    pod: podRef(pod),
    slot,
  });
  await deletePod(pass, pod, `drifted sub-agent slot ${slot}`);
  return { deleted: true };
}

/**
 * A dead-lettered pod stays until a spec edit (the person's fix) earns the slot a fresh budget.
 * One that recovered by itself is not reported but keeps its mark.
 */
async function rebuildDeadLetteredOnDrift(pass: SetPass, pod: Pod, slot: number): Promise<Triage> {
  const recovered = isPodReady(pod) && !isPodFailed(pod);
  if (podSpecMatchesAgent(pod, pass.cs, slot) || !await partBuildable(pass)) {
    return { deadLettered: !recovered };
  }
  const history = new Map(readRebuildHistory(pass.cs));
  if (history.delete(slot)) {
    await doing(`reset rebuild history of slot ${slot}`, writeRebuildHistory(pass, history));
  }
  pass.log.info(
    "dead-lettered sub-agent {pod} slot {slot} drifted, rebuilding with a fresh budget",
    { pod: podRef(pod), slot },
  );
  await deletePod(pass, pod, `dead-lettered sub-agent slot ${slot}`);
  return { deleted: true };
}

/**
 * Deletes a failed sub-agent for a rebuild once its backoff passed (never while its shape is
 * refused), or dead-letters it when the budget is spent. The history is written before the
 * delete, so a failed delete never escapes the budget.
 */
async function rebuildSubAgent(pass: SetPass, pod: Pod, slot: number): Promise<Triage> {
  const { cs, deps } = pass;
  const history = new Map(readRebuildHistory(cs));
  const entry = history.get(slot) ?? { count: 0, lastDeleted: 0 };
  if (entry.count >= MAX_REBUILD_ATTEMPTS) return await deadLetter(pass, pod, slot);
  const remaining = backoffDelayMs(entry.count) - (deps.clock.now() - entry.lastDeleted);
  if (entry.count > 0 && remaining > 0) return { waitMs: remaining };
  if (!await partBuildable(pass)) return {};
  const attempt = entry.count + 1;
  history.set(slot, { count: attempt, lastDeleted: deps.clock.now() });
  await doing("persist rebuild history", writeRebuildHistory(pass, history));
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
  subAgentRebuildTotal.labels(setLabels(cs)).inc();
  const message = `slot ${slot} attempt ${attempt}/${MAX_REBUILD_ATTEMPTS}`;
  emit(pass, "Normal", REASON_SUB_AGENT_REBUILDING, message);
  return { deleted: true };
}

/**
 * Marks a sub-agent whose budget is spent, once per pod: a pass queued before the mark's watch
 * event would not see it, so the stored pod decides.
 */
async function deadLetter(pass: SetPass, cached: Pod, slot: number): Promise<Triage> {
  const live = await readSamePod(pass, cached, "re-read sub-agent before its dead letter");
  if (!live) return {};
  if (live.metadata.annotations?.[ANNOTATION_DEAD_LETTER] === "true") {
    return await rebuildDeadLetteredOnDrift(pass, live, slot);
  }
  await patchAnnotations(pass.deps.client, Pods, live, { [ANNOTATION_DEAD_LETTER]: "true" }, {
    signal: pass.signal,
  });
  subAgentDeadLetterTotal.labels(setLabels(pass.cs)).inc();
  const message = `slot ${slot} exhausted ${MAX_REBUILD_ATTEMPTS} rebuilds; ` +
    `pod ${live.metadata.name} left in dead-letter`;
  emit(pass, "Warning", REASON_SUB_AGENT_DEAD_LETTER, message);
  return { deadLettered: true };
}

/** Writes the history annotation ("" removes it) from a copy, then mirrors it on the pass's set. */
async function writeRebuildHistory(pass: SetPass, history: RebuildHistory): Promise<void> {
  const { cs } = pass;
  const value = encodeRebuildHistory(cs.spec.agent.replicas ?? 0, history);
  if ((cs.metadata.annotations?.[ANNOTATION_REBUILD_HISTORY] ?? "") === value) return;
  await patchAnnotations(pass.deps.client, CocoonSets, deepCopy(cs), {
    [ANNOTATION_REBUILD_HISTORY]: value,
  }, { signal: pass.signal });
  const { [ANNOTATION_REBUILD_HISTORY]: _, ...annotations } = cs.metadata.annotations ?? {};
  cs.metadata.annotations = value
    ? { ...annotations, [ANNOTATION_REBUILD_HISTORY]: value }
    : annotations;
}

/**
 * Records dead-lettered slots on Ready, and on Progressing once nothing else moves (every other
 * pod exists and is Ready, no rebuild waits), so that condition can be waited on.
 */
export function reportDeadLetters(
  pass: SetPass,
  deadLettered: readonly number[],
  pendingRebuild: boolean,
): void {
  if (deadLettered.length === 0) return;
  const message = `sub-agent slots ${deadLettered.join(", ")} exhausted ` +
    `${MAX_REBUILD_ATTEMPTS} rebuilds; edit the agent spec to retry them`;
  const reason = REASON_SUB_AGENT_DEAD_LETTER;
  pass.problems.push({ condition: CONDITION_TYPE_READY, reason, message });
  if (!pendingRebuild && onlyDeadLettersLeft(pass, new Set(deadLettered))) {
    pass.problems.push({ condition: CONDITION_TYPE_PROGRESSING, reason, message });
  }
}

/** Every wanted pod exists and every one but the dead-lettered is Ready. */
function onlyDeadLettersLeft(pass: SetPass, dead: ReadonlySet<number>): boolean {
  const { cs, classified } = pass;
  const replicas = cs.spec.agent.replicas ?? 0;
  const toolboxes = cs.spec.toolboxes ?? [];
  if (!classified.main || !isPodReady(classified.main)) return false;
  if (classified.sub.size !== replicas || classified.toolbox.size !== toolboxes.length) {
    return false;
  }
  for (const [slot, pod] of classified.sub) {
    if (slot < 1 || slot > replicas) return false; // an extra slot is still being removed
    if (!dead.has(slot) && !isPodReady(pod)) return false;
  }
  return toolboxes.every((tb) => {
    const pod = classified.toolbox.get(tb.name);
    return pod !== undefined && isPodReady(pod);
  });
}
