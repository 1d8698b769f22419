import assert from "node:assert/strict";
import { registry } from "./metrics.ts";
import { LOW_PRIORITY, PriorityQueue } from "./priority_queue.ts";
import { ItemExponentialFailureRateLimiter } from "./rate_limiter.ts";
import { FakeClock } from "./testing/fake_clock.ts";
import { metricValue } from "./testing/metrics.ts";
import { flushMicrotasks } from "./testing/wait.ts";
import { MAX_DEPTH_PRIORITIES, PRIORITY_OVERFLOW_LABEL } from "./workqueue_metrics.ts";

// ---- helpers -------------------------------------------------------------------------------

let queues = 0;

/** A queue with metrics under a name no other test uses, on a fake clock. */
function newQueue(clock = new FakeClock(1_000_000)) {
  const name = `pq-test-${++queues}`;
  const q = new PriorityQueue({ name, clock });
  return { q, name, clock };
}

/** workqueue_depth of queue `name` as {priority label: value}; absent series are absent. */
async function depth(name: string): Promise<Record<string, number>> {
  const metric = registry.getSingleMetric("workqueue_depth")!;
  const out: Record<string, number> = {};
  for (const v of (await metric.get()).values) {
    if (v.labels.name === name) out[String(v.labels.priority)] = v.value;
  }
  return out;
}

function counter(metric: string, name: string): Promise<number | undefined> {
  return metricValue(metric, { name, controller: name });
}

/** A get that has not necessarily resolved yet, observable without awaiting it. */
function pendingGet(q: PriorityQueue) {
  const state: { item?: { key: string; priority: number }; settled: boolean } = {
    settled: false,
  };
  const promise = q.getWithPriority().then((item) => {
    state.item = item;
    state.settled = true;
    return item;
  });
  return { state, promise };
}

/** Deterministic PRNG (mulberry32) so a randomized test replays the same run. */
function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

// ---- ordering and de-duplication ------------------------------------------------------------

Deno.test("a queued key is handed out with its priority and leaves the depth", async () => {
  const { q, name } = newQueue();
  q.add("foo");
  assert.deepEqual(await q.getWithPriority(), { key: "foo", priority: 0 });
  assert.deepEqual(await depth(name), { "0": 0 });
  assert.equal(await counter("workqueue_adds_total", name), 1);
  assert.equal(await counter("workqueue_retries_total", name), 0);
  q.shutDown();
});

Deno.test("keys of one priority come out in add order", async () => {
  const { q, name } = newQueue();
  q.add("foo");
  q.add("bar");
  assert.equal(await q.get(), "foo");
  assert.equal(await q.get(), "bar");
  assert.deepEqual(await depth(name), { "0": 0 });
  assert.equal(await counter("workqueue_adds_total", name), 2);
  q.shutDown();
});

Deno.test("a key held by a worker is queued but not handed out until done", async () => {
  const { q, name } = newQueue();
  q.add("foo");
  assert.equal(await q.get(), "foo");
  q.add("foo");
  q.add("bar");
  assert.equal(await q.get(), "bar", "foo is skipped while held");
  assert.equal(q.len(), 1, "the held key still counts as queued");
  assert.deepEqual(await depth(name), { "0": 1 });
  assert.equal(await counter("workqueue_adds_total", name), 3);

  q.add("baz");
  q.done("foo");
  assert.equal(await q.get(), "foo", "released, it keeps its place ahead of baz");
  assert.equal(await q.get(), "baz");
  assert.equal(await counter("workqueue_adds_total", name), 4);
  q.shutDown();
});

Deno.test("a getter waiting on a held key wakes when the worker is done", async () => {
  const { q } = newQueue();
  q.add("foo");
  assert.deepEqual(await q.getWithPriority(), { key: "foo", priority: 0 });
  q.add("foo");
  const next = pendingGet(q);
  await flushMicrotasks();
  assert.equal(next.state.settled, false, "never handed to a second worker");
  q.done("foo");
  assert.deepEqual(await next.promise, { key: "foo", priority: 0 });
  q.shutDown();
});

Deno.test("adding a queued key again is a no-op", async () => {
  const { q, name } = newQueue();
  q.add("foo");
  q.add("foo");
  assert.equal(q.len(), 1);
  assert.deepEqual(await depth(name), { "0": 1 });
  assert.equal(await counter("workqueue_adds_total", name), 1);
  q.shutDown();
});

Deno.test("a re-add keeps the highest priority and never lowers it", async () => {
  const raise = newQueue();
  raise.q.addWithOpts({ priority: 1 }, "foo");
  raise.q.addWithOpts({ priority: 2 }, "foo");
  assert.deepEqual(await raise.q.getWithPriority(), { key: "foo", priority: 2 });
  assert.equal(raise.q.len(), 0);
  assert.deepEqual(await depth(raise.name), { "1": 0, "2": 0 });
  assert.equal(await counter("workqueue_adds_total", raise.name), 1);
  raise.q.shutDown();

  const lower = newQueue();
  lower.q.addWithOpts({ priority: 2 }, "foo");
  lower.q.addWithOpts({ priority: 1 }, "foo");
  assert.deepEqual(await lower.q.getWithPriority(), { key: "foo", priority: 2 });
  assert.deepEqual(await depth(lower.name), { "2": 0 });
  lower.q.shutDown();
});

Deno.test("a raised priority jumps ahead of lower ones", async () => {
  const { q, name } = newQueue();
  q.add("foo");
  q.add("bar");
  q.add("baz");
  q.addWithOpts({ priority: 1 }, "baz");
  assert.deepEqual(await q.getWithPriority(), { key: "baz", priority: 1 });
  assert.equal(q.len(), 2);
  assert.deepEqual(await depth(name), { "0": 2, "1": 0 });
  assert.equal(await counter("workqueue_adds_total", name), 3);
  q.shutDown();
});

Deno.test("a raised priority joins the end of its new priority's line", async () => {
  const { q } = newQueue();
  q.addWithOpts({ priority: 0 }, "foo");
  q.addWithOpts({ priority: 1 }, "bar");
  q.addWithOpts({ priority: 1 }, "foo");
  assert.equal(q.len(), 2);
  assert.deepEqual(await q.getWithPriority(), { key: "bar", priority: 1 });
  assert.deepEqual(await q.getWithPriority(), { key: "foo", priority: 1 });
  assert.equal(q.len(), 0);
  q.shutDown();
});

Deno.test("priorities are served highest first, each first-in first-out", async () => {
  for (const after of [-1000, 0, 1000]) {
    const { q, name, clock } = newQueue();
    const priorities = [10, 5, 0, -5, -10];
    const perPriority = 1000;
    for (let i = 0; i < perPriority; i++) {
      for (const p of priorities) q.addWithOpts({ priority: p, after }, `p${p}-${i}`);
    }
    if (after > 0) {
      assert.equal(q.len(), 0, "nothing is ready before the delay");
      clock.advance(after);
    }
    for (const p of priorities) {
      for (let i = 0; i < perPriority; i++) {
        assert.deepEqual(await q.getWithPriority(), { key: `p${p}-${i}`, priority: p });
      }
    }
    assert.deepEqual(await depth(name), { "10": 0, "5": 0, "0": 0, "-5": 0, "-10": 0 });
    assert.equal(await counter("workqueue_adds_total", name), perPriority * 5);
    assert.equal(
      await counter("workqueue_retries_total", name),
      after > 0 ? perPriority * 5 : 0,
      `retries count delayed adds only (after=${after})`,
    );
    q.shutDown();
  }
});

// ---- ready time ------------------------------------------------------------------------------

Deno.test("a ready key stays ready when added again with a delay", async () => {
  const { q, name } = newQueue();
  q.addWithOpts({ after: 0 }, "foo");
  q.addWithOpts({ after: 3_600_000 }, "foo");
  assert.deepEqual(await q.getWithPriority(), { key: "foo", priority: 0 });
  assert.equal(q.len(), 0);
  assert.equal(q.delayedLen(), 0);
  assert.deepEqual(await depth(name), { "0": 0 });
  assert.equal(await counter("workqueue_adds_total", name), 1);
  q.shutDown();
});

Deno.test("waiting keys count in neither len nor depth until ready", async () => {
  const { q, name, clock } = newQueue();
  for (let round = 0; round < 2; round++) {
    q.addWithOpts({ after: 500 }, "foo");
    q.add("baz");
    q.addWithOpts({ after: 500 }, "bar");
    q.add("bal");
    assert.equal(q.len(), 2);
    assert.equal(q.delayedLen(), 2);
    assert.deepEqual(await depth(name), { "0": 2 });

    clock.advance(1000);
    assert.equal(q.len(), 4);
    assert.deepEqual(await depth(name), { "0": 4 });

    // Ready order: the two immediate adds, then the two that became ready together.
    const order: string[] = [];
    for (let i = 0; i < 4; i++) {
      const key = (await q.get())!;
      order.push(key);
      q.done(key);
    }
    assert.deepEqual(order, ["baz", "bal", "foo", "bar"]);
    assert.equal(q.len(), 0);
    assert.deepEqual(await depth(name), { "0": 0 });
  }
  q.shutDown();
});

Deno.test("a key is handed out only once its delay has passed, on one timer", async () => {
  const clock = new FakeClock(1_000_000);
  const q = new PriorityQueue({ clock });
  const got = pendingGet(q);
  q.addAfter("foo", 1000);
  assert.equal(clock.pendingTimers(), 1);
  assert.equal(clock.nextDeadline(), clock.now() + 1000);
  clock.advance(999);
  await flushMicrotasks();
  assert.equal(got.state.settled, false);
  clock.advance(1);
  assert.deepEqual(await got.promise, { key: "foo", priority: 0 });
  assert.equal(clock.pendingTimers(), 0, "no timer is left once nothing waits");
  q.shutDown();
});

Deno.test("one timer serves many delayed keys and moves earlier for an earlier key", () => {
  const clock = new FakeClock();
  const q = new PriorityQueue({ clock });
  for (let i = 0; i < 1000; i++) q.addAfter(`k${i}`, 1000 + i);
  assert.equal(clock.pendingTimers(), 1);
  assert.equal(clock.nextDeadline(), 1000);
  q.addAfter("early", 10);
  assert.equal(clock.pendingTimers(), 1);
  assert.equal(clock.nextDeadline(), 10);
  clock.advance(10);
  assert.equal(q.len(), 1);
  clock.advance(990 + 499);
  assert.equal(q.len(), 501);
  clock.advance(1000);
  assert.equal(q.len(), 1001);
  assert.equal(q.delayedLen(), 0);
  assert.equal(clock.pendingTimers(), 0);
  q.shutDown();
});

Deno.test("across delayed adds of a key the earliest ready time wins", () => {
  const clock = new FakeClock();
  const q = new PriorityQueue({ clock });
  q.addAfter("a", 100);
  q.addAfter("a", 50);
  q.addAfter("a", 500);
  assert.equal(q.delayedLen(), 1);
  assert.equal(clock.nextDeadline(), 50);
  clock.advance(50);
  assert.equal(q.len(), 1);
  clock.advance(1000);
  assert.equal(q.len(), 1, "the later ready times were merged, not kept");
  q.shutDown();
});

Deno.test("a delay beyond the timer range is waited for in steps, not fired early", () => {
  const clock = new FakeClock();
  const q = new PriorityQueue({ clock });
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

Deno.test("a waiting key becomes ready at once when added without a delay", async () => {
  const { q, name, clock } = newQueue();
  const got = pendingGet(q);
  q.addWithOpts({ after: 60_000 }, "foo");
  await flushMicrotasks();
  assert.equal(got.state.settled, false);
  assert.deepEqual(await depth(name), {});
  q.add("foo");
  assert.deepEqual(await got.promise, { key: "foo", priority: 0 });
  assert.deepEqual(await depth(name), { "0": 0 });
  assert.equal(await counter("workqueue_adds_total", name), 1);
  assert.equal(q.delayedLen(), 0);
  assert.equal(clock.nextDeadline(), clock.now() + 500, "only the metrics refresher remains");
  q.shutDown();
});

Deno.test("a waiting key added at a higher priority without delay is ready at that priority", async () => {
  const { q, name } = newQueue();
  q.addWithOpts({ after: 3_600_000, priority: 0 }, "foo");
  assert.equal(q.len(), 0);
  assert.deepEqual(await depth(name), {});
  q.addWithOpts({ priority: 1 }, "foo");
  assert.equal(q.len(), 1);
  assert.deepEqual(await depth(name), { "1": 1 });
  assert.deepEqual(await q.getWithPriority(), { key: "foo", priority: 1 });
  assert.equal(q.len(), 0);
  assert.deepEqual(await depth(name), { "1": 0 });
  q.shutDown();
});

Deno.test("a waiting key keeps its first add order when it becomes ready by a plain add", async () => {
  const { q } = newQueue();
  q.addAfter("foo", 3_600_000);
  q.add("bar");
  q.add("foo");
  assert.equal(await q.get(), "foo", "foo was added before bar");
  assert.equal(await q.get(), "bar");
  q.shutDown();
});

Deno.test("a key whose delay expired is not counted twice when added again", async () => {
  const { q, name, clock } = newQueue();
  q.addAfter("foo", 50);
  clock.advance(50);
  assert.equal(q.len(), 1);
  assert.deepEqual(await depth(name), { "0": 1 });
  q.add("foo");
  assert.equal(q.len(), 1);
  assert.deepEqual(await depth(name), { "0": 1 });
  assert.equal(await q.get(), "foo");
  assert.equal(q.len(), 0);
  assert.deepEqual(await depth(name), { "0": 0 });
  q.shutDown();
});

Deno.test("delayed keys come out in ready order", async () => {
  const { q, name, clock } = newQueue();
  const first = pendingGet(q);
  q.addAfter("foo", 1000);
  q.addAfter("bar", 200);
  await flushMicrotasks();
  assert.equal(first.state.settled, false);
  clock.advance(1000);
  assert.equal((await first.promise)?.key, "bar");
  assert.equal(await q.get(), "foo");
  assert.deepEqual(await depth(name), { "0": 0 });
  assert.equal(await counter("workqueue_adds_total", name), 2);
  q.shutDown();
});

Deno.test("a high-priority key that becomes ready is served before a low one already ready", async () => {
  const { q, name, clock } = newQueue();
  q.addWithOpts({ priority: LOW_PRIORITY }, "foo");
  q.addWithOpts({ after: 1000, priority: 0 }, "prio");
  clock.advance(1000);
  assert.deepEqual(await q.getWithPriority(), { key: "prio", priority: 0 });
  assert.deepEqual(await depth(name), { "-100": 1, "0": 0 });
  assert.equal(await counter("workqueue_adds_total", name), 2);
  assert.equal(await counter("workqueue_retries_total", name), 1);
  q.shutDown();
});

Deno.test("rate-limited adds back off per key, independently of each other", async () => {
  const clock = new FakeClock();
  const name = `pq-test-${++queues}`;
  const rateLimiter = new ItemExponentialFailureRateLimiter<string>(5, 1_000_000);
  const q = new PriorityQueue({ name, clock, rateLimiter });
  // Seven earlier failures: bar's next backoff is 5 ms · 2^7 = 640 ms.
  for (let i = 0; i < 7; i++) rateLimiter.when("bar");
  const first = pendingGet(q);
  q.addWithOpts({ rateLimited: true }, "foo", "bar");
  assert.equal(clock.nextDeadline(), 5);
  await flushMicrotasks();
  assert.equal(first.state.settled, false);
  clock.advance(5);
  assert.equal((await first.promise)?.key, "foo");
  const second = pendingGet(q);
  clock.advance(634);
  await flushMicrotasks();
  assert.equal(second.state.settled, false);
  clock.advance(1);
  assert.equal((await second.promise)?.key, "bar");
  assert.deepEqual(await depth(name), { "0": 0 });
  assert.equal(await counter("workqueue_adds_total", name), 2);
  assert.equal(await counter("workqueue_retries_total", name), 2);
  q.shutDown();
});

Deno.test("a rate-limited add with a delay takes the shorter of the two", () => {
  const clock = new FakeClock();
  const q = new PriorityQueue({ clock });
  q.addWithOpts({ rateLimited: true, after: 1000 }, "short-backoff");
  assert.equal(clock.nextDeadline(), 5);
  const long = new PriorityQueue({
    clock,
    rateLimiter: new ItemExponentialFailureRateLimiter<string>(5000, 10_000),
  });
  long.addWithOpts({ rateLimited: true, after: 1000 }, "short-delay");
  assert.equal(long.delayedLen(), 1);
  clock.advance(1000);
  assert.equal(long.len(), 1);
  q.shutDown();
  long.shutDown();
});

Deno.test("the default rate limiter is per-key exponential with no overall bucket", () => {
  const clock = new FakeClock();
  const q = new PriorityQueue({ clock });
  // client-go's bucket (10 qps, burst 100) would hold key 101 onwards back by 100 ms steps.
  for (let i = 0; i < 200; i++) q.addRateLimited(`k${i}`);
  assert.equal(clock.nextDeadline(), 5);
  clock.advance(5);
  assert.equal(q.len(), 200, "every key retried after 5 ms");
  assert.equal(q.numRequeues("k0"), 1);
  q.addRateLimited("k0");
  q.addRateLimited("k1");
  assert.equal(q.delayedLen(), 0, "already ready: a delay cannot push them back");
  q.forget("k0");
  assert.equal(q.numRequeues("k0"), 0);
  assert.equal(q.numRequeues("k1"), 2);
  q.shutDown();
});

// ---- shutdown ------------------------------------------------------------------------------

Deno.test("after shutdown get resolves undefined at once and adds are dropped", async () => {
  const { q, clock } = newQueue();
  q.add("baz");
  q.shutDown();
  q.addAfter("foo", 1000);
  assert.equal(q.shuttingDown(), true);
  assert.equal(await q.getWithPriority(), undefined, "queued keys are not handed out");
  assert.equal(await q.getWithPriority(), undefined);
  assert.equal(q.delayedLen(), 0);
  assert.equal(clock.pendingTimers(), 0, "metrics and delay timers end");
});

Deno.test("shutdown wakes a getter blocked on an empty queue", async () => {
  const { q } = newQueue();
  const got = pendingGet(q);
  await flushMicrotasks();
  assert.equal(got.state.settled, false);
  q.shutDown();
  assert.equal(await got.promise, undefined);
  assert.equal(await q.get(), undefined);
});

Deno.test("shutDownWithDrain does not wait for keys in flight", async () => {
  const { q } = newQueue();
  q.add("a");
  const a = await q.get();
  await q.shutDownWithDrain();
  assert.equal(q.shuttingDown(), true);
  q.done(a!);
});

Deno.test("delayed keys are dropped on shutdown and their timer cleared", () => {
  const clock = new FakeClock();
  const q = new PriorityQueue({ clock });
  q.addAfter("a", 100);
  q.shutDown();
  assert.equal(clock.pendingTimers(), 0);
  clock.advance(200);
  assert.equal(q.len(), 0);
});

// ---- metrics -------------------------------------------------------------------------------

Deno.test("queue metrics: adds, depth, retries, latency, work duration and unfinished work as client-go's", async () => {
  const { q, name, clock } = newQueue();
  const labels = { name, controller: name };
  assert.equal(await metricValue("workqueue_adds_total", labels), 0, "published at once");
  assert.equal(await metricValue("workqueue_retries_total", labels), 0, "published at once");
  q.add("a");
  q.add("b");
  q.add("a");
  assert.deepEqual(await depth(name), { "0": 2 });
  assert.equal(await metricValue("workqueue_adds_total", labels), 2);
  clock.advance(2000);
  const a = await q.get();
  assert.deepEqual(await depth(name), { "0": 1 });
  assert.equal(await metricValue("workqueue_queue_duration_seconds_sum", labels), 2);
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
  q.shutDown();
  assert.equal(clock.pendingTimers(), 0, "metrics and delay timers stop on shutdown");
});

/**
 * Idle is idle: a named queue arms no timer while nothing is in flight, so an operator with
 * everything converged does not wake up every 500 ms per controller.
 */
Deno.test("no metrics timer while idle; one while processing, stopping after the last done", async () => {
  const { q, name, clock } = newQueue();
  const labels = { name, controller: name };
  assert.equal(clock.pendingTimers(), 0, "an idle queue has no timer");
  q.add("a");
  const key = (await q.get())!;
  assert.equal(clock.pendingTimers(), 1, "in flight: the refresher runs");
  clock.advance(1000);
  assert.equal(await metricValue("workqueue_unfinished_work_seconds", labels), 1);
  q.done(key);
  clock.advance(500);
  assert.equal(await metricValue("workqueue_unfinished_work_seconds", labels), 0);
  assert.equal(clock.pendingTimers(), 0, "nothing in flight: no timer left");
  q.shutDown();
});

Deno.test("depth labels stop at the priority cardinality cap", async () => {
  const { q, name } = newQueue();
  for (let p = 0; p < MAX_DEPTH_PRIORITIES; p++) q.addWithOpts({ priority: p }, `k${p}`);
  q.addWithOpts({ priority: 1000 }, "one-too-many");
  q.addWithOpts({ priority: 0 }, "seen-before");
  const d = await depth(name);
  assert.equal(Object.keys(d).length, MAX_DEPTH_PRIORITIES + 1);
  assert.equal(d["0"], 1);
  assert.equal(d[PRIORITY_OVERFLOW_LABEL], 2, "every change after the cap uses the placeholder");
  q.shutDown();
});

// ---- invariants under load ------------------------------------------------------------------

Deno.test("randomized: no key is held twice, keys are de-duplicated, the max priority wins", async () => {
  const rand = prng(20240523);
  const { q, name, clock } = newQueue(new FakeClock());
  /** Priority each queued key must come out with: the max of its adds since it was handed out. */
  const expected = new Map<string, number>();
  const held: string[] = [];
  const problems: string[] = [];
  let waitingGets = 0;
  let handedOut = 0;

  const startGet = () => {
    waitingGets++;
    void q.getWithPriority().then((item) => {
      waitingGets--;
      if (!item) return;
      if (held.includes(item.key)) problems.push(`${item.key} handed out twice`);
      const want = expected.get(item.key);
      if (want !== item.priority) problems.push(`${item.key}: got ${item.priority}, want ${want}`);
      expected.delete(item.key);
      held.push(item.key);
      handedOut++;
    });
  };
  const finishOne = () => {
    const key = held.splice(Math.floor(rand() * held.length), 1)[0];
    if (key !== undefined) q.done(key);
  };

  // One action at a time, each followed by a flush: every hand-out is recorded by the model
  // before the next add can change what the key should come out with.
  for (let step = 0; step < 20_000; step++) {
    const r = rand();
    if (r < 0.5) {
      const key = `k${Math.floor(rand() * 100)}`;
      const priority = Math.floor(rand() * 7) - 3;
      const after = rand() < 0.2 ? Math.floor(rand() * 20) : 0;
      q.addWithOpts({ priority, after }, key);
      expected.set(key, Math.max(expected.get(key) ?? -Infinity, priority));
    } else if (r < 0.6) {
      clock.advance(Math.floor(rand() * 10));
    } else if (r < 0.8) {
      if (waitingGets + held.length < 16) startGet();
    } else {
      finishOne();
    }
    await flushMicrotasks(3);
  }
  clock.advance(100);
  for (let turn = 0; turn < 10_000 && expected.size > 0 && problems.length === 0; turn++) {
    if (held.length > 0) finishOne();
    if (waitingGets === 0) startGet();
    await flushMicrotasks(3);
  }
  assert.deepEqual(problems, []);
  assert.equal(expected.size, 0, "every added key was handed out");
  while (held.length > 0) finishOne();
  const d = await depth(name);
  for (const [priority, value] of Object.entries(d)) {
    assert.equal(value, 0, `depth of priority ${priority} returns to zero`);
  }
  assert.ok(handedOut > 1000, `plenty of hand-outs (${handedOut})`);
  q.shutDown();
  await flushMicrotasks();
  assert.equal(waitingGets, 0, "shutdown released the waiting gets");
});
