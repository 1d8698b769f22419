/**
 * What the three metric families share: their name, help and label names (checked at
 * construction), the collect callback run at every scrape, joining registries; and, for
 * counters and gauges, one value per label set.
 *
 * @module
 */
import {
  checkConfiguration,
  type LabelValues,
  type Metric,
  type MetricConfiguration,
  type MetricSink,
  type MetricSnapshot,
  type MetricType,
  type MetricValue,
  seriesKey,
} from "./metric.ts";

/** A family's configuration with its collect callback, called with the family as `this`. */
export interface FamilyConfiguration<L extends string, Self> extends MetricConfiguration<L> {
  collect?: (this: Self) => void | Promise<void>;
}

/** The identity and scrape hook of a family; Self is the concrete class (collect's `this`). */
export abstract class Family<L extends string, Self> {
  abstract readonly type: MetricType;
  readonly name: string;
  readonly help: string;
  readonly labelNames: readonly L[];
  /** The label names sorted, for series keys that do not depend on the labels' key order. */
  protected readonly sortedNames: readonly string[];
  readonly #collect?: (this: Self) => void | Promise<void>;

  constructor(config: FamilyConfiguration<L, Self>) {
    checkConfiguration(config);
    this.name = config.name;
    this.help = config.help;
    this.labelNames = [...(config.labelNames ?? [])];
    this.sortedNames = [...this.labelNames].sort();
    this.#collect = config.collect;
  }

  /** Runs the collect callback, if any (before every scrape's samples are read). */
  protected async collect(): Promise<void> {
    // The subclass is Self by construction; `this` cannot be typed as it here.
    if (this.#collect) await this.#collect.call(this as unknown as Self);
  }

  /** Joins the registries a configuration names; the subclass calls it once it is complete. */
  protected join(registers: readonly MetricSink[] | undefined): void {
    for (const reg of registers ?? []) reg.registerMetric(this as unknown as Metric);
  }
}

/** A family with one number per label set: counters and gauges. */
export abstract class ValueFamily<L extends string, Self> extends Family<L, Self> {
  #series = new Map<string, MetricValue<L>>();

  constructor(config: FamilyConfiguration<L, Self>) {
    super(config);
    this.reset();
    this.join(config.registers);
  }

  /** Drops every series; a family without labels goes back to its 0 sample. */
  reset(): void {
    this.#series = new Map();
    if (this.labelNames.length === 0) this.#series.set(seriesKey([], {}), { value: 0, labels: {} });
  }

  /** Runs collect, then returns the samples. */
  async get(): Promise<MetricSnapshot<L>> {
    await this.collect();
    return {
      help: this.help,
      name: this.name,
      type: this.type,
      values: [...this.#series.values()].map((v) => ({ value: v.value, labels: { ...v.labels } })),
      aggregator: "sum",
    };
  }

  /**
   * Adds delta to the series of labels. The first write's labels object (its key order) is the
   * one the exposition prints, as prom-client's.
   */
  protected add(labels: LabelValues<L>, delta: number): void {
    const key = seriesKey(this.sortedNames, labels);
    const existing = this.#series.get(key);
    if (existing) existing.value += delta;
    else this.#series.set(key, { value: delta, labels: { ...labels } });
  }

  /** Replaces the series of labels, labels object included (prom-client prints the latest). */
  protected replace(labels: LabelValues<L>, value: number): void {
    this.#series.set(seriesKey(this.sortedNames, labels), { value, labels: { ...labels } });
  }
}
