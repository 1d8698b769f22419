/**
 * A counter: a value per label set that only goes up. A family without labels starts with its
 * zero sample, so it is served before the first increment.
 *
 * @module
 */
import { type FamilyConfiguration, ValueFamily } from "./family.ts";
import { checkLabels, isLabels, type LabelValues } from "./metric.ts";

/** Counter options; collect runs at every scrape before the samples are read. */
export type CounterConfiguration<L extends string> = FamilyConfiguration<L, Counter<L>>;

/** One series of a counter with its labels fixed. */
export interface CounterChild {
  inc(value?: number): void;
}

/** A monotonically increasing family (Prometheus type `counter`). */
export class Counter<L extends string = string> extends ValueFamily<L, Counter<L>> {
  readonly type = "counter" as const;

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
    this.add(series, value ?? 1);
  }

  /** The series of labels, for repeated increments. */
  labels(labels: LabelValues<L>): CounterChild {
    return { inc: (value?: number) => this.inc(labels, value) };
  }
}
