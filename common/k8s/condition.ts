import { rfc3339 } from "../../kube/time.ts";

/**
 * metav1.Condition and the helpers apimachinery's meta package offers for condition lists
 * (SetStatusCondition & co.), plus cocoon-common's Ready-condition builder.
 */

/** "True" | "False" | "Unknown", as metav1.ConditionStatus. */
export type ConditionStatus = "True" | "False" | "Unknown";

export const CONDITION_TRUE: ConditionStatus = "True";
export const CONDITION_FALSE: ConditionStatus = "False";
export const CONDITION_UNKNOWN: ConditionStatus = "Unknown";

/**
 * One entry of status.conditions (metav1.Condition). lastTransitionTime is an RFC 3339 string
 * with second precision; "" (or absent) means "not set yet" and is filled by setStatusCondition.
 */
export interface Condition {
  type: string;
  status: ConditionStatus;
  observedGeneration?: number;
  lastTransitionTime: string;
  reason: string;
  message: string;
}

/** The condition type for overall readiness, shared by every cocoon component. */
export const CONDITION_TYPE_READY = "Ready";

/**
 * Builds a Ready condition. lastTransitionTime is left empty on purpose: setStatusCondition then
 * keeps the stored timestamp when the status did not flip.
 */
export function newReadyCondition(
  generation: number,
  status: ConditionStatus,
  reason: string,
  message: string,
): Condition {
  return {
    type: CONDITION_TYPE_READY,
    status,
    reason,
    message,
    observedGeneration: generation,
    lastTransitionTime: "",
  };
}

/** Formats a time the way metav1.Time serialises: RFC 3339, UTC, whole seconds. */
export function formatConditionTime(t: Date): string {
  return rfc3339(t);
}

/** The condition of the given type, or undefined. The returned object is the list's own entry. */
export function findStatusCondition(
  conditions: readonly Condition[] | undefined,
  type: string,
): Condition | undefined {
  return conditions?.find((c) => c.type === type);
}

/**
 * Adds or updates the condition of newCondition.type in place, with apimachinery's
 * meta.SetStatusCondition semantics: lastTransitionTime changes only when the status changes
 * (taken from newCondition if set, else now); reason, message and observedGeneration are copied.
 * Returns true when the list changed.
 */
export function setStatusCondition(
  conditions: Condition[],
  newCondition: Condition,
  now: () => Date = () => new Date(),
): boolean {
  const existing = findStatusCondition(conditions, newCondition.type);
  if (!existing) {
    conditions.push({
      ...newCondition,
      lastTransitionTime: newCondition.lastTransitionTime || formatConditionTime(now()),
    });
    return true;
  }
  let changed = false;
  if (existing.status !== newCondition.status) {
    existing.status = newCondition.status;
    existing.lastTransitionTime = newCondition.lastTransitionTime || formatConditionTime(now());
    changed = true;
  }
  if (existing.reason !== newCondition.reason) {
    existing.reason = newCondition.reason;
    changed = true;
  }
  if (existing.message !== newCondition.message) {
    existing.message = newCondition.message;
    changed = true;
  }
  // Go compares int64 values where an absent field reads as 0.
  if ((existing.observedGeneration ?? 0) !== (newCondition.observedGeneration ?? 0)) {
    existing.observedGeneration = newCondition.observedGeneration;
    changed = true;
  }
  return changed;
}

/**
 * Removes every condition of the given type in place (duplicates included, as apimachinery
 * does); returns true when at least one was removed.
 */
export function removeStatusCondition(conditions: Condition[], type: string): boolean {
  const kept = conditions.filter((c) => c.type !== type);
  if (kept.length === conditions.length) return false;
  conditions.splice(0, conditions.length, ...kept);
  return true;
}

/** True when a condition of the given type exists with status True. */
export function isStatusConditionTrue(
  conditions: readonly Condition[] | undefined,
  type: string,
): boolean {
  return isStatusConditionPresentAndEqual(conditions, type, CONDITION_TRUE);
}

/** True when a condition of the given type exists with status False. */
export function isStatusConditionFalse(
  conditions: readonly Condition[] | undefined,
  type: string,
): boolean {
  return isStatusConditionPresentAndEqual(conditions, type, CONDITION_FALSE);
}

/** True when a condition of the given type exists with the given status. */
export function isStatusConditionPresentAndEqual(
  conditions: readonly Condition[] | undefined,
  type: string,
  status: ConditionStatus,
): boolean {
  return findStatusCondition(conditions, type)?.status === status;
}
