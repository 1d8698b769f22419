/**
 * A gauge: a value per label set that is set, raised and lowered. A family without labels starts
 * with its zero sample.
 *
 * @module
 */
import { type FamilyConfiguration, ValueFamily } from "./family.ts";
import { checkLabels, isLabels, type LabelValues } from "./metric.ts";

/** Gauge options; collect runs at every scrape before the samples are read. */
export type GaugeConfiguration<L extends string> = FamilyConfiguration<L, Gauge<L>>;

/** One series of a gauge with its labels fixed. */
export interface GaugeChild {
  inc(value?: number): void;
  dec(value?: number): void;
  set(value: number): void;
}

/** A family whose values go up and down (Prometheus type `gauge`). */
export class Gauge<L extends string = string> extends ValueFamily<L, Gauge<L>> {
  readonly type = "gauge" as const;

  /** Sets the series of labels (none: the unlabelled series) to value. */
  set(labels: LabelValues<L> | number, value?: number): void {
    const series = isLabels(labels) ? labels : {};
    const v = isLabels(labels) ? value : labels;
    if (typeof v !== "number") throw new TypeError(`metric ${this.name}: ${v} is not a number`);
    checkLabels(this.name, this.labelNames, series);
    this.replace(series, v);
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

  #add(labels: LabelValues<L> | number | undefined, value: number | undefined, sign: 1 | -1): void {
    const series = isLabels(labels) ? labels : {};
    const v = (isLabels(labels) ? value : labels) ?? 1;
    if (typeof v !== "number") throw new TypeError(`metric ${this.name}: ${v} is not a number`);
    checkLabels(this.name, this.labelNames, series);
    this.add(series, sign * v);
  }
}
