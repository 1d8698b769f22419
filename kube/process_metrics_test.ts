import assert from "node:assert/strict";
import { Registry } from "./prom_client.ts";
import { registry } from "./metrics.ts";
import { registerProcessMetrics } from "./process_metrics.ts";

/** One unlabelled sample of text exposition, or undefined when the family is absent. */
function sample(text: string, name: string): number | undefined {
  const m = new RegExp(`^${name} (\\S+)$`, "m").exec(text);
  return m ? Number(m[1]) : undefined;
}

// Go operators serve these from the process collector controller-runtime installs; dashboards
// and restart alerts read them.
Deno.test("process metrics: served on the runtime registry like controller-runtime's", async () => {
  const text = await registry.metrics();
  assert.match(text, /^# TYPE process_cpu_seconds_total counter$/m);
  assert.match(text, /^# TYPE process_resident_memory_bytes gauge$/m);
  assert.match(text, /^# TYPE process_start_time_seconds gauge$/m);
  const rss = sample(text, "process_resident_memory_bytes");
  assert.ok(rss !== undefined && rss > 1024 * 1024, `rss ${rss}`);
  const start = sample(text, "process_start_time_seconds");
  const now = Date.now() / 1000;
  assert.ok(start !== undefined && start <= now && start > now - 24 * 3600, `start ${start}`);
  const cpu = sample(text, "process_cpu_seconds_total");
  assert.ok(cpu !== undefined && cpu > 0, `cpu ${cpu}`);
});

Deno.test("process metrics: CPU time only grows between scrapes; registering twice is a no-op", async () => {
  const reg = new Registry();
  registerProcessMetrics(reg);
  registerProcessMetrics(reg);
  const first = sample(await reg.metrics(), "process_cpu_seconds_total")!;
  let x = 0;
  for (let i = 0; i < 2e6; i++) x += i;
  assert.ok(x > 0);
  const second = sample(await reg.metrics(), "process_cpu_seconds_total")!;
  assert.ok(second >= first, `${second} >= ${first}`);
});
