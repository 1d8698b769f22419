import { Counter, Gauge, Histogram, type Metric, type Registry } from "../kube/prom_client.ts";
import { registry as runtimeRegistry } from "../kube/metrics.ts";

/**
 * The operator's own metric families. Their names (cocoon_operator_*), labels and buckets are
 * the monitoring contract shared with the Go operator's dashboards and alerts; they register on
 * the runtime's registry so /metrics serves them next to the controller-runtime families.
 */

const PHASE_BUCKETS = [10, 30, 60, 180, 600, 1800];

export const subAgentRebuildTotal = new Counter({
  name: "cocoon_operator_subagent_rebuild_total",
  help: "Sub-agent pods deleted for a rebuild after their VM failed.",
  labelNames: ["namespace", "cocoonset"] as const,
  registers: [],
});

export const subAgentDeadLetterTotal = new Counter({
  name: "cocoon_operator_subagent_dead_letter_total",
  help: "Sub-agents given up on (dead-lettered) after using every rebuild attempt.",
  labelNames: ["namespace", "cocoonset"] as const,
  registers: [],
});

export const hibernatePhaseDurationSeconds = new Histogram({
  name: "cocoon_operator_hibernate_phase_duration_seconds",
  help: "Seconds a CocoonHibernation spent Hibernating, by outcome (ok or timeout).",
  labelNames: ["result"] as const,
  buckets: PHASE_BUCKETS,
  registers: [],
});

export const wakePhaseDurationSeconds = new Histogram({
  name: "cocoon_operator_wake_phase_duration_seconds",
  help: "Seconds a CocoonHibernation spent Waking, by outcome (ok or timeout).",
  labelNames: ["result"] as const,
  buckets: PHASE_BUCKETS,
  registers: [],
});

export const lifecycleStateFailedObservedTotal = new Counter({
  name: "cocoon_operator_lifecycle_state_failed_observed_total",
  help: "Times a pod's lifecycle-state=failed annotation was acted on, by CocoonSet phase.",
  labelNames: ["phase"] as const,
  registers: [],
});

export const slotReleasePodsDeletedTotal = new Counter({
  name: "cocoon_operator_slot_release_pods_deleted_total",
  help: "Hibernated pods deleted by a release-policy suspend to give back their seat.",
  labelNames: ["namespace", "cocoonset"] as const,
  registers: [],
});

export const slotReleaseWakeTotal = new Counter({
  name: "cocoon_operator_slot_release_wake_total",
  help: "Released-seat wakes that reached a live VM, by placement: hint-node (back on the " +
    "node it hibernated on, restoring from the node-local snapshot) or pool (elsewhere, " +
    "pulling from the registry).",
  labelNames: ["namespace", "cocoonset", "placement"] as const,
  registers: [],
});

export const slotReleaseWakeUnschedulableTotal = new Counter({
  name: "cocoon_operator_slot_release_wake_unschedulable_total",
  help: "Reconcile passes that saw a released-seat wake pod Unschedulable (no capacity).",
  labelNames: ["namespace", "cocoonset"] as const,
  registers: [],
});

/**
 * This port's own (the Go operator has no optional feature), so it is not among the families
 * register() installs: it registers on the runtime registry when this module loads, as the
 * sharding families do.
 */
export const rbacFeatureEnabled = new Gauge({
  name: "cocoon_operator_rbac_feature_enabled",
  help: "1 when a feature that needs more than the Go operator's RBAC role runs, 0 while it is " +
    "off because the operator's role lacks its permissions (node-checks, metrics-authn).",
  labelNames: ["feature"] as const,
  registers: [runtimeRegistry],
});

const all: Metric[] = [
  subAgentRebuildTotal,
  subAgentDeadLetterTotal,
  hibernatePhaseDurationSeconds,
  wakePhaseDurationSeconds,
  lifecycleStateFailedObservedTotal,
  slotReleasePodsDeletedTotal,
  slotReleaseWakeTotal,
  slotReleaseWakeUnschedulableTotal,
];

/** Adds every operator collector to reg; adding them again is a no-op. */
export function register(reg: Registry = runtimeRegistry): void {
  for (const metric of all) reg.registerMetric(metric);
}
