/**
 * The Prometheus text exposition format 0.0.4, written exactly as prom-client 15.1.3 writes it
 * (kube/prometheus/testdata/exposition.txt is its recorded output): HELP and TYPE lines, then one
 * line per sample with the labels in the order the series was first written with (a histogram's
 * `le` first), families separated by an empty line.
 *
 * @module
 */
import type { MetricSnapshot } from "./metric.ts";

/** The Content-Type of the format. */
export const PROMETHEUS_CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8";

/** HELP text and names: backslash and newline are escaped (a double quote stays as it is). */
function escapeText(s: string): string {
  return s.replace(/\\/g, "\\\\").replace(/\n/g, "\\n");
}

/** Label values: backslash, newline and double quote are escaped. */
function escapeLabelValue(v: unknown): string {
  return typeof v === "string" ? escapeText(v).replace(/"/g, '\\"') : `${v}`;
}

/**
 * A sample value as prom-client prints it: JavaScript's shortest round-trip form (`1e-7`,
 * `1e+21`), `+Inf`/`-Inf`, and `Nan` for NaN (Prometheus parses the value case-insensitively).
 */
export function formatValue(value: number): string {
  if (Number.isNaN(value)) return "Nan";
  if (!Number.isFinite(value)) return value < 0 ? "-Inf" : "+Inf";
  return `${value}`;
}

/** One family's block, without the trailing newline. */
export function formatFamily(family: MetricSnapshot): string {
  const name = escapeText(family.name);
  const lines = [`# HELP ${name} ${escapeText(family.help)}`, `# TYPE ${name} ${family.type}`];
  for (const sample of family.values) {
    const labels = Object.entries(sample.labels).map(([k, v]) => `${k}="${escapeLabelValue(v)}"`);
    const labelText = labels.length > 0 ? `{${labels.join(",")}}` : "";
    lines.push(`${sample.metricName ?? name}${labelText} ${formatValue(sample.value)}`);
  }
  return lines.join("\n");
}
