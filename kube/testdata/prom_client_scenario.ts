/**
 * One registry with every metric shape the operator uses and the inputs the text format has to
 * escape or spell out (quotes, backslashes and newlines in label values and help text, NaN,
 * ±Inf, 1e-7, empty families, label objects in changing key order). prom_client_exposition.txt
 * beside it is what prom-client 15.1.3 printed for it; kube/prom_client_test.ts compares.
 *
 * @module
 */
import { Counter, Gauge, Histogram, Registry } from "../prom_client.ts";

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
export function buildScenario(): Registry {
  const reg = new Registry();
  const registers = [reg];

  // Counters: no labels (never touched prints 0), with labels, with label values to escape.
  new Counter({ name: "untouched_total", help: "Never incremented.", registers });
  const plain = new Counter({ name: "plain_total", help: "Plain counter.", registers });
  plain.inc();
  plain.inc(2.5);
  plain.inc(0);
  const labelled = new Counter({
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
  new Counter({
    name: "empty_labelled_total",
    help: "Counter with labels and no series yet.",
    labelNames: ["kind"],
    registers,
  });
  const escaped = new Counter({
    name: "escaped_total",
    help: 'Help with a back\\slash, a new\nline and a "quote".',
    labelNames: ["value"],
    registers,
  });
  for (const value of AWKWARD_VALUES) escaped.inc({ value });

  // Counter computed at scrape (the process CPU family's pattern).
  let cpu = 0;
  new Counter({
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
  const numbers = new Gauge({
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
  const moved = new Gauge({
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
  new Gauge({ name: "untouched_level", help: "Gauge never set.", registers });
  const plainGauge = new Gauge({ name: "plain_level", help: "Gauge inc/dec.", registers });
  plainGauge.inc();
  plainGauge.inc(10);
  plainGauge.dec(0.5);
  new Gauge({
    name: "collected_level",
    help: "Gauge set at scrape.",
    registers,
    collect() {
      this.set(1234567);
    },
  });
  new Gauge({
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
  const times = new Histogram({
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
  const queue = new Histogram({
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
  new Histogram({
    name: "untouched_seconds",
    help: "Histogram without labels, never observed.",
    registers,
  });
  const plainHistogram = new Histogram({
    name: "plain_seconds",
    help: "Histogram without labels, default buckets.",
    registers,
  });
  plainHistogram.observe(0.3);
  plainHistogram.observe(0);
  const escapedHistogram = new Histogram({
    name: "escaped_seconds",
    help: "Histogram\\with\nescapes.",
    labelNames: ["value"],
    buckets: [1],
    registers,
  });
  for (const value of AWKWARD_VALUES) escapedHistogram.observe({ value }, 0.5);

  return reg;
}
