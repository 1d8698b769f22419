/**
 * The monitoring contract: the operator's families (name, type, label names, buckets) as the Go
 * operator's metrics package defines them, checked against what register() installs and against
 * the table in docs/observability.md. The list below was written down from reading the Go
 * source (metrics/metrics.go at the mirrored HEAD); a change on either side must be deliberate.
 */
import assert from "node:assert/strict";
import { type Metric, Registry } from "../kube/prom_client.ts";
import { register } from "./metrics.ts";

interface Family {
  name: string;
  type: "counter" | "histogram";
  labels: string[];
  buckets?: number[];
}

const SET_LABELS = ["namespace", "cocoonset"];
const PHASE_BUCKETS = [10, 30, 60, 180, 600, 1800];

/** The Go operator's families, in its registration order. */
const GO_FAMILIES: Family[] = [
  { name: "cocoon_operator_subagent_rebuild_total", type: "counter", labels: SET_LABELS },
  { name: "cocoon_operator_subagent_dead_letter_total", type: "counter", labels: SET_LABELS },
  {
    name: "cocoon_operator_hibernate_phase_duration_seconds",
    type: "histogram",
    labels: ["result"],
    buckets: PHASE_BUCKETS,
  },
  {
    name: "cocoon_operator_wake_phase_duration_seconds",
    type: "histogram",
    labels: ["result"],
    buckets: PHASE_BUCKETS,
  },
  {
    name: "cocoon_operator_lifecycle_state_failed_observed_total",
    type: "counter",
    labels: ["phase"],
  },
  { name: "cocoon_operator_slot_release_pods_deleted_total", type: "counter", labels: SET_LABELS },
  {
    name: "cocoon_operator_slot_release_wake_total",
    type: "counter",
    labels: [...SET_LABELS, "placement"],
  },
  {
    name: "cocoon_operator_slot_release_wake_unschedulable_total",
    type: "counter",
    labels: SET_LABELS,
  },
];

/** The label names and (histograms) bucket bounds a metric instance carries. */
function shape(metric: Metric): { labels: string[]; buckets?: number[] } {
  const m = metric as unknown as { labelNames?: unknown; upperBounds?: unknown };
  const labels = Array.isArray(m.labelNames) ? m.labelNames.map(String) : [];
  const buckets = Array.isArray(m.upperBounds) ? m.upperBounds.map(Number) : undefined;
  return { labels, ...(buckets ? { buckets } : {}) };
}

Deno.test("metrics contract: register() installs exactly the Go operator's families", async () => {
  const reg = new Registry();
  register(reg);
  const json = await reg.getMetricsAsJSON();
  assert.deepEqual(json.map((m) => m.name).sort(), GO_FAMILIES.map((f) => f.name).sort());
  for (const want of GO_FAMILIES) {
    const metric = reg.getSingleMetric(want.name);
    assert.ok(metric, want.name);
    const got = json.find((m) => m.name === want.name)!;
    assert.equal(String(got.type), want.type, `${want.name} type`);
    assert.deepEqual(shape(metric), {
      labels: want.labels,
      ...(want.buckets ? { buckets: want.buckets } : {}),
    }, want.name);
  }
});

Deno.test("metrics contract: docs/observability.md's table lists each family with its type and labels", async () => {
  const whole = await Deno.readTextFile(new URL("../docs/observability.md", import.meta.url));
  // The Go families' table; the sharding families (this port's own) have their table below it.
  const text = whole.slice(0, whole.indexOf("### Sharding"));
  const rows = new Map<string, { type: string; labels: string[] }>();
  for (const m of text.matchAll(/^\| `(cocoon_operator_\w+)` +\| (\w+) +\| ([^|]*)\|/gm)) {
    const labels = [...m[3].matchAll(/`([a-z_]+)`/g)].map((l) => l[1])
      // "`result` = `ok` | `timeout`" names values after the label.
      .filter((l) => !["ok", "timeout", "hint-node", "pool"].includes(l));
    rows.set(m[1], { type: m[2], labels });
  }
  assert.deepEqual([...rows.keys()].sort(), GO_FAMILIES.map((f) => f.name).sort());
  for (const f of GO_FAMILIES) {
    assert.deepEqual(rows.get(f.name), { type: f.type, labels: f.labels }, f.name);
  }
});
