/**
 * A gauge: a value per label set that is set, raised and lowered. A family without labels starts
 * with its zero sample.
 *
 * @module
 */
import {
  checkConfiguration,
  checkLabels,
  isLabels,
  type LabelValues,
  type MetricConfiguration,
  type MetricSnapshot,
  type MetricValue,
  seriesKey,
} from "./metric.ts";

/** Gauge options; collect runs at every scrape before the samples are read. */
export interface GaugeConfiguration<L extends string> extends MetricConfiguration<L> {
  collect?: (this: Gauge<L>) => void | Promise<void>;
}

/** One series of a gauge with its labels fixed. */
export interface GaugeChild {
  inc(value?: number): void;
  dec(value?: number): void;
  set(value: number): void;
}

/** A family whose values go up and down (Prometheus type `gauge`). */
export class Gauge<L extends string = string> {
  readonly type = "gauge" as const;
  readonly name: string;
  readonly help: string;
  readonly labelNames: readonly L[];
  readonly #sortedNames: readonly string[];
  readonly #collect?: (this: Gauge<L>) => void | Promise<void>;
  #series = new Map<string, MetricValue<L>>();

  constructor(config: GaugeConfiguration<L>) {
    checkConfiguration(config);
    this.name = config.name;
    this.help = config.help;
    this.labelNames = [...(config.labelNames ?? [])];
    this.#sortedNames = [...this.labelNames].sort();
    this.#collect = config.collect;
    this.reset();
    for (const reg of config.registers ?? []) reg.registerMetric(this);
  }

  /** Sets the series of labels (none: the unlabelled series) to value. */
  set(labels: LabelValues<L> | number, value?: number): void {
    const series = isLabels(labels) ? labels : {};
    const v = isLabels(labels) ? value : labels;
    if (typeof v !== "number") throw new TypeError(`metric ${this.name}: ${v} is not a number`);
    checkLabels(this.name, this.labelNames, series);
    // A set replaces the series, labels object included (prom-client prints the latest order).
    this.#series.set(seriesKey(this.#sortedNames, series), { value: v, labels: { ...series } });
  }

  /** Adds value (default 1). */
  inc(labels?: LabelValues<L> | number, value?: number): void {
    this.#add(labels, value, 1);
  }

  /** Subtracts value (default 1). */
  dec(labels?: LabelValues<L> | number, value?: number): void {
    this.#add(labels, value, -1);
  }

  /** The series of labels, for repeated writes. */
  labels(labels: LabelValues<L>): GaugeChild {
    checkLabels(this.name, this.labelNames, labels);
    return {
      inc: (value?: number) => this.inc(labels, value),
      dec: (value?: number) => this.dec(labels, value),
      set: (value: number) => this.set(labels, value),
    };
  }

  /** Drops every series; an unlabelled gauge goes back to 0. */
  reset(): void {
    this.#series = new Map();
    if (this.labelNames.length === 0) this.#series.set(seriesKey([], {}), { value: 0, labels: {} });
  }

  /** Runs collect, then returns the samples. */
  async get(): Promise<MetricSnapshot<L>> {
    if (this.#collect) await this.#collect.call(this);
    return {
      help: this.help,
      name: this.name,
      type: this.type,
      values: [...this.#series.values()].map((v) => ({ value: v.value, labels: { ...v.labels } })),
      aggregator: "sum",
    };
  }

  #add(labels: LabelValues<L> | number | undefined, value: number | undefined, sign: 1 | -1): void {
    const series = isLabels(labels) ? labels : {};
    const v = (isLabels(labels) ? value : labels) ?? 1;
    if (typeof v !== "number") throw new TypeError(`metric ${this.name}: ${v} is not a number`);
    checkLabels(this.name, this.labelNames, series);
    const key = seriesKey(this.#sortedNames, series);
    const existing = this.#series.get(key);
    if (existing) existing.value += sign * v;
    else this.#series.set(key, { value: sign * v, labels: { ...series } });
  }
}
