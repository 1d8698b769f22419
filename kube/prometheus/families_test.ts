/**
 * What the golden files cannot show: the errors bad input gets, and label names typed from
 * `labelNames: [...] as const` at call sites (a misspelt label does not type-check).
 */
import assert from "node:assert/strict";
import { Counter, Gauge, Histogram, Registry } from "./mod.ts";

Deno.test("prometheus: a typo in a label name is a type error, and a runtime error for untyped callers", () => {
  const c = new Counter({
    name: "typed_total",
    help: "Typed labels.",
    labelNames: ["controller", "result"] as const,
  });
  c.inc({ controller: "a", result: "ok" });
  c.labels({ controller: "a" }).inc();
  // @ts-expect-error: "controler" is not one of the label names
  assert.throws(() => c.inc({ controler: "a" }), /label "controler" is not among .*controller/);
  const g = new Gauge({ name: "typed_level", help: "Typed.", labelNames: ["name"] as const });
  // @ts-expect-error: "nme" is not one of the label names
  assert.throws(() => g.labels({ nme: "x" }), /typed_level: label "nme"/);
  const h = new Histogram({ name: "typed_seconds", help: "Typed.", labelNames: ["r"] as const });
  // @ts-expect-error: "x" is not one of the label names
  assert.throws(() => h.observe({ x: "1" }, 1), /typed_seconds: label "x"/);
});

Deno.test("prometheus: values a family refuses, with the family's name", () => {
  const c = new Counter({ name: "only_up_total", help: "Up." });
  assert.throws(() => c.inc(-1), /only_up_total: a counter cannot decrease/);
  assert.throws(() => c.inc(Infinity), /only_up_total: Infinity is not a valid number/);
  const h = new Histogram({ name: "finite_seconds", help: "Finite." });
  assert.throws(() => h.observe(NaN), /finite_seconds: NaN is not a valid number/);
  assert.throws(
    () => new Histogram({ name: "le_seconds", help: "x", labelNames: ["le"] }),
    /"le" is reserved/,
  );
  assert.throws(() => new Gauge({ name: "bad-name", help: "x" }), /invalid metric name "bad-name"/);
  assert.throws(() => new Gauge({ name: "no_help", help: "" }), /no_help" has no help text/);
  assert.throws(
    () => new Gauge({ name: "bad_label", help: "x", labelNames: ["a-b"] }),
    /bad_label: invalid label name "a-b"/,
  );
});

Deno.test("prometheus: a registry holds one family per name; registering the same one again is a no-op", async () => {
  const reg = new Registry();
  const c = new Counter({ name: "once_total", help: "Once.", registers: [reg] });
  reg.registerMetric(c);
  assert.throws(
    () => new Counter({ name: "once_total", help: "Twice.", registers: [reg] }),
    /A metric with the name once_total has already been registered/,
  );
  assert.equal(reg.getSingleMetric("once_total"), c);
  assert.equal(reg.getSingleMetric("missing"), undefined);
  await assert.rejects(reg.getSingleMetricAsString("missing"), /no metric named "missing"/);
  assert.equal(
    await reg.metrics(),
    "# HELP once_total Once.\n# TYPE once_total counter\nonce_total 0\n",
  );
});

Deno.test("prometheus: reset drops labelled series, returns unlabelled ones to 0, empties a histogram", async () => {
  const g = new Gauge({ name: "r_level", help: "r" });
  g.set(5);
  g.reset();
  assert.deepEqual((await g.get()).values, [{ value: 0, labels: {} }]);
  const c = new Counter({ name: "r_total", help: "r", labelNames: ["k"] });
  c.inc({ k: "a" });
  c.reset();
  assert.deepEqual((await c.get()).values, []);
  const h = new Histogram({ name: "r_seconds", help: "r", buckets: [1] });
  h.observe(0.5);
  h.reset();
  assert.deepEqual((await h.get()).values, []);
});
