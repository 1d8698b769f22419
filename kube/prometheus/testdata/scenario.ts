/**
 * One registry with every metric shape the operator uses, built against a metrics library given
 * as a parameter: prom-client 15.1.3 recorded the golden files beside this module once
 * (testdata/exposition.txt, testdata/metrics.json), and golden_test.ts replays it on
 * kube/prometheus so the two must agree byte for byte. Change it only together with the golden
 * files, recorded from prom-client again (the generator is in git history: tests/tools/
 * record_prometheus_golden.ts, removed with prom-client).
 *
 * @module
 */

/** A label set as both libraries take it. */
export type Labels = Record<string, string | number>;

/** What the scenario needs of a counter. */
export interface ScenarioCounter {
  inc(labels?: Labels | number, value?: number): void;
  labels(labels: Labels): { inc(value?: number): void };
  reset(): void;
}

/** What the scenario needs of a gauge. */
export interface ScenarioGauge {
  set(labels: Labels | number, value?: number): void;
  inc(labels?: Labels | number, value?: number): void;
  dec(labels?: Labels | number, value?: number): void;
  labels(labels: Labels): { inc(v?: number): void; dec(v?: number): void; set(v: number): void };
}

/** What the scenario needs of a histogram. */
export interface ScenarioHistogram {
  observe(labels: Labels | number, value?: number): void;
  labels(labels: Labels): { observe(value: number): void };
  zero(labels: Labels): void;
}

interface Config {
  name: string;
  help: string;
  labelNames?: string[];
  registers: unknown[];
}

/** The library under test, as constructors. */
export interface ScenarioLibrary<R> {
  Registry: new () => R;
  Counter: new (c: Config & { collect?: (this: ScenarioCounter) => void }) => ScenarioCounter;
  Gauge: new (
    c: Config & { collect?: (this: ScenarioGauge) => void | Promise<void> },
  ) => ScenarioGauge;
  Histogram: new (c: Config & { buckets?: number[] }) => ScenarioHistogram;
}

/** client_golang's ExponentialBuckets(10e-9, 10, 12), by repeated multiplication. */
function exponentialBuckets(): number[] {
  const out: number[] = [];
  for (let b = 10e-9; out.length < 12; b *= 10) out.push(b);
  return out;
}

/** Label values that need escaping in the text format, and some that do not. */
export const AWKWARD_VALUES = [
  'quote"inside',
  "back\\slash",
  "new\nline",
  'all\\three"\n',
  "ünïcødé ☃",
  "",
];

/** Builds the registry and writes every sample; returns the registry. */
export function buildScenario<R>(lib: ScenarioLibrary<R>): R {
  const reg = new lib.Registry();
  const registers = [reg];

  // Counters: no labels (never touched prints 0), with labels, with label values to escape.
  new lib.Counter({ name: "untouched_total", help: "Never incremented.", registers });
  const plain = new lib.Counter({ name: "plain_total", help: "Plain counter.", registers });
  plain.inc();
  plain.inc(2.5);
  plain.inc(0);
  const labelled = new lib.Counter({
    name: "labelled_total",
    help: "Counter with labels.",
    labelNames: ["controller", "result"],
    registers,
  });
  labelled.inc({ controller: "a", result: "success" });
  labelled.inc({ result: "error", controller: "a" }, 3); // key order other than labelNames
  labelled.labels({ controller: "b", result: "success" }).inc(0);
  labelled.labels({ controller: "b", result: "success" }).inc(7);
  labelled.inc({ controller: "a", result: "success" }, 0.1);
  labelled.inc({ controller: "a", result: "success" }, 0.2);
  labelled.inc({ controller: 42, result: "numeric" }); // a number as a label value
  new lib.Counter({
    name: "empty_labelled_total",
    help: "Counter with labels and no series yet.",
    labelNames: ["kind"],
    registers,
  });
  const escaped = new lib.Counter({
    name: "escaped_total",
    help: 'Help with a back\\slash, a new\nline and a "quote".',
    labelNames: ["value"],
    registers,
  });
  for (const value of AWKWARD_VALUES) escaped.inc({ value });

  // Counter computed at scrape (the process CPU family's pattern).
  let cpu = 0;
  new lib.Counter({
    name: "collected_total",
    help: "Counter set at scrape.",
    registers,
    collect() {
      cpu += 1.25;
      this.reset();
      this.inc(cpu);
    },
  });

  // Gauges: numbers of every kind, label order changes on set, inc/dec through labels().
  const numbers = new lib.Gauge({
    name: "numbers",
    help: "Gauge with one series per number format.",
    labelNames: ["kind"],
    registers,
  });
  const samples: [string, number][] = [
    ["zero", 0],
    ["negative_zero", -0],
    ["integer", 42],
    ["negative", -7],
    ["float", 0.1 + 0.2],
    ["tiny", 1e-7],
    ["small", 0.000001],
    ["big", 1e21],
    ["below_big", 123456789012345680000],
    ["max_safe", Number.MAX_SAFE_INTEGER],
    ["epoch_seconds", 1764606000.123],
    ["nan", NaN],
    ["plus_inf", Infinity],
    ["minus_inf", -Infinity],
  ];
  for (const [kind, value] of samples) numbers.set({ kind }, value);
  const moved = new lib.Gauge({
    name: "moved",
    help: "Gauge written with its labels in changing order.",
    labelNames: ["name", "controller", "priority"],
    registers,
  });
  moved.set({ name: "q", controller: "q", priority: "" }, 1);
  moved.set({ priority: "", controller: "q", name: "q" }, 2); // set replaces the label object
  moved.inc({ name: "r", controller: "r", priority: "1" });
  moved.inc({ priority: "1", name: "r", controller: "r" }, 4); // inc keeps the first one
  const child = moved.labels({ name: "s", controller: "s", priority: "" });
  child.inc();
  child.inc(0);
  child.dec(3);
  child.set(5);
  child.dec();
  new lib.Gauge({ name: "untouched_level", help: "Gauge never set.", registers });
  const plainGauge = new lib.Gauge({ name: "plain_level", help: "Gauge inc/dec.", registers });
  plainGauge.inc();
  plainGauge.inc(10);
  plainGauge.dec(0.5);
  new lib.Gauge({
    name: "collected_level",
    help: "Gauge set at scrape.",
    registers,
    collect() {
      this.set(1234567);
    },
  });
  new lib.Gauge({
    name: "async_collected_level",
    help: "Gauge set at scrape by an async collect.",
    labelNames: ["resource"],
    registers,
    async collect() {
      await Promise.resolve();
      this.set({ resource: "pods" }, 3);
      this.set({ resource: "leases" }, 0);
    },
  });

  // Histograms: custom buckets, values on and between bounds, above all, zero(), exponential.
  const times = new lib.Histogram({
    name: "phase_seconds",
    help: "Histogram with custom buckets.",
    labelNames: ["result"],
    buckets: [10, 30, 60, 180, 600, 1800],
    registers,
  });
  for (const v of [0, 10, 10.5, 30, 599.9, 600, 1800, 1800.1, 1e9]) {
    times.observe({ result: "ok" }, v);
  }
  times.labels({ result: "timeout" }).observe(600);
  times.zero({ result: "never" });
  const queue = new lib.Histogram({
    name: "queue_seconds",
    help: "Histogram with client-go's exponential buckets.",
    labelNames: ["name", "controller"],
    buckets: exponentialBuckets(),
    registers,
  });
  queue.zero({ name: "idle", controller: "idle" });
  const busy = queue.labels({ name: "busy", controller: "busy" });
  for (const v of [5e-9, 1e-8, 9.999999999999999e-6, 1e-5, 0.0015, 0.1, 2, 999, 1000, 5000]) {
    busy.observe(v);
  }
  queue.observe({ controller: "swapped", name: "swapped" }, 0.05);
  new lib.Histogram({
    name: "untouched_seconds",
    help: "Histogram without labels, never observed.",
    registers,
  });
  const plainHistogram = new lib.Histogram({
    name: "plain_seconds",
    help: "Histogram without labels, default buckets.",
    registers,
  });
  plainHistogram.observe(0.3);
  plainHistogram.observe(0);
  const escapedHistogram = new lib.Histogram({
    name: "escaped_seconds",
    help: "Histogram\\with\nescapes.",
    labelNames: ["value"],
    buckets: [1],
    registers,
  });
  for (const value of AWKWARD_VALUES) escapedHistogram.observe({ value }, 0.5);

  return reg;
}

/**
 * JSON with the numbers JSON cannot hold (NaN, ±Infinity, -0) spelled as strings, so the golden
 * file keeps them.
 */
export function toGoldenJson(value: unknown): string {
  return JSON.stringify(value, (_key, v: unknown) => {
    if (typeof v !== "number") return v;
    if (Number.isNaN(v)) return "NaN";
    if (v === Infinity) return "Infinity";
    if (v === -Infinity) return "-Infinity";
    if (Object.is(v, -0)) return "-0";
    return v;
  }, 2) + "\n";
}
