import assert from "node:assert/strict";
import { registry } from "../metrics.ts";

/**
 * Value of one series of a runtime metric, or undefined when absent. Histogram series are
 * addressed by their sample name ("…_sum", "…_count").
 */
export async function metricValue(
  name: string,
  labels: Record<string, string>,
): Promise<number | undefined> {
  const family = name.replace(/_(sum|count)$/, "");
  const metric = registry.getSingleMetric(family) ?? registry.getSingleMetric(name);
  assert.ok(metric, `metric ${name} registered`);
  const data = await metric.get();
  const match = data.values.find((v) =>
    (family === name || (v as { metricName?: string }).metricName === name) &&
    Object.entries(labels).every(([k, want]) => String(v.labels[k]) === want)
  );
  return match?.value;
}
