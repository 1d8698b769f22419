/**
 * The CocoonHibernation status as a function of the phase (docs/hibernation.md, "Status"): the
 * Ready condition each phase implies, the status a phase change produces, and the phase clock
 * (Ready.lastTransitionTime) that the Hibernating and Waking deadlines (timers.ts) are measured
 * from.
 *
 * Invariant kept here: the Ready condition always matches the phase (True/`Done` for Hibernated
 * and Active, False otherwise), and the phase clock restarts whenever the phase enters Hibernating
 * or Waking from a different phase, so a retry after Failed gets its full budget.
 *
 * @module
 */
import {
  COCOON_HIBERNATION_PHASE_ACTIVE,
  COCOON_HIBERNATION_PHASE_FAILED,
  COCOON_HIBERNATION_PHASE_HIBERNATED,
  COCOON_HIBERNATION_PHASE_HIBERNATING,
  COCOON_HIBERNATION_PHASE_WAKING,
  type CocoonHibernation,
  type CocoonHibernationPhase,
  type CocoonHibernationStatus,
  REASON_HIBERNATION_DONE,
  REASON_HIBERNATION_FAILED,
  REASON_HIBERNATION_PENDING,
} from "../common/apis/v1/mod.ts";
import {
  type Condition,
  CONDITION_FALSE,
  CONDITION_TRUE,
  CONDITION_TYPE_READY,
  findStatusCondition,
  formatConditionTime,
  newReadyCondition,
  setStatusCondition,
} from "../common/k8s/condition.ts";
import { sameJson } from "../common/k8s/same_json.ts";
import { parseRfc3339 } from "../kube/mod.ts";

/** What a pass wants the status to say. */
export interface PhaseChange {
  phase: CocoonHibernationPhase;
  /** Written to status.vmName; absent keeps the stored value. */
  vmName?: string;
  /** Ready reason; default: the one the phase implies. */
  reason?: string;
  /** Ready message; default: the phase name. */
  message?: string;
}

/** Whether a phase runs against a deadline (and so restarts its clock on entry). */
export function hasPhaseDeadline(phase: string | undefined): boolean {
  return phase === COCOON_HIBERNATION_PHASE_HIBERNATING ||
    phase === COCOON_HIBERNATION_PHASE_WAKING;
}

/**
 * The Ready condition a phase implies: True/`Done` for Hibernated and Active, False/`Failed` for
 * Failed, False/`Pending` otherwise. The timestamp is left empty so an unflipped status keeps its
 * stored one.
 */
export function readyCondition(
  phase: CocoonHibernationPhase,
  generation: number,
  override: { reason?: string; message?: string } = {},
): Condition {
  const done = phase === COCOON_HIBERNATION_PHASE_HIBERNATED ||
    phase === COCOON_HIBERNATION_PHASE_ACTIVE;
  const reason = override.reason ??
    (done
      ? REASON_HIBERNATION_DONE
      : phase === COCOON_HIBERNATION_PHASE_FAILED
      ? REASON_HIBERNATION_FAILED
      : REASON_HIBERNATION_PENDING);
  return newReadyCondition(
    generation,
    done ? CONDITION_TRUE : CONDITION_FALSE,
    reason,
    override.message ?? phase,
  );
}

/**
 * The status after change, computed from hib's current one at time nowMs. The caller compares it
 * with the current status to decide whether a write is needed.
 */
export function nextStatus(
  hib: CocoonHibernation,
  change: PhaseChange,
  nowMs: number,
): CocoonHibernationStatus {
  const current = hib.status ?? {};
  const generation = hib.metadata.generation ?? 0;
  const conditions = structuredClone(current.conditions ?? []);
  const now = () => new Date(nowMs);
  setStatusCondition(
    conditions,
    readyCondition(change.phase, generation, change),
    now,
  );
  if (hasPhaseDeadline(change.phase) && current.phase !== change.phase) {
    // Entering a deadline phase starts its clock, even when Ready stays False (Failed → retry).
    findStatusCondition(conditions, CONDITION_TYPE_READY)!.lastTransitionTime = formatConditionTime(
      now(),
    );
  }
  const next: CocoonHibernationStatus = {
    ...structuredClone(current),
    observedGeneration: generation,
    phase: change.phase,
    conditions,
  };
  if (change.vmName !== undefined) next.vmName = change.vmName;
  return next;
}

/** Whether two statuses say the same thing (JSON equality). */
export function sameStatus(
  a: CocoonHibernationStatus | undefined,
  b: CocoonHibernationStatus | undefined,
): boolean {
  return sameJson(a ?? {}, b ?? {});
}

/** When the current phase was entered (Ready.lastTransitionTime, epoch ms), if known. */
export function phaseEnteredAt(hib: CocoonHibernation): number | undefined {
  const ready = findStatusCondition(hib.status?.conditions, CONDITION_TYPE_READY);
  return parseRfc3339(ready?.lastTransitionTime);
}
