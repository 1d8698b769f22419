/**
 * CocoonSet status: rebuilt from the classified pods on every pass, written through the status
 * subresource only when it differs from what is stored.
 *
 * Conditions follow the phase (unlike the Go operator, whose Ready could read True next to phase
 * Failed and whose Progressing said Stable while Waking or Migrating): Ready is False whenever the
 * phase is Failed or a problem blocks the set; Progressing is True while the set is moving
 * toward its spec (Pending, Scaling, Suspending, Waking, Migrating) and False once it is settled,
 * failed, or stuck on something only a person can fix.
 */
import { deepCopy } from "../kube/object.ts";
import type { Pod } from "../kube/core.ts";
import { patchStatus } from "../kube/client_patch.ts";
import type { Writer } from "../kube/client.ts";
import { jsonEqual } from "../kube/patch.ts";
import type {
  AgentStatus,
  CocoonSet,
  CocoonSetStatus,
  ToolboxStatus,
} from "../common/apis/v1/cocoonset_types.ts";
import {
  ConditionTypeProgressing,
  ReasonAgentsNotReady,
  ReasonAllAgentsReady,
  ReasonReconciling,
  ReasonStable,
} from "../common/apis/v1/conditions.ts";
import type { CocoonSetPhase, ConnType } from "../common/apis/v1/enums.ts";
import { CocoonSets } from "../common/apis/v1/resources.ts";
import {
  type Condition,
  ConditionTypeReady,
  newReadyCondition,
  setStatusCondition,
} from "../common/k8s/condition.ts";
import {
  connectionType,
  isPodReady,
  parseVMRuntime,
  parseVMSpec,
  RoleMain,
  RoleSubAgent,
} from "../common/meta/mod.ts";
import { nowOf, type SetPass } from "./pass.ts";
import type { StatusProblem } from "./problem.ts";
import type { ClassifiedPods } from "./pods.ts";

/** Progressing=False reason when the set is in phase Failed. */
export const ReasonFailed = "Failed";

const int32Max = 2_147_483_647;

/** Phases in which the set is still moving toward its spec. */
const movingPhases: ReadonlySet<string> = new Set([
  "Pending",
  "Scaling",
  "Suspending",
  "Waking",
  "Migrating",
]);

/**
 * The status this pass observes. phase "" (or absent) derives it: no main → Pending, fewer ready
 * agents or toolboxes than desired → Scaling, else Running. problems turn their condition False.
 */
export function buildStatus(
  cs: CocoonSet,
  classified: ClassifiedPods,
  phase: CocoonSetPhase | "" = "",
  problems: readonly StatusProblem[] = [],
): CocoonSetStatus {
  const generation = cs.metadata.generation ?? 0;
  // The field is an int32: replicas at the CRD's maximum must not overflow it (and be refused).
  const desired = Math.min(1 + (cs.spec.agent.replicas ?? 0), int32Max);
  let ready = 0;
  const agents: AgentStatus[] = [];
  let mainVMName = "";
  if (classified.main) {
    if (isPodReady(classified.main)) ready++;
    mainVMName = parseVMSpec(classified.main).vmName;
    agents.push(agentStatusFromPod(classified.main, 0, RoleMain, ""));
  }
  for (const slot of [...classified.sub.keys()].sort((a, b) => a - b)) {
    const sub = classified.sub.get(slot)!;
    if (isPodReady(sub)) ready++;
    agents.push(agentStatusFromPod(sub, slot, RoleSubAgent, mainVMName));
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

/**
 * Ready and Progressing, with empty lastTransitionTime so that merging them into the stored
 * conditions keeps the stored timestamps unless the status flips.
 */
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
  const readyProblem = problems.find((p) => p.condition === ConditionTypeReady) ??
    (phase === "Failed" ? { reason: ReasonFailed, message: countsMessage } : undefined);
  const readyCond = readyProblem
    ? newReadyCondition(generation, "False", readyProblem.reason, readyProblem.message)
    : newReadyCondition(
      generation,
      allReady ? "True" : "False",
      allReady ? ReasonAllAgentsReady : ReasonAgentsNotReady,
      countsMessage,
    );

  const progressingProblem = problems.find((p) => p.condition === ConditionTypeProgressing);
  let progressing: Pick<Condition, "status" | "reason" | "message">;
  if (phase === "Failed") {
    progressing = { status: "False", reason: ReasonFailed, message: phase };
  } else if (progressingProblem) {
    progressing = {
      status: "False",
      reason: progressingProblem.reason,
      message: progressingProblem.message,
    };
  } else if (movingPhases.has(phase)) {
    progressing = { status: "True", reason: ReasonReconciling, message: phase };
  } else {
    progressing = { status: "False", reason: ReasonStable, message: phase };
  }
  return [readyCond, {
    type: ConditionTypeProgressing,
    ...progressing,
    observedGeneration: generation,
    lastTransitionTime: "",
  }];
}

/**
 * Merges next's conditions into the stored ones (keeping other condition types and the
 * timestamps of unflipped ones), compares with what is stored and, when different, patches the
 * status subresource. cs is refreshed in place from the server's answer. Returns whether a write
 * was made.
 *
 * The patch carries the resourceVersion cs was read at: a merge patch leaves out every field
 * that equals cs, so one computed from a cached copy older than the stored status would keep the
 * stored phase next to this pass's conditions. Such a write fails with Conflict instead, and the
 * pass is retried from fresh data.
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
  written?: Map<string, CocoonSetStatus>,
): Promise<boolean> {
  const merged = deepCopy(cs.status?.conditions ?? []);
  for (const c of next.conditions ?? []) setStatusCondition(merged, c, now);
  const status: CocoonSetStatus = { ...next };
  if (merged.length > 0) status.conditions = merged;
  else delete status.conditions;
  const uid = cs.metadata.uid ?? "";
  if (statusEqual(cs.status, status)) {
    const mine = written?.get(uid);
    if (mine === undefined || statusEqual(mine, status)) return false;
    await client.patch(CocoonSets, cs.metadata.namespace ?? "", cs.metadata.name ?? "", "merge", {
      metadata: { resourceVersion: cs.metadata.resourceVersion },
    }, { subresource: "status", signal });
    written?.delete(uid);
    return false;
  }
  await patchStatus(client, CocoonSets, cs, (c) => {
    c.status = status;
  }, { optimisticLock: true, signal });
  written?.set(uid, deepCopy(cs.status ?? {}));
  return true;
}

/**
 * Semantic equality of two statuses: empty strings, zero optional numbers and empty lists equal
 * absent ones, as the Go types' omitempty makes them; the four counters always count.
 */
export function statusEqual(
  a: CocoonSetStatus | undefined,
  b: CocoonSetStatus | undefined,
): boolean {
  return jsonEqual(normalizeStatus(a), normalizeStatus(b));
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
  return JSON.parse(JSON.stringify(out));
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

/**
 * Writes the status this pass observed, with phase (or derived when ""), adding the problems
 * the pass collected. Returns whether a write was made.
 */
export function writeSetStatus(pass: SetPass, phase: CocoonSetPhase | "" = ""): Promise<boolean> {
  return writeStatus(
    pass.deps.client,
    pass.cs,
    buildStatus(pass.cs, pass.classified, phase, pass.problems),
    nowOf(pass),
    pass.signal,
    pass.deps.writtenStatuses,
  );
}
