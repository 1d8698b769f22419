/**
 * The Status step: rebuilt from the classified pods on every pass, written only when it differs
 * from what is stored. Conditions follow the phase: Ready is False while Failed or blocked by a
 * problem; Progressing is True while the set moves toward its spec and False once it is settled,
 * failed, or stuck on something only a person can fix.
 */
import { deepCopy, type Pod, updateStatusLocked } from "../kube/mod.ts";
import type {
  AgentStatus,
  CocoonSet,
  CocoonSetStatus,
  ToolboxStatus,
} from "../common/apis/v1/cocoonset_types.ts";
import {
  CONDITION_TYPE_PROGRESSING,
  REASON_AGENTS_NOT_READY,
  REASON_ALL_AGENTS_READY,
  REASON_RECONCILING,
  REASON_STABLE,
} from "../common/apis/v1/conditions.ts";
import type { CocoonSetPhase, ConnType } from "../common/apis/v1/enums.ts";
import {
  type Condition,
  CONDITION_TYPE_READY,
  newReadyCondition,
  setStatusCondition,
} from "../common/k8s/condition.ts";
import { sameJson } from "../common/k8s/same_json.ts";
import { CocoonSets } from "../common/apis/v1/resources.ts";
import {
  connectionType,
  isPodReady,
  parseVMRuntime,
  parseVMSpec,
  ROLE_MAIN,
  ROLE_SUB_AGENT,
} from "../common/meta/mod.ts";
import { nowOf, type SetPass, type StatusProblem } from "./pass.ts";
import type { ClassifiedPods } from "./pods.ts";

/** Progressing=False reason when the set is in phase Failed. */
export const REASON_FAILED = "Failed";

const INT32_MAX = 2_147_483_647;

/** Phases in which the set is still moving toward its spec. */
const movingPhases: ReadonlySet<string> = new Set([
  "Pending",
  "Scaling",
  "Suspending",
  "Waking",
  "Migrating",
]);

/**
 * The status this pass observes: phase "" derives it (no main: Pending, fewer ready than desired:
 * Scaling, else Running); each problem turns its condition False.
 */
export function buildStatus(
  cs: CocoonSet,
  classified: ClassifiedPods,
  phase: CocoonSetPhase | "" = "",
  problems: readonly StatusProblem[] = [],
): CocoonSetStatus {
  const generation = cs.metadata.generation ?? 0;
  // An int32: replicas at the CRD's maximum must not overflow it.
  const desired = Math.min(1 + (cs.spec.agent.replicas ?? 0), INT32_MAX);
  let ready = 0;
  const agents: AgentStatus[] = [];
  let mainVMName = "";
  if (classified.main) {
    if (isPodReady(classified.main)) ready++;
    mainVMName = parseVMSpec(classified.main).vmName;
    agents.push(agentStatusFromPod(classified.main, 0, ROLE_MAIN, ""));
  }
  for (const slot of [...classified.sub.keys()].sort((a, b) => a - b)) {
    const sub = classified.sub.get(slot)!;
    if (isPodReady(sub)) ready++;
    agents.push(agentStatusFromPod(sub, slot, ROLE_SUB_AGENT, mainVMName));
  }
  const tbDesired = cs.spec.toolboxes?.length ?? 0;
  let tbReady = 0;
  const toolboxes: ToolboxStatus[] = [];
  for (const name of [...classified.toolbox.keys()].sort()) {
    const pod = classified.toolbox.get(name)!;
    if (isPodReady(pod)) tbReady++;
    toolboxes.push(toolboxStatusFromPod(pod, name));
  }
  const effective = phase || derivePhase(classified.main, ready, desired, tbReady, tbDesired);
  const status: CocoonSetStatus = {
    observedGeneration: generation,
    phase: effective,
    readyAgents: ready,
    desiredAgents: desired,
    readyToolboxes: tbReady,
    desiredToolboxes: tbDesired,
  };
  if (agents.length > 0) status.agents = agents;
  if (toolboxes.length > 0) status.toolboxes = toolboxes;
  status.conditions = buildConditions(
    generation,
    { ready, desired, tbReady, tbDesired },
    effective,
    problems,
  );
  return status;
}

/** The phase when no code path forces one. */
export function derivePhase(
  main: Pod | undefined,
  ready: number,
  desired: number,
  tbReady: number,
  tbDesired: number,
): CocoonSetPhase {
  if (!main) return "Pending";
  if (ready < desired || tbReady < tbDesired) return "Scaling";
  return "Running";
}

/** One agent's entry: names from the pod's annotations, phase from the pod. */
export function agentStatusFromPod(
  pod: Pod,
  slot: number,
  role: string,
  forkedFrom: string,
): AgentStatus {
  const spec = parseVMSpec(pod);
  const runtime = parseVMRuntime(pod);
  return omitEmpty({
    slot,
    role,
    podName: pod.metadata.name ?? "",
    vmName: spec.vmName,
    vmID: runtime.vmID,
    ip: runtime.ip,
    phase: pod.status?.phase ?? "",
    forkedFrom,
  }, ["slot", "role"]);
}

/** One toolbox's entry; the connection type is inferred when the spec names none. */
export function toolboxStatusFromPod(pod: Pod, name: string): ToolboxStatus {
  const spec = parseVMSpec(pod);
  const runtime = parseVMRuntime(pod);
  return omitEmpty({
    name,
    podName: pod.metadata.name ?? "",
    vmName: spec.vmName,
    vmID: runtime.vmID,
    ip: runtime.ip,
    phase: pod.status?.phase ?? "",
    connType: connectionType(spec.os, runtime.vncPort > 0, spec.connType) as ConnType,
    vncPort: runtime.vncPort,
  }, ["name"]);
}

interface Counts {
  ready: number;
  desired: number;
  tbReady: number;
  tbDesired: number;
}

/** Ready and Progressing, without transition times: merged, a stored time stays until a flip. */
export function buildConditions(
  generation: number,
  counts: Counts,
  phase: CocoonSetPhase,
  problems: readonly StatusProblem[] = [],
): Condition[] {
  const { ready, desired, tbReady, tbDesired } = counts;
  const allReady = ready === desired && desired > 0 && tbReady === tbDesired;
  const countsMessage = `${ready}/${desired} agents ready, ${tbReady}/${tbDesired} toolboxes ready`;
  // A Failed set is never Ready, whatever the counts say.
  const readyProblem = problems.find((p) => p.condition === CONDITION_TYPE_READY) ??
    (phase === "Failed" ? { reason: REASON_FAILED, message: countsMessage } : undefined);
  const readyCond = readyProblem
    ? newReadyCondition(generation, "False", readyProblem.reason, readyProblem.message)
    : newReadyCondition(
      generation,
      allReady ? "True" : "False",
      allReady ? REASON_ALL_AGENTS_READY : REASON_AGENTS_NOT_READY,
      countsMessage,
    );

  const progressingProblem = problems.find((p) => p.condition === CONDITION_TYPE_PROGRESSING);
  let progressing: Pick<Condition, "status" | "reason" | "message">;
  if (phase === "Failed") {
    progressing = { status: "False", reason: REASON_FAILED, message: phase };
  } else if (progressingProblem) {
    progressing = {
      status: "False",
      reason: progressingProblem.reason,
      message: progressingProblem.message,
    };
  } else if (movingPhases.has(phase)) {
    progressing = { status: "True", reason: REASON_RECONCILING, message: phase };
  } else {
    progressing = { status: "False", reason: REASON_STABLE, message: phase };
  }
  return [readyCond, {
    type: CONDITION_TYPE_PROGRESSING,
    ...progressing,
    observedGeneration: generation,
    lastTransitionTime: "",
  }];
}

/**
 * Writes the status this pass observed, with phase (or derived when ""), adding the problems the
 * pass collected, under the optimistic lock (kube updateStatusLocked): a copy of the set the
 * server has moved past is refused with Conflict and the pass runs again. Returns whether a write
 * was made.
 */
export function writeSetStatus(pass: SetPass, phase: CocoonSetPhase | "" = ""): Promise<boolean> {
  const { cs } = pass;
  const next = buildStatus(cs, pass.classified, phase, pass.problems);
  return updateStatusLocked({
    client: pass.deps.client,
    rt: CocoonSets,
    obj: cs,
    status: mergeConditions(cs.status, next, nowOf(pass)),
    equal: statusEqual,
    written: pass.deps.writtenStatuses,
    signal: pass.signal,
  });
}

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
function omitEmpty<T extends object>(obj: T, keep: readonly (keyof T)[]): T {
  const out = {} as T;
  for (const [k, v] of Object.entries(obj) as [keyof T, unknown][]) {
    if (keep.includes(k) || (v !== "" && v !== 0 && v !== undefined && v !== null)) {
      out[k] = v as T[keyof T];
    }
  }
  return out;
}
