/**
 * The set wins (docs/cocoonset.md, "Precedence"): while the CocoonSet owning the target pod
 * drives its VM, the request touches neither pod nor registry (a toggled annotation would turn a
 * suspend into a wake, a dropped tag lose a migration's state) and carries Blocked=True.
 *
 * @module
 */
import type { CocoonSet } from "../common/apis/v1/cocoonset_types.ts";
import { type CocoonHibernation, CocoonHibernations, CocoonSets } from "../common/apis/v1/mod.ts";
import {
  type Condition,
  CONDITION_TYPE_READY,
  findStatusCondition,
  formatConditionTime,
  setStatusCondition,
} from "../common/k8s/condition.ts";
import { cocoonSetOwnerName, parseVMSpec } from "../common/meta/mod.ts";
import { isNotFound, parseRfc3339, patchStatus, wrapError } from "../kube/mod.ts";
import type { Pod } from "../kube/mod.ts";
import { setFlowOnVM } from "../snapshotgate/mod.ts";
import { direction, type RequestProblem } from "./checks.ts";
import { hasPhaseDeadline, type Pass, recordEvent, type TargetPass } from "./status.ts";

/** Condition type a request carries while it yields to a CocoonSet. */
export const CONDITION_TYPE_BLOCKED = "Blocked";
/** Warning and Blocked=True reason: the set that owns the pod drives its VM. */
export const REASON_YIELDED_TO_COCOON_SET = "YieldedToCocoonSet";
/** Reason of Blocked=False once the set lets go. */
export const REASON_NOT_BLOCKED = "NotBlocked";

/** What the set that owns pod does with its VM that a request must not cross; "" for nothing. */
export function setDrive(cs: CocoonSet, pod: Pod, hib: CocoonHibernation): string {
  const flow = setFlowOnVM(cs, parseVMSpec(pod).vmName);
  if (flow !== "") return flow;
  const phase = cs.status?.phase ?? "";
  const suspending = cs.spec?.suspend || phase === "Suspending" || phase === "Suspended";
  if (suspending && direction(hib) !== "Hibernate") return "is suspended";
  return "";
}

/**
 * The yielded problem when the set owning the target pod drives its VM, read from the cache:
 * the set persists each flow's phase before its first side effect, and a request acting on a
 * lagging copy is weighed again by the set's pass and by the gate before any tag goes.
 */
export async function yieldProblem(pass: TargetPass): Promise<RequestProblem | undefined> {
  const { deps, hib, pod, vmName, signal } = pass;
  const owner = cocoonSetOwnerName(pod.metadata.ownerReferences);
  if (owner === "") return undefined;
  const namespace = pod.metadata.namespace ?? "";
  let cs: CocoonSet;
  try {
    cs = await deps.client.get(CocoonSets, namespace, owner, { signal });
  } catch (err) {
    if (isNotFound(err)) return undefined;
    throw wrapError(`read cocoonset ${namespace}/${owner}`, err);
  }
  const drive = setDrive(cs, pod, hib);
  if (drive === "") return undefined;
  const message = `CocoonSet ${hib.metadata.namespace ?? ""}/${cs.metadata.name} ${drive}: ` +
    `this request to ${hib.spec.desire} pod ${hib.spec.podRef.name} waits and does not touch ` +
    `VM ${vmName}`;
  return { problem: "yielded", message };
}

/** Blocked=True with message, and a Warning when newly written; nothing when already so. */
export async function markYielded(pass: Pass, message: string): Promise<void> {
  const now = pass.deps.clock.now();
  const conditions = withBlocked(pass, "True", REASON_YIELDED_TO_COCOON_SET, message, now);
  if (!conditions) return;
  await writeConditions(pass, conditions);
  recordEvent(pass, "Warning", REASON_YIELDED_TO_COCOON_SET, message);
}

/**
 * Turns a stored Blocked=True to False, moving the phase clock of Hibernating or Waking forward
 * by the blocked stretch in the same write: the yield does not count toward the deadline.
 */
export async function clearYielded(pass: Pass): Promise<void> {
  const { hib } = pass;
  const blocked = findStatusCondition(hib.status?.conditions, CONDITION_TYPE_BLOCKED);
  if (blocked?.status !== "True") return;
  const now = pass.deps.clock.now();
  const conditions = withBlocked(
    pass,
    "False",
    REASON_NOT_BLOCKED,
    "no CocoonSet drives the VM",
    now,
  );
  if (!conditions) return;
  const ready = findStatusCondition(conditions, CONDITION_TYPE_READY);
  const entered = parseRfc3339(ready?.lastTransitionTime);
  const blockedAt = parseRfc3339(blocked.lastTransitionTime);
  if (hasPhaseDeadline(hib.status?.phase) && entered !== undefined && blockedAt !== undefined) {
    const from = Math.max(entered, blockedAt);
    if (now > from) ready!.lastTransitionTime = formatConditionTime(new Date(entered + now - from));
  }
  await writeConditions(pass, conditions);
}

/** The request's conditions with Blocked set as given; undefined when it already says so. */
function withBlocked(
  pass: Pass,
  status: "True" | "False",
  reason: string,
  message: string,
  nowMs: number,
): Condition[] | undefined {
  const conditions = structuredClone(pass.hib.status?.conditions ?? []);
  const observedGeneration = pass.hib.metadata.generation ?? 0;
  const blocked = { type: CONDITION_TYPE_BLOCKED, status, reason, message, observedGeneration };
  const condition = { ...blocked, lastTransitionTime: "" };
  const changed = setStatusCondition(conditions, condition, () => new Date(nowMs));
  return changed ? conditions : undefined;
}

async function writeConditions(pass: Pass, conditions: Condition[]): Promise<void> {
  await patchStatus(pass.deps.client, CocoonHibernations, pass.hib, (h) => {
    h.status = { ...h.status, conditions };
  }, { optimisticLock: true, signal: pass.signal });
  // The pass goes on with this copy: it must show what was just written.
  pass.hib.status = { ...pass.hib.status, conditions };
}
