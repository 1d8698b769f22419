/**
 * A counter: a value per label set that only goes up. A family without labels starts with its
 * zero sample, so it is served before the first increment.
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

/** Counter options; collect runs at every scrape before the samples are read. */
export interface CounterConfiguration<L extends string> extends MetricConfiguration<L> {
  collect?: (this: Counter<L>) => void | Promise<void>;
}

/** One series of a counter with its labels fixed. */
export interface CounterChild {
  inc(value?: number): void;
}

/** A monotonically increasing family (Prometheus type `counter`). */
export class Counter<L extends string = string> {
  readonly type = "counter" as const;
  readonly name: string;
  readonly help: string;
  readonly labelNames: readonly L[];
  readonly #sortedNames: readonly string[];
  readonly #collect?: (this: Counter<L>) => void | Promise<void>;
  #series = new Map<string, MetricValue<L>>();

  constructor(config: CounterConfiguration<L>) {
    checkConfiguration(config);
    this.name = config.name;
    this.help = config.help;
    this.labelNames = [...(config.labelNames ?? [])];
    this.#sortedNames = [...this.labelNames].sort();
    this.#collect = config.collect;
    this.reset();
    for (const reg of config.registers ?? []) reg.registerMetric(this);
  }

  /** Adds value (default 1) to the series of labels (none: the unlabelled series). */
  inc(labels?: LabelValues<L> | number, value?: number): void {
    let series: LabelValues<L> = {};
    if (isLabels(labels)) {
      checkLabels(this.name, this.labelNames, labels);
      series = labels;
    } else {
      value = labels;
    }
    if (value && !Number.isFinite(value)) {
      throw new TypeError(`metric ${this.name}: ${value} is not a valid number`);
    }
    if (value !== undefined && value < 0) {
      throw new Error(`metric ${this.name}: a counter cannot decrease (inc by ${value})`);
    }
    const delta = value ?? 1;
    const key = seriesKey(this.#sortedNames, series);
    const existing = this.#series.get(key);
    // The first write's labels object (its key order) is the one the exposition prints.
    if (existing) existing.value += delta;
    else this.#series.set(key, { value: delta, labels: { ...series } });
  }

  /** The series of labels, for repeated increments. */
  labels(labels: LabelValues<L>): CounterChild {
    return { inc: (value?: number) => this.inc(labels, value) };
  }

  /** Drops every series; an unlabelled counter goes back to 0. */
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
}
