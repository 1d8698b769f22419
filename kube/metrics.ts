import { Counter, Gauge, Histogram, Registry } from "./prom_client.ts";
import { registerProcessMetrics } from "./process_metrics.ts";
import { takeRequestCounts } from "./request_counts.ts";

/**
 * The controller-runtime / client-go metric families, with the same names, labels and buckets,
 * so dashboards built for Go operators read this one unchanged. Everything registers on one
 * registry that the manager serves at /metrics; the operator's own families join it.
 */
export const registry: Registry = new Registry();

const RECONCILE_TIME_BUCKETS = [
  0.005,
  0.01,
  0.025,
  0.05,
  0.1,
  0.15,
  0.2,
  0.25,
  0.3,
  0.35,
  0.4,
  0.45,
  0.5,
  0.6,
  0.7,
  0.8,
  0.9,
  1.0,
  1.25,
  1.5,
  1.75,
  2.0,
  2.5,
  3.0,
  3.5,
  4.0,
  4.5,
  5,
  6,
  7,
  8,
  9,
  10,
  15,
  20,
  25,
  30,
  40,
  50,
  60,
];

/**
 * prometheus.ExponentialBuckets(10e-9, 10, 12), 10ns … 1000s, as client-go's workqueue uses. Built
 * by repeated multiplication as client_golang does: two bounds then sit a hair under 1e-5 and 1e-4,
 * and a fleet mixing Go operators and this one must see the same floats.
 */
const workqueueBuckets: number[] = [];
for (let bound = 10e-9; workqueueBuckets.length < 12; bound *= 10) workqueueBuckets.push(bound);

export const reconcileTotal = new Counter({
  name: "controller_runtime_reconcile_total",
  help: "Total number of reconciliations per controller",
  labelNames: ["controller", "result"] as const,
  registers: [registry],
});

export const reconcileErrors = new Counter({
  name: "controller_runtime_reconcile_errors_total",
  help: "Total number of reconciliation errors per controller",
  labelNames: ["controller"] as const,
  registers: [registry],
});

export const terminalReconcileErrors = new Counter({
  name: "controller_runtime_terminal_reconcile_errors_total",
  help: "Total number of terminal reconciliation errors per controller",
  labelNames: ["controller"] as const,
  registers: [registry],
});

export const reconcilePanics = new Counter({
  name: "controller_runtime_reconcile_panics_total",
  help: "Total number of reconciliation panics per controller",
  labelNames: ["controller"] as const,
  registers: [registry],
});

export const reconcileTime = new Histogram({
  name: "controller_runtime_reconcile_time_seconds",
  help: "Length of time per reconciliation per controller",
  labelNames: ["controller"] as const,
  buckets: RECONCILE_TIME_BUCKETS,
  registers: [registry],
});

export const reconcileTimeouts = new Counter({
  name: "controller_runtime_reconcile_timeouts_total",
  help: "Total number of reconciliation timeouts per controller",
  labelNames: ["controller"] as const,
  registers: [registry],
});

export const maxConcurrentReconciles = new Gauge({
  name: "controller_runtime_max_concurrent_reconciles",
  help: "Maximum number of concurrent reconciles per controller",
  labelNames: ["controller"] as const,
  registers: [registry],
});

export const activeWorkers = new Gauge({
  name: "controller_runtime_active_workers",
  help: "Number of currently used workers per controller",
  labelNames: ["controller"] as const,
  registers: [registry],
});

/**
 * controller-runtime labels depth by priority too; a queue without priorities reports "".
 */
export const workqueueDepth = new Gauge({
  name: "workqueue_depth",
  help: "Current depth of workqueue by workqueue and priority",
  labelNames: ["name", "controller", "priority"] as const,
  registers: [registry],
});

export const workqueueAdds = new Counter({
  name: "workqueue_adds_total",
  help: "Total number of adds handled by workqueue",
  labelNames: ["name", "controller"] as const,
  registers: [registry],
});

export const workqueueQueueDuration = new Histogram({
  name: "workqueue_queue_duration_seconds",
  help: "How long in seconds an item stays in workqueue before being requested",
  labelNames: ["name", "controller"] as const,
  buckets: workqueueBuckets,
  registers: [registry],
});

export const workqueueWorkDuration = new Histogram({
  name: "workqueue_work_duration_seconds",
  help: "How long in seconds processing an item from workqueue takes.",
  labelNames: ["name", "controller"] as const,
  buckets: workqueueBuckets,
  registers: [registry],
});

export const workqueueUnfinishedWork = new Gauge({
  name: "workqueue_unfinished_work_seconds",
  help: "How many seconds of work has been done that is in progress and hasn't been observed " +
    "by work_duration. Large values indicate stuck threads. One can deduce the number of stuck " +
    "threads by observing the rate at which this increases.",
  labelNames: ["name", "controller"] as const,
  registers: [registry],
});

export const workqueueLongestRunningProcessor = new Gauge({
  name: "workqueue_longest_running_processor_seconds",
  help: "How many seconds has the longest running processor for workqueue been running.",
  labelNames: ["name", "controller"] as const,
  registers: [registry],
});

export const workqueueRetries = new Counter({
  name: "workqueue_retries_total",
  help: "Total number of retries handled by workqueue",
  labelNames: ["name", "controller"] as const,
  registers: [registry],
});

export const leaderElectionMasterStatus = new Gauge({
  name: "leader_election_master_status",
  help: "Gauge of if the reporting system is master of the relevant lease, 0 indicates backup, " +
    "1 indicates master. 'name' is the string used to identify the lease. Please make sure to " +
    "group by name.",
  labelNames: ["name"] as const,
  registers: [registry],
});

/** Counted by the transport (kube/request_counts.ts) and added up at every scrape. */
export const restClientRequests = new Counter({
  name: "rest_client_requests_total",
  help: "Number of HTTP requests, partitioned by status code, method, and host.",
  labelNames: ["code", "method", "host"] as const,
  registers: [registry],
  collect() {
    for (const { code, method, host, count } of takeRequestCounts()) {
      this.inc({ code, method, host }, count);
    }
  },
});

/**
 * Sharded informers (this port's own; no Go counterpart): objects the client-side hash filter
 * dropped, and whether the API server applied the shardSelector to the kind's last list.
 */
export const shardFilteredObjects = new Counter({
  name: "cocoon_operator_shard_filtered_objects_total",
  help: "List items and watch events a sharded informer dropped because their namespace is " +
    "outside the replica's hash ranges",
  labelNames: ["resource"] as const,
  registers: [registry],
});

export const shardServerFiltered = new Gauge({
  name: "cocoon_operator_shard_server_filtered",
  help: "1 when the API server applied the shardSelector to the resource's last list " +
    "(shardInfo echoed), 0 when it ignored it and the informer filters alone",
  labelNames: ["resource"] as const,
  registers: [registry],
});

// controller-runtime installs the process collector on its registry; so does this port.
registerProcessMetrics(registry);
