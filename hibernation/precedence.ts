/**
 * Precedence between a CocoonSet and a CocoonHibernation on the same VM (docs/hibernation.md,
 * "One pass" step 5; "Precedence" in docs/cocoonset.md): the set wins. While the
 * set that owns the target pod drives its VM — torn down, migrating, waking a released seat, a
 * seat released, or suspending/suspended against a request to wake — the request does not touch
 * the pod or the registry: it gets a Warning Event and the condition `Blocked=True` naming the
 * set (written once, so at most one write per requeue interval), and looks again in 5 s. A request
 * that asks what the set does anyway (Hibernate while the set suspends) goes on.
 *
 * Why the set: its flows delete and recreate the pod and drop the tag at their own end; a request
 * that toggled the annotation under them would turn a suspend into a wake (a hot loop with a
 * finished Wake request) or drop the tag a migration is about to restore from.
 *
 * @module
 */
import type { CocoonSet } from "../common/apis/v1/cocoonset_types.ts";
import type { CocoonHibernation } from "../common/apis/v1/cocoonhibernation_types.ts";
import {
  CocoonHibernations,
  CocoonSets,
  HIBERNATION_DESIRE_HIBERNATE,
} from "../common/apis/v1/mod.ts";
import {
  type Condition,
  CONDITION_TYPE_READY,
  findStatusCondition,
  formatConditionTime,
  setStatusCondition,
} from "../common/k8s/condition.ts";
import { cocoonSetOwnerName, parseVMSpec } from "../common/meta/mod.ts";
import { isNotFound, parseRfc3339, patchStatus, wrapError } from "../kube/mod.ts";
import type { EventRecorder, Pod, Reader, Writer } from "../kube/mod.ts";
import { setFlowOnVM } from "../snapshotgate/mod.ts";
import { direction } from "./direction.ts";
import { REASON_YIELDED_TO_COCOON_SET, recordRequestEvent } from "./events.ts";
import type { RequestProblem } from "./problem.ts";
import { hasPhaseDeadline } from "./status.ts";

/** Condition type a request carries while it yields to a CocoonSet. */
export const CONDITION_TYPE_BLOCKED = "Blocked";
/** Reason of Blocked=False once the set lets go. */
export const REASON_NOT_BLOCKED = "NotBlocked";

/** What the set that owns pod is doing with its VM that a request must not cross; "" for nothing. */
export function setDrive(cs: CocoonSet, pod: Pod, hib: CocoonHibernation): string {
  const flow = setFlowOnVM(cs, parseVMSpec(pod).vmName);
  if (flow !== "") return flow;
  const phase = cs.status?.phase ?? "";
  const suspending = cs.spec?.suspend || phase === "Suspending" || phase === "Suspended";
  if (suspending && direction(hib) !== HIBERNATION_DESIRE_HIBERNATE) return "is suspended";
  return "";
}

/**
 * The set owning pod and what it drives, from the cache (reader: the manager's client);
 * undefined when it drives nothing. The cache is enough: the set persists the phase of each of
 * its flows before the flow's first side effect, and whatever a request does while its cache
 * still lags that write is weighed again by the set's own pass (which reads the requests past
 * the cache before it clears a hibernate request) and by the gate before any tag goes.
 */
export async function drivingSet(
  reader: Reader,
  pod: Pod,
  hib: CocoonHibernation,
  signal: AbortSignal,
): Promise<{ set: CocoonSet; drive: string } | undefined> {
  const owner = cocoonSetOwnerName(pod.metadata.ownerReferences);
  if (owner === "") return undefined;
  let cs: CocoonSet;
  try {
    cs = await reader.get(CocoonSets, pod.metadata.namespace ?? "", owner, { signal });
  } catch (err) {
    if (isNotFound(err)) return undefined;
    throw wrapError(`read cocoonset ${pod.metadata.namespace}/${owner}`, err);
  }
  const drive = setDrive(cs, pod, hib);
  return drive === "" ? undefined : { set: cs, drive };
}

/**
 * The yielded problem of hib on vmName: the set that owns pod drives the VM (drivingSet), named
 * with what it does; undefined when no set does.
 */
export async function yieldProblem(
  reader: Reader,
  pod: Pod,
  hib: CocoonHibernation,
  vmName: string,
  signal: AbortSignal,
): Promise<RequestProblem | undefined> {
  const driver = await drivingSet(reader, pod, hib, signal);
  if (!driver) return undefined;
  const namespace = hib.metadata.namespace ?? "";
  const message = `CocoonSet ${namespace}/${driver.set.metadata.name} ${driver.drive}: ` +
    `this request to ${hib.spec.desire} pod ${hib.spec.podRef.name} waits and does not touch ` +
    `VM ${vmName}`;
  return { problem: "yielded", message };
}

/**
 * Records that hib yields to set: Blocked=True with the message, and a Warning Event when that
 * condition is newly written. Nothing is written when the stored condition already says so.
 */
export async function markYielded(
  client: Writer,
  recorder: EventRecorder,
  hib: CocoonHibernation,
  message: string,
  nowMs: number,
  signal: AbortSignal,
): Promise<void> {
  const changed = await writeBlocked(
    client,
    hib,
    "True",
    REASON_YIELDED_TO_COCOON_SET,
    message,
    nowMs,
    signal,
  );
  if (changed) recordRequestEvent(recorder, hib, "Warning", REASON_YIELDED_TO_COCOON_SET, message);
}

/**
 * Turns a stored Blocked=True to False once the set lets go; nothing otherwise. The yielded
 * stretch does not count toward a Hibernating or Waking deadline: the phase clock
 * (Ready.lastTransitionTime) moves forward by the time spent blocked, in the same status write,
 * so the request keeps what was left of its timeout when it yielded. A crash before that write
 * leaves Blocked=True stored, and the next pass computes the same shift again.
 */
export async function clearYielded(
  client: Writer,
  hib: CocoonHibernation,
  nowMs: number,
  signal: AbortSignal,
): Promise<void> {
  const blocked = findStatusCondition(hib.status?.conditions, CONDITION_TYPE_BLOCKED);
  if (blocked?.status !== "True") return;
  await writeBlocked(
    client,
    hib,
    "False",
    REASON_NOT_BLOCKED,
    "no CocoonSet drives the VM",
    nowMs,
    signal,
    (conditions) => excludeYieldFromPhaseClock(hib, conditions, blocked, nowMs),
  );
}

/**
 * Moves the Ready clock of a deadline phase forward by the part of the yield (Blocked=True since
 * its lastTransitionTime) that fell inside the phase. Leaves it when either time is unknown.
 */
function excludeYieldFromPhaseClock(
  hib: CocoonHibernation,
  conditions: Condition[],
  blocked: Condition,
  nowMs: number,
): void {
  if (!hasPhaseDeadline(hib.status?.phase)) return;
  const ready = findStatusCondition(conditions, CONDITION_TYPE_READY);
  const entered = parseRfc3339(ready?.lastTransitionTime);
  const blockedAt = parseRfc3339(blocked.lastTransitionTime);
  if (!ready || entered === undefined || blockedAt === undefined) return;
  const from = Math.max(entered, blockedAt);
  if (nowMs <= from) return;
  ready.lastTransitionTime = formatConditionTime(new Date(entered + (nowMs - from)));
}

async function writeBlocked(
  client: Writer,
  hib: CocoonHibernation,
  status: "True" | "False",
  reason: string,
  message: string,
  nowMs: number,
  signal: AbortSignal,
  adjust: (conditions: Condition[]) => void = () => {},
): Promise<boolean> {
  const conditions = structuredClone(hib.status?.conditions ?? []);
  const changed = setStatusCondition(conditions, {
    type: CONDITION_TYPE_BLOCKED,
    status,
    reason,
    message,
    observedGeneration: hib.metadata.generation ?? 0,
    lastTransitionTime: "",
  }, () => new Date(nowMs));
  if (!changed) return false;
  adjust(conditions);
  await patchStatus(client, CocoonHibernations, hib, (h) => {
    h.status = { ...h.status, conditions };
  }, { optimisticLock: true, signal });
  // The stored copy now carries it: a later pass in this process reads it from the answer.
  hib.status = { ...hib.status, conditions };
  return true;
}
