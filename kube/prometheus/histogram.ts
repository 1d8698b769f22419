/**
 * A histogram: per label set, cumulative counts of observations at or below each upper bound,
 * their sum and their count. Served as `_bucket` samples (`le` first, then the series' labels,
 * `+Inf` last), `_sum` and `_count`.
 *
 * @module
 */
import { Family, type FamilyConfiguration } from "./family.ts";
import {
  checkLabels,
  isLabels,
  type LabelValues,
  type MetricSnapshot,
  type MetricValue,
  seriesKey,
} from "./metric.ts";

/** prom-client's (and client_golang's) default buckets. */
const DEFAULT_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];

/** Histogram options: buckets are the upper bounds, ascending. */
export interface HistogramConfiguration<L extends string>
  extends FamilyConfiguration<L, Histogram<L>> {
  buckets?: readonly number[];
}

/** One series of a histogram with its labels fixed. */
export interface HistogramChild {
  observe(value: number): void;
}

interface Series<L extends string> {
  labels: LabelValues<L>;
  /** Observations per bucket (not cumulative), by bound index. */
  counts: number[];
  sum: number;
  count: number;
}

/** A distribution family (Prometheus type `histogram`). */
export class Histogram<L extends string = string> extends Family<L, Histogram<L>> {
  readonly type = "histogram" as const;
  /** The buckets' upper bounds, without +Inf. */
  readonly upperBounds: readonly number[];
  #series = new Map<string, Series<L>>();

  constructor(config: HistogramConfiguration<L>) {
    super(config);
    if (this.labelNames.some((l) => l === "le")) {
      throw new Error(`metric ${config.name}: "le" is reserved for the bucket bound`);
    }
    this.upperBounds = Object.freeze([...(config.buckets ?? DEFAULT_BUCKETS)]);
    // Unlike reset(), construction publishes an unlabelled histogram's empty series.
    if (this.labelNames.length === 0) this.zero({});
    this.join(config.registers);
  }

  /** Records value in the series of labels (none: the unlabelled series). */
  observe(labels: LabelValues<L> | number, value?: number): void {
    const series = isLabels(labels) ? labels : {};
    const v = isLabels(labels) ? value : labels;
    checkLabels(this.name, this.labelNames, series);
    if (typeof v !== "number" || !Number.isFinite(v)) {
      throw new TypeError(`metric ${this.name}: ${v} is not a valid number`);
    }
    const key = seriesKey(this.sortedNames, series);
    let s = this.#series.get(key);
    if (!s) {
      s = this.#empty(series);
      this.#series.set(key, s);
    }
    const bucket = this.upperBounds.findIndex((bound) => v <= bound);
    s.sum += v;
    s.count += 1;
    if (bucket >= 0) s.counts[bucket] += 1;
  }

  /** Publishes the series of labels with every count at 0 (replacing what it held). */
  zero(labels: LabelValues<L>): void {
    this.#series.set(seriesKey(this.sortedNames, labels), this.#empty(labels));
  }

  /** The series of labels, for repeated observations. */
  labels(labels: LabelValues<L>): HistogramChild {
    checkLabels(this.name, this.labelNames, labels);
    return { observe: (value: number) => this.observe(labels, value) };
  }

  /** Drops every series, the unlabelled one included. */
  reset(): void {
    this.#series = new Map();
  }

  /** Runs collect, then returns the `_bucket`, `_sum` and `_count` samples of every series. */
  async get(): Promise<MetricSnapshot<L | "le">> {
    await this.collect();
    const values: MetricValue<L | "le">[] = [];
    const bucketName = `${this.name}_bucket`;
    for (const s of this.#series.values()) {
      // The mapped label types do not widen through generics; the shapes are right by construction.
      const labels = (le?: number | "+Inf") =>
        (le === undefined ? { ...s.labels } : { le, ...s.labels }) as LabelValues<L | "le">;
      let cumulative = 0;
      this.upperBounds.forEach((le, i) => {
        cumulative += s.counts[i];
        values.push({ value: cumulative, metricName: bucketName, labels: labels(le) });
      });
      values.push({ value: s.count, metricName: bucketName, labels: labels("+Inf") });
      values.push({ value: s.sum, metricName: `${this.name}_sum`, labels: labels() });
      values.push({ value: s.count, metricName: `${this.name}_count`, labels: labels() });
    }
    return { name: this.name, help: this.help, type: this.type, values, aggregator: "sum" };
  }

  #empty(labels: LabelValues<L>): Series<L> {
    return { labels: { ...labels }, counts: this.upperBounds.map(() => 0), sum: 0, count: 0 };
  }
}
