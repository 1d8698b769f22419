/**
 * The Status step: rebuilt from the pods on every pass, written only when it differs from what is
 * stored. Ready is False while Failed or blocked by a problem; Progressing is True while the set
 * moves toward its spec, False once settled, failed, or stuck on what only a person can fix.
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
import type { SetPass, StatusProblem } from "./pass.ts";
import type { ClassifiedPods } from "./pods.ts";

/** Progressing=False reason when the set is in phase Failed. */
export const REASON_FAILED = "Failed";

const INT32_MAX = 2_147_483_647;
const MOVING_PHASES = new Set(["Pending", "Scaling", "Suspending", "Waking", "Migrating"]);

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
  const { main } = classified;
  const mainVMName = main ? parseVMSpec(main).vmName : "";
  const subs = [...classified.sub].sort(([a], [b]) => a - b);
  const tbs = [...classified.toolbox].sort(([a], [b]) => a < b ? -1 : 1);
  const agents = [
    ...(main ? [agentStatusFromPod(main, 0, ROLE_MAIN, "")] : []),
    ...subs.map(([slot, pod]) => agentStatusFromPod(pod, slot, ROLE_SUB_AGENT, mainVMName)),
  ];
  const toolboxes = tbs.map(([name, pod]) => toolboxStatusFromPod(pod, name));
  const counts = {
    ready: [main, ...classified.sub.values()].filter((p) => p && isPodReady(p)).length,
    // An int32: replicas at the CRD's maximum must not overflow it.
    desired: Math.min(1 + (cs.spec.agent.replicas ?? 0), INT32_MAX),
    tbReady: tbs.filter(([, pod]) => isPodReady(pod)).length,
    tbDesired: cs.spec.toolboxes?.length ?? 0,
  };
  const scaling = counts.ready < counts.desired || counts.tbReady < counts.tbDesired;
  const effective = phase || (!main ? "Pending" : scaling ? "Scaling" : "Running");
  return {
    observedGeneration: generation,
    phase: effective,
    readyAgents: counts.ready,
    desiredAgents: counts.desired,
    readyToolboxes: counts.tbReady,
    desiredToolboxes: counts.tbDesired,
    ...(agents.length > 0 ? { agents } : {}),
    ...(toolboxes.length > 0 ? { toolboxes } : {}),
    conditions: buildConditions(generation, counts, effective, problems),
  };
}

/** One agent's entry: names from the pod's annotations, phase from the pod. */
export function agentStatusFromPod(
  pod: Pod,
  slot: number,
  role: string,
  forkedFrom: string,
): AgentStatus {
  const { vmID, ip } = parseVMRuntime(pod);
  const { vmName } = parseVMSpec(pod);
  const podName = pod.metadata.name ?? "";
  const phase = pod.status?.phase ?? "";
  return omitEmpty({ slot, role, podName, vmName, vmID, ip, phase, forkedFrom });
}

/** One toolbox's entry; the connection type is inferred when the spec names none. */
export function toolboxStatusFromPod(pod: Pod, name: string): ToolboxStatus {
  const spec = parseVMSpec(pod);
  const { vmID, ip, vncPort } = parseVMRuntime(pod);
  return omitEmpty({
    name,
    podName: pod.metadata.name ?? "",
    vmName: spec.vmName,
    vmID,
    ip,
    phase: pod.status?.phase ?? "",
    connType: connectionType(spec.os, vncPort > 0, spec.connType) as ConnType,
    vncPort,
  });
}

/** Ready and Progressing, without transition times: merged, a stored time stays until a flip. */
export function buildConditions(
  generation: number,
  counts: { ready: number; desired: number; tbReady: number; tbDesired: number },
  phase: CocoonSetPhase,
  problems: readonly StatusProblem[] = [],
): Condition[] {
  const { ready, desired, tbReady, tbDesired } = counts;
  const allReady = ready === desired && desired > 0 && tbReady === tbDesired;
  const countsMessage = `${ready}/${desired} agents ready, ${tbReady}/${tbDesired} toolboxes ready`;
  const failed = phase === "Failed";
  // A Failed set is never Ready, whatever the counts say.
  const readyProblem = problems.find((p) => p.condition === CONDITION_TYPE_READY) ??
    (failed ? { reason: REASON_FAILED, message: countsMessage } : undefined);
  const readyCond = readyProblem
    ? newReadyCondition(generation, "False", readyProblem.reason, readyProblem.message)
    : newReadyCondition(
      generation,
      allReady ? "True" : "False",
      allReady ? REASON_ALL_AGENTS_READY : REASON_AGENTS_NOT_READY,
      countsMessage,
    );
  const stuck = failed
    ? { reason: REASON_FAILED, message: phase }
    : problems.find((p) => p.condition === CONDITION_TYPE_PROGRESSING);
  const moving = !stuck && MOVING_PHASES.has(phase);
  return [readyCond, {
    type: CONDITION_TYPE_PROGRESSING,
    status: moving ? "True" : "False",
    reason: stuck?.reason ?? (moving ? REASON_RECONCILING : REASON_STABLE),
    message: stuck?.message ?? phase,
    observedGeneration: generation,
    lastTransitionTime: "",
  }];
}

/**
 * Writes the status this pass observed, with phase ("" derives it) and its problems, under the
 * optimistic lock: a Conflict runs the pass again. Whether a write was made.
 */
export function writeSetStatus(pass: SetPass, phase: CocoonSetPhase | "" = ""): Promise<boolean> {
  const { cs } = pass;
  const next = buildStatus(cs, pass.classified, phase, pass.problems);
  return updateStatusLocked({
    client: pass.deps.client,
    rt: CocoonSets,
    obj: cs,
    status: mergeConditions(cs.status, next, () => new Date(pass.deps.clock.now())),
    equal: statusEqual,
    written: pass.deps.writtenStatuses,
    signal: pass.signal,
  });
}

/**
 * next with its conditions merged into the stored ones (stored is not changed): other types are
 * kept, and an unflipped condition keeps its lastTransitionTime.
 */
export function mergeConditions(
  stored: CocoonSetStatus | undefined,
  next: CocoonSetStatus,
  now: () => Date,
): CocoonSetStatus {
  const merged = deepCopy(stored?.conditions ?? []);
  for (const c of next.conditions ?? []) setStatusCondition(merged, c, now);
  const { conditions: _, ...status } = next;
  return merged.length > 0 ? { ...status, conditions: merged } : status;
}

/** Equality as the Go types' omitempty makes it: "", 0 and empty lists read as absent. */
export function statusEqual(
  a: CocoonSetStatus | undefined,
  b: CocoonSetStatus | undefined,
): boolean {
  return sameJson(a ?? {}, b ?? {}, emptyAbsent);
}

/** Members the wire always carries, even empty: list keys and the condition type. */
const ALWAYS_CARRIED = new Set(["slot", "role", "name", "type"]);

/** A JSON reviver dropping "", 0, null and [] members but ALWAYS_CARRIED. */
function emptyAbsent(this: unknown, key: string, value: unknown): unknown {
  if (Array.isArray(this) || ALWAYS_CARRIED.has(key)) return value;
  const empty = value === "" || value === 0 || value === null ||
    (Array.isArray(value) && value.length === 0);
  return empty ? undefined : value;
}

/** obj without its empty members (emptyAbsent), as the Go types' omitempty writes it. */
function omitEmpty<T extends object>(obj: T): T {
  return JSON.parse(JSON.stringify(obj), emptyAbsent);
}
