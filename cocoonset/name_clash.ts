/**
 * Name clashes: a pod the set needs (an agent slot or a toolbox) is named like a pod the set
 * does not control. Such a pod is never modified or deleted; the set reports it (Ready=False,
 * reason NameConflict, a Warning naming the other object) and keeps reconciling everything else.
 * The Go operator instead waited forever for the pod to "finish terminating".
 */
import { isControlledBy, type Pod } from "../kube/mod.ts";
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
import type { CocoonSetPhase } from "../common/apis/v1/enums.ts";
import { agentPodName } from "./pods.ts";

/** Reason when a pod name the set needs belongs to something else. */
export const REASON_NAME_CONFLICT = "NameConflict";

/** What an AlreadyExists on a create means. */
export type NameClash =
  | { kind: "gone" }
  | { kind: "ours"; pod: Pod }
  | { kind: "foreign"; pod: Pod };

/**
 * Reads the live pod behind an AlreadyExists, uncached (a foreign pod need not carry our label
 * and so is not in the cache): gone meanwhile, ours (terminating, or not yet in the cache), or
 * someone else's.
 */
export async function classifyNameClash(pass: SetPass, podName: string): Promise<NameClash> {
  const ns = pass.cs.metadata.namespace ?? "";
  const live = await readStoredPod(pass, ns, podName, "get existing pod");
  if (!live) return { kind: "gone" };
  return isControlledBy(live, pass.cs)
    ? { kind: "ours", pod: live }
    : { kind: "foreign", pod: live };
}

/** Records a name clash on the pass (status problem + Warning Event) and returns the problem. */
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

/** Thrown after a pass reported name clashes, so the set is retried with backoff. */
export class NameConflictError extends Error {
  constructor(problems: readonly StatusProblem[]) {
    super(problems.map((p) => p.message).join("; "));
    this.name = "NameConflictError";
  }
}

/**
 * A create of the main answered AlreadyExists: gone meanwhile → look again at once; our old main
 * still terminating → look again after waitMs; someone else's pod → a name clash: the pass
 * stops with the phase given and fails with NameConflictError.
 */
export async function settleMainCreateClash(
  pass: SetPass,
  phase: CocoonSetPhase | "",
  waitMs: number,
): Promise<Stop> {
  const name = agentPodName(pass.cs.metadata.name ?? "", 0);
  const clash = await classifyNameClash(pass, name);
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
