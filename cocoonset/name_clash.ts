/**
 * Name clashes: a pod the set needs (an agent slot or a toolbox) is named like a pod the set does
 * not control. That pod is never touched; the set reports it (Ready=False `NameConflict`, a
 * Warning naming the other pod) and reconciles everything else.
 */
import { isControlledBy, type Pod } from "../kube/mod.ts";
import type { CocoonSetPhase } from "../common/apis/v1/enums.ts";
import { CONDITION_TYPE_READY } from "../common/k8s/condition.ts";
import { LABEL_ROLE } from "../common/meta/mod.ts";
import {
  emit,
  podRef,
  readStoredPod,
  type SetPass,
  type StatusProblem,
  type Stop,
  stop,
} from "./pass.ts";
import { agentPodName } from "./pods.ts";

/** Reason when a pod name the set needs belongs to something else. */
export const REASON_NAME_CONFLICT = "NameConflict";

/** What an AlreadyExists on a create means. */
export type NameClash =
  | { kind: "gone" }
  | { kind: "ours"; pod: Pod }
  | { kind: "foreign"; pod: Pod };

/**
 * Reads the pod behind an AlreadyExists past the cache (a foreign pod need not carry our label):
 * gone meanwhile, ours (terminating, or not in the cache yet), or someone else's.
 */
export async function classifyNameClash(pass: SetPass, podName: string): Promise<NameClash> {
  const ref = { metadata: { namespace: pass.cs.metadata.namespace, name: podName } };
  const live = await readStoredPod(pass, ref, "get existing pod");
  if (!live) return { kind: "gone" };
  return isControlledBy(live, pass.cs)
    ? { kind: "ours", pod: live }
    : { kind: "foreign", pod: live };
}

/** Records a name clash on the pass (problem and Warning) and returns the problem. */
export function reportNameClash(pass: SetPass, what: string, other: Pod): StatusProblem {
  const problem: StatusProblem = {
    condition: CONDITION_TYPE_READY,
    reason: REASON_NAME_CONFLICT,
    message: `${what} needs pod ${other.metadata.name}, which is taken by ${describePod(other)}`,
  };
  pass.problems.push(problem);
  emit(pass, "Warning", REASON_NAME_CONFLICT, problem.message);
  return problem;
}

/** The error of a pass that met name clashes: retried with backoff. */
export class NameConflictError extends Error {
  constructor(problems: readonly StatusProblem[]) {
    super(problems.map((p) => p.message).join("; "));
    this.name = "NameConflictError";
  }
}

/**
 * A create of the main answered AlreadyExists: gone meanwhile, look again at once; our old main
 * still terminating, look again after waitMs; someone else's pod, stop with phase and a name
 * clash.
 */
export async function settleMainCreateClash(
  pass: SetPass,
  phase: CocoonSetPhase | "",
  waitMs: number,
): Promise<Stop> {
  const clash = await classifyNameClash(pass, agentPodName(pass.cs.metadata.name ?? "", 0));
  if (clash.kind === "gone") return stop({ requeue: true });
  if (clash.kind === "ours") return stop({ requeueAfter: waitMs });
  const problem = reportNameClash(pass, "the main agent", clash.pod);
  return stop({}, phase, new NameConflictError([problem]));
}

/** "pod ns/name (controlled by Kind name, role r)" or "(not controlled by any CocoonSet)". */
export function describePod(pod: Pod): string {
  const owner = pod.metadata.ownerReferences?.find((r) => r.controller);
  const role = pod.metadata.labels?.[LABEL_ROLE];
  const detail = owner
    ? `controlled by ${owner.kind} ${owner.name}${role ? `, role ${role}` : ""}`
    : "not controlled by any CocoonSet";
  return `pod ${podRef(pod)} (${detail})`;
}
