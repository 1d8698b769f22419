/**
 * A small Prometheus client: the counter, gauge and histogram families the operator serves, one
 * registry per /metrics endpoint, and the text exposition format 0.0.4. It replaces prom-client
 * 15.1.3 (whose import alone cost ~105 ms of start-up and ~14 MiB RSS, README "Dependencies")
 * and prints exactly what prom-client printed for these types (golden_test.ts).
 *
 * @module
 */
export { Counter, type CounterChild, type CounterConfiguration } from "./counter.ts";
export { Gauge, type GaugeChild, type GaugeConfiguration } from "./gauge.ts";
export { Histogram, type HistogramChild, type HistogramConfiguration } from "./histogram.ts";
export { Registry } from "./registry.ts";
export { formatValue, PROMETHEUS_CONTENT_TYPE } from "./exposition.ts";
export type {
  LabelValues,
  Metric,
  MetricConfiguration,
  MetricSnapshot,
  MetricType,
  MetricValue,
} from "./metric.ts";
