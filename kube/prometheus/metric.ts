/**
 * What every metric family of kube/prometheus shares: its configuration, the snapshot `get()`
 * returns (the shape prom-client 15.1.3 returns, which the tests and the exposition read), the
 * series key and the label checks.
 *
 * @module
 */

/** Label values of one series; a label left out is absent from it. */
export type LabelValues<L extends string> = Partial<Record<L, string | number>>;

/** The three family types the operator serves. */
export type MetricType = "counter" | "gauge" | "histogram";

/** One sample of a family; `metricName` names a histogram's `_bucket`, `_sum` and `_count`. */
export interface MetricValue<L extends string> {
  value: number;
  labels: LabelValues<L>;
  metricName?: string;
}

/** A family's samples at one moment, as `get()` and `Registry.getMetricsAsJSON()` return them. */
export interface MetricSnapshot<L extends string = string> {
  name: string;
  help: string;
  type: MetricType;
  values: MetricValue<L>[];
  /** How a cluster of processes would merge the family; always "sum" (prom-client's default). */
  aggregator: "sum";
}

/** A family a registry can hold and serve. */
export interface Metric {
  readonly name: string;
  readonly help: string;
  readonly type: MetricType;
  readonly labelNames: readonly string[];
  /** Runs the family's collect callback (if any), then returns its samples. */
  get(): Promise<MetricSnapshot>;
  /** Drops every series (a family without labels goes back to its zero sample). */
  reset(): void;
}

/**
 * Where a family registers itself at construction: Registry (registry.ts) is one. Declared
 * here, not imported, so this module and the registry do not import each other.
 */
export interface MetricSink {
  registerMetric(metric: Metric): void;
}

/** What the three constructors take. */
export interface MetricConfiguration<L extends string> {
  name: string;
  help: string;
  labelNames?: readonly L[];
  /** Registries to join at construction; none when left out (there is no global registry). */
  registers?: readonly MetricSink[];
}

const METRIC_NAME = /^[a-zA-Z_:][a-zA-Z0-9_:]*$/;
const LABEL_NAME = /^[a-zA-Z_][a-zA-Z0-9_]*$/;

/** Throws a clear error for a configuration prom-client would also refuse. */
export function checkConfiguration(config: MetricConfiguration<string>): void {
  if (!config.help) throw new Error(`metric ${JSON.stringify(config.name)} has no help text`);
  if (!config.name || !METRIC_NAME.test(config.name)) {
    throw new Error(`invalid metric name ${JSON.stringify(config.name)}`);
  }
  for (const label of config.labelNames ?? []) {
    if (!LABEL_NAME.test(label)) {
      throw new Error(`metric ${config.name}: invalid label name ${JSON.stringify(label)}`);
    }
  }
}

/** Throws when labels names a label the family was not declared with. */
export function checkLabels(
  family: string,
  labelNames: readonly string[],
  labels: Record<string, unknown>,
): void {
  for (const label in labels) {
    if (!labelNames.includes(label)) {
      throw new Error(
        `metric ${family}: label ${JSON.stringify(label)} is not among its label names ` +
          `[${labelNames.join(", ")}]`,
      );
    }
  }
}

/**
 * The key of a series: its label values in sorted label-name order, so the same labels given in
 * another key order (or a number for its string) find the same series.
 */
export function seriesKey(sortedNames: readonly string[], labels: Record<string, unknown>): string {
  return JSON.stringify(sortedNames.map((n) => labels[n] === undefined ? null : String(labels[n])));
}

/** The first argument of inc/set/observe is either the labels or the value. */
export function isLabels<L extends string>(
  x: LabelValues<L> | number | undefined,
): x is LabelValues<L> {
  return x !== null && typeof x === "object";
}
