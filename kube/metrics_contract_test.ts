/**
 * The runtime families against controller-runtime v0.23.3 / client-go as the Go operator serves
 * them: name, type, label names and buckets, written down from reading those sources.
 */
import assert from "node:assert/strict";
import type { Metric } from "./prom_client.ts";
import { registry } from "./metrics.ts";

type Kind = "counter" | "gauge" | "histogram";

const CTL = ["controller"];
const QUEUE = ["name", "controller"];

/**
 * client_golang's ExponentialBuckets(10e-9, 10, 12) multiplies step by step, so two bounds are a
 * hair under the round number; a fleet mixing Go and this port must see the same floats.
 */
const WORKQUEUE_BUCKETS = [
  1e-8,
  1e-7,
  1e-6,
  9.999999999999999e-6,
  9.999999999999999e-5,
  0.001,
  0.01,
  0.1,
  1,
  10,
  100,
  1000,
];

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

const RUNTIME_FAMILIES: [string, Kind, string[], number[]?][] = [
  ["controller_runtime_reconcile_total", "counter", ["controller", "result"]],
  ["controller_runtime_reconcile_errors_total", "counter", CTL],
  ["controller_runtime_terminal_reconcile_errors_total", "counter", CTL],
  ["controller_runtime_reconcile_panics_total", "counter", CTL],
  ["controller_runtime_reconcile_time_seconds", "histogram", CTL, RECONCILE_TIME_BUCKETS],
  ["controller_runtime_reconcile_timeouts_total", "counter", CTL],
  ["controller_runtime_max_concurrent_reconciles", "gauge", CTL],
  ["controller_runtime_active_workers", "gauge", CTL],
  ["workqueue_depth", "gauge", ["name", "controller", "priority"]],
  ["workqueue_adds_total", "counter", QUEUE],
  ["workqueue_queue_duration_seconds", "histogram", QUEUE, WORKQUEUE_BUCKETS],
  ["workqueue_work_duration_seconds", "histogram", QUEUE, WORKQUEUE_BUCKETS],
  ["workqueue_unfinished_work_seconds", "gauge", QUEUE],
  ["workqueue_longest_running_processor_seconds", "gauge", QUEUE],
  ["workqueue_retries_total", "counter", QUEUE],
  ["leader_election_master_status", "gauge", ["name"]],
  ["rest_client_requests_total", "counter", ["code", "method", "host"]],
];

function shape(metric: Metric): { labels: string[]; buckets?: number[] } {
  const m = metric as unknown as { labelNames?: unknown; upperBounds?: unknown };
  const labels = Array.isArray(m.labelNames) ? m.labelNames.map(String) : [];
  const buckets = Array.isArray(m.upperBounds) ? m.upperBounds.map(Number) : undefined;
  return { labels, ...(buckets ? { buckets } : {}) };
}

Deno.test("runtime metrics contract: controller-runtime's families, types, labels and buckets", async () => {
  const json = await registry.getMetricsAsJSON();
  for (const [name, kind, labels, buckets] of RUNTIME_FAMILIES) {
    const metric = registry.getSingleMetric(name);
    assert.ok(metric, `${name} registered`);
    assert.equal(String(json.find((m) => m.name === name)?.type), kind, `${name} type`);
    assert.deepEqual(shape(metric), { labels, ...(buckets ? { buckets } : {}) }, name);
  }
});
