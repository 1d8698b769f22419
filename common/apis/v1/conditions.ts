/**
 * Condition types and reasons the operator writes into status.conditions of its resources.
 * Ready itself lives in common/k8s (ConditionTypeReady) because cocoon-common shares it with
 * other components; the rest are specific to these two kinds.
 */

/** CocoonSet condition: True while the set is still converging (Pending or Scaling). */
export const CONDITION_TYPE_PROGRESSING = "Progressing";

/** Ready=True reason on a CocoonSet: every agent and toolbox is ready. */
export const REASON_ALL_AGENTS_READY = "AllAgentsReady";
/** Ready=False reason on a CocoonSet: some agent or toolbox is not ready yet. */
export const REASON_AGENTS_NOT_READY = "AgentsNotReady";
/** Progressing=False reason on a CocoonSet: nothing left to converge. */
export const REASON_STABLE = "Stable";
/** Progressing=True reason on a CocoonSet: pods are being created or scaled. */
export const REASON_RECONCILING = "Reconciling";

/** Ready=False reason on a CocoonHibernation: the requested transition is still under way. */
export const REASON_HIBERNATION_PENDING = "Pending";
/** Ready=True reason on a CocoonHibernation: the requested state was reached. */
export const REASON_HIBERNATION_DONE = "Done";
/** Ready=False reason on a CocoonHibernation: the transition failed. */
export const REASON_HIBERNATION_FAILED = "Failed";
