import assert from "node:assert/strict";
import { FakeClock } from "./testing/fake_clock.ts";
import { metricValue } from "./testing/metrics.ts";
import { ItemExponentialFailureRateLimiter } from "./rate_limiter.ts";
import { WorkQueue } from "./workqueue.ts";

Deno.test("add deduplicates queued keys and get hands them out FIFO", async () => {
  const q = new WorkQueue();
  q.add("a");
  q.add("b");
  q.add("a");
  assert.equal(q.len(), 2);
  assert.equal(await q.get(), "a");
  assert.equal(await q.get(), "b");
  assert.equal(q.len(), 0);
  q.done("a");
  q.done("b");
  q.shutDown();
});

Deno.test("a key re-added while processing is held back until done, then queued once", async () => {
  const q = new WorkQueue();
  q.add("k");
  const first = await q.get();
  assert.equal(first, "k");
  q.add("k");
  q.add("k");
  // Not handed out while a worker holds it.
  assert.equal(q.len(), 0);
  let second: string | undefined = "pending";
  const waiter = q.get().then((k) => second = k);
  await Promise.resolve();
  assert.equal(second, "pending");
  q.done("k");
  await waiter;
  assert.equal(second, "k");
  q.done("k");
  assert.equal(q.len(), 0);
  q.shutDown();
});

Deno.test("get waits for an add, and shutdown wakes idle getters with undefined", async () => {
  const q = new WorkQueue();
  const g1 = q.get();
  const g2 = q.get();
  q.add("x");
  assert.equal(await g1, "x");
  q.shutDown();
  assert.equal(await g2, undefined);
  q.add("y");
  assert.equal(q.len(), 0, "adds after shutdown are dropped");
  assert.equal(await q.get(), undefined);
  q.done("x");
});

Deno.test("items queued before shutdown are still handed out (client-go semantics)", async () => {
  const q = new WorkQueue();
  q.add("a");
  q.shutDown();
  assert.equal(await q.get(), "a");
  assert.equal(await q.get(), undefined);
  q.done("a");
});

Deno.test("shutDownWithDrain resolves only after in-flight keys are done", async () => {
  const q = new WorkQueue();
  q.add("a");
  q.add("b");
  const a = await q.get();
  let drained = false;
  const drain = q.shutDownWithDrain().then(() => drained = true);
  await Promise.resolve();
  assert.equal(drained, false);
  q.done(a!);
  await drain;
  assert.equal(drained, true);
});

Deno.test("addAfter delivers at the deadline with a single timer for many keys", () => {
  const clock = new FakeClock();
  const q = new WorkQueue({ clock });
  for (let i = 0; i < 1000; i++) q.addAfter(`k${i}`, 1000 + i);
  assert.equal(clock.pendingTimers(), 1);
  assert.equal(q.delayedLen(), 1000);
  clock.advance(999);
  assert.equal(q.len(), 0);
  clock.advance(1);
  assert.equal(q.len(), 1);
  clock.advance(499);
  assert.equal(q.len(), 500);
  clock.advance(1000);
  assert.equal(q.len(), 1000);
  assert.equal(clock.pendingTimers(), 0);
  q.shutDown();
});

Deno.test("addAfter keeps the earliest deadline per key and re-arms for earlier ones", () => {
  const clock = new FakeClock();
  const q = new WorkQueue({ clock });
  q.addAfter("a", 100);
  q.addAfter("a", 50);
  q.addAfter("a", 500);
  assert.equal(q.delayedLen(), 1);
  assert.equal(clock.nextDeadline(), 50);
  clock.advance(50);
  assert.equal(q.len(), 1);
  clock.advance(1000);
  assert.equal(q.len(), 1, "the later deadlines were merged, not kept");
  // Zero or negative delays add immediately.
  q.addAfter("b", 0);
  assert.equal(q.len(), 2);
  q.shutDown();
});

Deno.test("delayed adds are dropped on shutdown and their timer cleared", () => {
  const clock = new FakeClock();
  const q = new WorkQueue({ clock });
  q.addAfter("a", 100);
  q.shutDown();
  assert.equal(clock.pendingTimers(), 0);
  clock.advance(200);
  assert.equal(q.len(), 0);
});

Deno.test("addRateLimited follows the backoff and forget resets it", () => {
  const clock = new FakeClock();
  const q = new WorkQueue({ clock, rateLimiter: new ItemExponentialFailureRateLimiter(5, 1000) });
  q.addRateLimited("k");
  assert.equal(q.numRequeues("k"), 1);
  assert.equal(clock.nextDeadline(), 5);
  clock.advance(5);
  assert.equal(q.len(), 1);
  q.addRateLimited("k");
  assert.equal(clock.nextDeadline(), 15, "second failure waits 10 ms");
  q.forget("k");
  assert.equal(q.numRequeues("k"), 0);
  q.shutDown();
});

Deno.test("queue metrics: depth, adds, retries, latency, work duration, unfinished work", async () => {
  const clock = new FakeClock(1_000_000);
  const name = "wq-metrics-test";
  const labels = { name, controller: name };
  const q = new WorkQueue({ name, clock });
  assert.equal(await metricValue("workqueue_depth", { ...labels, priority: "" }), 0);

  q.add("a");
  q.add("b");
  q.add("a");
  assert.equal(await metricValue("workqueue_depth", labels), 2);
  assert.equal(await metricValue("workqueue_adds_total", labels), 2);

  clock.advance(2000);
  const a = await q.get();
  assert.equal(await metricValue("workqueue_depth", labels), 1);
  assert.equal(
    await metricValue("workqueue_queue_duration_seconds_sum", labels),
    2,
    "a waited 2 s in the queue",
  );

  // The 500 ms refresher reports work in progress.
  clock.advance(1500);
  assert.equal(await metricValue("workqueue_unfinished_work_seconds", labels), 1.5);
  assert.equal(await metricValue("workqueue_longest_running_processor_seconds", labels), 1.5);

  q.done(a!);
  assert.equal(await metricValue("workqueue_work_duration_seconds_count", labels), 1);
  assert.equal(await metricValue("workqueue_work_duration_seconds_sum", labels), 1.5);
  clock.advance(500);
  assert.equal(await metricValue("workqueue_unfinished_work_seconds", labels), 0);

  q.addAfter("c", 10);
  q.addRateLimited("d");
  assert.equal(await metricValue("workqueue_retries_total", labels), 2);

  assert.ok(clock.pendingTimers() > 0);
  q.shutDown();
  assert.equal(clock.pendingTimers(), 0, "metrics and delay timers stop on shutdown");
});

Deno.test("delays beyond the timer range wait in steps instead of firing early", () => {
  const clock = new FakeClock();
  const q = new WorkQueue({ clock });
  const thirtyDays = 30 * 24 * 3600 * 1000;
  q.addAfter("far", thirtyDays);
  assert.equal(clock.nextDeadline(), 2 ** 31 - 1);
  clock.advance(2 ** 31 - 1);
  assert.equal(q.len(), 0);
  assert.equal(q.delayedLen(), 1);
  clock.advance(thirtyDays - (2 ** 31 - 1));
  assert.equal(q.len(), 1);
  q.shutDown();
});
