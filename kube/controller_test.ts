import assert from "node:assert/strict";
import { FakeClock } from "./testing/fake_clock.ts";
import { Controller, isPanic } from "./controller.ts";
import { enqueueForObject } from "./handler.ts";
import { metricValue } from "./testing/metrics.ts";
import type { KubeObject } from "./object.ts";
import { generationChanged } from "./predicates.ts";
import { LOW_PRIORITY } from "./priority_queue.ts";
import { type Reconciler, type Request, type Result, TerminalError } from "./reconcile.ts";
import { StubInformer } from "./testing/stub_informer.ts";
import { flushMicrotasks, waitUntil } from "./testing/wait.ts";

// ---- helpers -------------------------------------------------------------------------------

/** Polls cond every millisecond until it holds (5 s deadline by default). */
function waitFor(cond: () => boolean, what: string, timeoutMs = 5000): Promise<true> {
  return waitUntil(() => cond() || undefined, { what, timeoutMs, intervalMs: 1 });
}

/** A promise with its resolve function exposed. */
function gate(): { promise: Promise<void>; open(): void } {
  let open!: () => void;
  const promise = new Promise<void>((r) => open = r);
  return { promise, open };
}

/** Records reconcile calls and delegates to a per-test behaviour. */
class RecordingReconciler implements Reconciler {
  calls: string[] = [];
  signals: AbortSignal[] = [];
  constructor(
    private readonly behaviour: (
      req: Request,
      n: number,
    ) => Promise<Result | void> | Result | void = () => {},
  ) {}

  reconcile(req: Request, signal: AbortSignal): Promise<Result | void> {
    const key = `${req.namespace}/${req.name}`;
    this.calls.push(key);
    this.signals.push(signal);
    const n = this.calls.filter((c) => c === key).length;
    return Promise.resolve(this.behaviour(req, n));
  }

  count(key: string): number {
    return this.calls.filter((c) => c === key).length;
  }
}

function started(ctrl: Controller): { stop(): Promise<void>; running: Promise<void> } {
  const ac = new AbortController();
  const running = ctrl.start(ac.signal);
  return {
    running,
    stop: async () => {
      ac.abort();
      await running;
    },
  };
}

// ---- tests ---------------------------------------------------------------------------------

Deno.test("a key is never reconciled concurrently; re-adds while in flight run once after", async () => {
  const gates = new Map<string, ReturnType<typeof gate>>();
  const rec = new RecordingReconciler(async (req, n) => {
    const g = gate();
    gates.set(`${req.name}#${n}`, g);
    await g.promise;
  });
  const ctrl = new Controller({
    name: "excl-gated",
    reconciler: rec,
    maxConcurrentReconciles: 4,
    clock: new FakeClock(),
  });
  const run = started(ctrl);

  ctrl.enqueue({ namespace: "ns", name: "a" });
  await waitFor(() => gates.has("a#1"), "first reconcile of a");
  for (let i = 0; i < 5; i++) ctrl.enqueue({ namespace: "ns", name: "a" });
  ctrl.enqueue({ namespace: "ns", name: "b" });
  await waitFor(() => gates.has("b#1"), "b reconciled by another worker");
  await flushMicrotasks();
  assert.equal(rec.count("ns/a"), 1, "a is not handed to a second worker while in flight");
  assert.equal(ctrl.queue.len(), 1, "a waits, once, held back while in flight");

  gates.get("a#1")!.open();
  await waitFor(() => gates.has("a#2"), "a re-run after done");
  gates.get("a#2")!.open();
  gates.get("b#1")!.open();
  await waitFor(() => ctrl.queue.len() === 0 && rec.calls.length === 3, "idle");
  await flushMicrotasks();
  assert.equal(rec.count("ns/a"), 2, "five adds during the first pass collapse into one pass");
  await run.stop();
});

Deno.test("concurrency 4 with slow reconciles: per-key exclusivity and no lost updates", async () => {
  const holding = new Set<string>();
  const violations: string[] = [];
  let active = 0;
  let maxActive = 0;
  const lastAddAt = new Map<string, number>();
  const lastStartAt = new Map<string, number>();
  let seq = 0;
  const rec = new RecordingReconciler(async (req) => {
    const key = req.name;
    // Recorded, not asserted here: the controller would swallow the assertion as an error.
    if (holding.has(key)) violations.push(key);
    holding.add(key);
    lastStartAt.set(key, ++seq);
    active++;
    maxActive = Math.max(maxActive, active);
    // Simulated work spanning a few event-loop turns.
    for (let i = 0; i < 3; i++) await new Promise((r) => setTimeout(r, 0));
    active--;
    holding.delete(key);
  });
  const ctrl = new Controller({
    name: "excl-stress",
    reconciler: rec,
    maxConcurrentReconciles: 4,
    clock: new FakeClock(),
  });
  const run = started(ctrl);
  const keys = Array.from({ length: 12 }, (_, i) => `k${i}`);
  for (let round = 0; round < 40; round++) {
    for (let i = 0; i < 6; i++) {
      const key = keys[(round * 7 + i * 5) % keys.length];
      lastAddAt.set(key, ++seq);
      ctrl.enqueue({ namespace: "ns", name: key });
    }
    await new Promise((r) => setTimeout(r, 0));
  }
  await waitFor(
    () => [...lastAddAt].every(([k, added]) => (lastStartAt.get(k) ?? 0) > added),
    "every key reconciled after its last add",
  );
  await waitFor(() => active === 0, "workers idle");
  assert.deepEqual(violations, [], "no key reconciled concurrently");
  assert.equal(maxActive, 4, "all four workers were used, never more");
  assert.ok(rec.calls.length < 240, "repeated adds were deduplicated");
  await run.stop();
});

Deno.test("a throwing reconcile keeps the worker and requeues with backoff until success", async () => {
  const clock = new FakeClock(10_000);
  const name = "throwing";
  const rec = new RecordingReconciler((req, n) => {
    if (req.name === "x" && n <= 3) throw new Error(`boom ${n}`);
  });
  const ctrl = new Controller({ name, reconciler: rec, clock });
  const run = started(ctrl);
  const key = "ns/x";

  ctrl.enqueue({ namespace: "ns", name: "x" });
  const expectedDelays = [5, 10, 20];
  for (const [i, delay] of expectedDelays.entries()) {
    await waitFor(() => rec.count(key) === i + 1 && ctrl.queue.delayedLen() === 1, `failure ${i}`);
    assert.equal(ctrl.queue.numRequeues(key), i + 1);
    assert.equal(clock.nextDeadline(), clock.now() + delay, `backoff after failure ${i + 1}`);
    clock.advance(delay - 1);
    assert.equal(ctrl.queue.len(), 0, "not yet due");
    clock.advance(1);
  }
  await waitFor(() => rec.count(key) === 4, "fourth, successful pass");
  await waitFor(() => ctrl.queue.numRequeues(key) === 0, "success forgets the backoff");

  // The single worker survived the errors.
  ctrl.enqueue({ namespace: "ns", name: "y" });
  await waitFor(() => rec.count("ns/y") === 1, "worker still alive");

  const labels = { controller: name };
  await waitFor(() => rec.calls.length === 5, "all calls");
  assert.equal(await metricValue("controller_runtime_reconcile_errors_total", labels), 3);
  assert.equal(
    await metricValue("controller_runtime_reconcile_total", { ...labels, result: "error" }),
    3,
  );
  await waitFor(() => ctrl.queue.len() === 0, "drained");
  assert.equal(
    await metricValue("controller_runtime_reconcile_total", { ...labels, result: "success" }),
    2,
  );
  assert.equal(await metricValue("controller_runtime_reconcile_panics_total", labels), 0);
  assert.equal(await metricValue("controller_runtime_reconcile_time_seconds_count", labels), 5);
  await run.stop();
});

Deno.test("panics: programming faults are counted, still requeued", async () => {
  const name = "panicky";
  const clock = new FakeClock();
  const throws: unknown[] = [
    new TypeError("x is not a function"),
    "a string",
    new Error("ordinary"),
    new TypeError("fetch failed", { cause: new Error("connection refused") }),
    new RangeError("bad length"),
  ];
  const rec = new RecordingReconciler((req) => {
    throw throws[Number(req.name)];
  });
  const ctrl = new Controller({ name, reconciler: rec, clock });
  const run = started(ctrl);
  for (let i = 0; i < throws.length; i++) ctrl.enqueue({ namespace: "", name: String(i) });
  await waitFor(() => ctrl.queue.delayedLen() === throws.length, "all requeued");
  assert.equal(
    await metricValue("controller_runtime_reconcile_panics_total", { controller: name }),
    3,
  );
  assert.equal(
    await metricValue("controller_runtime_reconcile_errors_total", { controller: name }),
    5,
  );
  assert.deepEqual(throws.map(isPanic), [true, true, false, false, true]);
  await run.stop();
});

Deno.test("terminal errors are counted and not requeued", async () => {
  const name = "terminal";
  const rec = new RecordingReconciler((req) => {
    if (req.name === "direct") throw new TerminalError(new Error("invalid spec"));
    throw new Error("wrapped", { cause: new TerminalError("no permission") });
  });
  const ctrl = new Controller({ name, reconciler: rec, clock: new FakeClock() });
  const run = started(ctrl);
  ctrl.enqueue({ namespace: "ns", name: "direct" });
  ctrl.enqueue({ namespace: "ns", name: "wrapped" });
  await waitFor(() => rec.calls.length === 2, "both reconciled");
  const labels = { controller: name };
  await waitFor(() => ctrl.queue.len() === 0, "idle");
  await flushMicrotasks();
  assert.equal(ctrl.queue.delayedLen(), 0);
  assert.equal(await metricValue("controller_runtime_terminal_reconcile_errors_total", labels), 2);
  assert.equal(await metricValue("controller_runtime_reconcile_errors_total", labels), 2);
  await run.stop();
});

Deno.test("requeueAfter re-adds after exactly that delay and resets the backoff", async () => {
  const clock = new FakeClock(1_000);
  const name = "requeue-after";
  const rec = new RecordingReconciler((_req, n) => {
    if (n === 1) throw new Error("first pass fails");
    if (n === 2) return { requeueAfter: 5000 };
  });
  const ctrl = new Controller({ name, reconciler: rec, clock });
  const run = started(ctrl);
  ctrl.enqueue({ namespace: "ns", name: "r" });
  await waitFor(() => ctrl.queue.delayedLen() === 1, "error requeue");
  assert.equal(ctrl.queue.numRequeues("ns/r"), 1);
  clock.advance(5);
  await waitFor(() => rec.count("ns/r") === 2 && ctrl.queue.delayedLen() === 1, "second pass");
  assert.equal(ctrl.queue.numRequeues("ns/r"), 0, "requeueAfter forgets the failures");
  clock.advance(4999);
  assert.equal(ctrl.queue.len(), 0);
  assert.equal(rec.count("ns/r"), 2);
  clock.advance(1);
  await waitFor(() => rec.count("ns/r") === 3, "delivered after 5 s");
  const labels = { controller: name };
  await waitFor(() => ctrl.queue.len() === 0, "idle");
  assert.equal(
    await metricValue("controller_runtime_reconcile_total", { ...labels, result: "requeue_after" }),
    1,
  );
  await run.stop();
});

Deno.test("requeue: true goes through the rate limiter", async () => {
  const clock = new FakeClock();
  const name = "requeue-flag";
  const rec = new RecordingReconciler((_req, n) => (n <= 2 ? { requeue: true } : undefined));
  const ctrl = new Controller({ name, reconciler: rec, clock });
  const run = started(ctrl);
  ctrl.enqueue({ namespace: "ns", name: "q" });
  await waitFor(() => ctrl.queue.delayedLen() === 1, "first requeue");
  assert.equal(clock.nextDeadline(), clock.now() + 5);
  clock.advance(5);
  await waitFor(() => rec.count("ns/q") === 2 && ctrl.queue.delayedLen() === 1, "second");
  assert.equal(clock.nextDeadline(), clock.now() + 10);
  clock.advance(10);
  await waitFor(() => rec.count("ns/q") === 3, "third");
  await waitFor(() => ctrl.queue.numRequeues("ns/q") === 0, "success forgets");
  assert.equal(
    await metricValue("controller_runtime_reconcile_total", {
      controller: name,
      result: "requeue",
    }),
    2,
  );
  await run.stop();
});

Deno.test("graceful stop lets an in-flight reconcile finish and takes no new keys", async () => {
  const name = "graceful";
  const g = gate();
  let abortedDuringWork: boolean | undefined;
  const rec = new RecordingReconciler(async (req, _n) => {
    if (req.name !== "slow") return;
    await g.promise;
    abortedDuringWork = rec.signals[0].aborted;
  });
  const ctrl = new Controller({ name, reconciler: rec, clock: new FakeClock() });
  const ac = new AbortController();
  let startReturned = false;
  const running = ctrl.start(ac.signal).then(() => startReturned = true);
  ctrl.enqueue({ namespace: "ns", name: "slow" });
  await waitFor(() => rec.calls.length === 1, "slow reconcile in flight");
  assert.equal(await metricValue("controller_runtime_active_workers", { controller: name }), 1);

  ac.abort();
  let stopped = false;
  const stopping = ctrl.stop().then(() => stopped = true);
  ctrl.enqueue({ namespace: "ns", name: "late" });
  await flushMicrotasks();
  assert.equal(stopped, false, "stop waits for the in-flight reconcile");
  assert.equal(startReturned, false);

  g.open();
  await stopping;
  await running;
  assert.equal(abortedDuringWork, false, "the reconcile was not cancelled while draining");
  assert.deepEqual(rec.calls, ["ns/slow"], "no key taken after stop");
  assert.equal(await metricValue("controller_runtime_active_workers", { controller: name }), 0);
});

Deno.test("the drain timeout aborts reconciles that do not finish", async () => {
  const clock = new FakeClock();
  const rec = new RecordingReconciler(() =>
    new Promise<void>((_resolve, reject) => {
      const signal = rec.signals.at(-1)!;
      signal.addEventListener("abort", () => reject(signal.reason), { once: true });
    })
  );
  const ctrl = new Controller({
    name: "drain-timeout",
    reconciler: rec,
    clock,
    drainTimeoutMs: 1000,
  });
  const run = started(ctrl);
  ctrl.enqueue({ namespace: "ns", name: "stuck" });
  await waitFor(() => rec.calls.length === 1, "stuck reconcile");
  let stopped = false;
  const stopping = ctrl.stop().then(() => stopped = true);
  await flushMicrotasks();
  clock.advance(999);
  await flushMicrotasks();
  assert.equal(stopped, false);
  clock.advance(1);
  await stopping;
  await run.running;
  assert.equal(rec.signals[0].aborted, true);
});

Deno.test("reconciliation timeout aborts the signal and is counted", async () => {
  const clock = new FakeClock();
  const name = "reconcile-timeout";
  const rec = new RecordingReconciler(() =>
    new Promise<void>((resolve) => {
      rec.signals.at(-1)!.addEventListener("abort", () => resolve(), { once: true });
    })
  );
  const ctrl = new Controller({ name, reconciler: rec, clock, reconciliationTimeoutMs: 200 });
  const run = started(ctrl);
  ctrl.enqueue({ namespace: "ns", name: "t" });
  await waitFor(() => rec.calls.length === 1, "in flight");
  clock.advance(200);
  await waitFor(() => ctrl.queue.len() === 0 && rec.signals[0].aborted, "aborted");
  await flushMicrotasks();
  assert.equal(
    await metricValue("controller_runtime_reconcile_timeouts_total", { controller: name }),
    1,
  );
  await run.stop();
});

Deno.test("informer events pass predicates, initial objects replay on start", async () => {
  const informer = new StubInformer<KubeObject>();
  informer.objects.set("ns/pre", { metadata: { name: "pre", namespace: "ns", generation: 1 } });
  const rec = new RecordingReconciler();
  const ctrl = new Controller({ name: "informer-driven", reconciler: rec, clock: new FakeClock() });
  ctrl.watch(informer, enqueueForObject(), generationChanged());
  assert.equal(informer.handlers.length, 0, "handlers register at start");
  const run = started(ctrl);
  await waitFor(() => rec.count("ns/pre") === 1, "initial list reconciled");

  const v1 = { metadata: { name: "obj", namespace: "ns", generation: 1, resourceVersion: "1" } };
  informer.add(v1);
  await waitFor(() => rec.count("ns/obj") === 1, "create reconciled");
  // Status-only write: same generation, filtered out.
  informer.update({ metadata: { ...v1.metadata, resourceVersion: "2" } });
  // Spec change on another object acts as a FIFO marker.
  informer.update({ metadata: { name: "pre", namespace: "ns", generation: 2 } });
  await waitFor(() => rec.count("ns/pre") === 2, "marker reconciled");
  assert.equal(rec.count("ns/obj"), 1, "status-only update was filtered");
  informer.update({ metadata: { ...v1.metadata, generation: 2, resourceVersion: "3" } });
  await waitFor(() => rec.count("ns/obj") === 2, "spec change reconciled");
  await run.stop();
});

Deno.test("start waits for informers to sync and fails after the cache sync timeout", async () => {
  const informer = new StubInformer<KubeObject>();
  informer.synced = false;
  const ctrl = new Controller({
    name: "never-synced",
    reconciler: new RecordingReconciler(),
    cacheSyncTimeoutMs: 30,
  });
  ctrl.watch(informer, enqueueForObject());
  await assert.rejects(ctrl.start(new AbortController().signal), /timed out waiting for caches/);

  // Syncing later lets the workers start.
  const clock = new FakeClock();
  const late = new StubInformer<KubeObject>();
  late.synced = false;
  late.objects.set("ns/a", { metadata: { name: "a", namespace: "ns" } });
  const rec = new RecordingReconciler();
  const ctrl2 = new Controller({ name: "late-sync", reconciler: rec, clock });
  ctrl2.watch(late, enqueueForObject());
  const run = started(ctrl2);
  await flushMicrotasks();
  clock.advance(100);
  await flushMicrotasks();
  assert.equal(rec.calls.length, 0, "no reconcile before sync");
  late.synced = true;
  clock.advance(100);
  await waitFor(() => rec.calls.length === 1, "reconciled after sync");
  await run.stop();
});

Deno.test("start twice rejects; stop before start resolves; metrics initialised", async () => {
  const name = "lifecycle";
  const ctrl = new Controller({
    name,
    reconciler: new RecordingReconciler(),
    maxConcurrentReconciles: 4,
    clock: new FakeClock(),
  });
  const run = started(ctrl);
  await assert.rejects(ctrl.start(new AbortController().signal), /started more than once/);
  const labels = { controller: name };
  assert.equal(await metricValue("controller_runtime_max_concurrent_reconciles", labels), 4);
  for (const result of ["success", "error", "requeue", "requeue_after"]) {
    assert.equal(
      await metricValue("controller_runtime_reconcile_total", { ...labels, result }),
      0,
    );
  }
  await run.stop();

  const never = new Controller({ name: "never-started", reconciler: new RecordingReconciler() });
  await never.stop();
  assert.throws(() => never.queue, /not started/);
});

// ---- priorities (the default priority queue) -----------------------------------------------

/** Keys waiting in a controller's queue by priority label (non-zero workqueue_depth series). */
async function depthByPriority(name: string): Promise<Record<string, number>> {
  const out: Record<string, number> = {};
  for (const priority of [String(LOW_PRIORITY), "0", "10"]) {
    const v = await metricValue("workqueue_depth", { name, controller: name, priority });
    if (v) out[priority] = v;
  }
  return out;
}

Deno.test("initial-list objects are reconciled after a later event when both wait", async () => {
  const run = async () => {
    const clock = new FakeClock();
    const informer = new StubInformer<KubeObject>();
    for (const name of ["pre1", "pre2"]) {
      informer.objects.set(`ns/${name}`, {
        metadata: { name, namespace: "ns", resourceVersion: "1" },
      });
    }
    // Hold the workers back until both the replay and the new event are queued.
    informer.synced = false;
    const name = "initial-list-low";
    const rec = new RecordingReconciler();
    const ctrl = new Controller({ name, reconciler: rec, clock });
    ctrl.watch(informer, enqueueForObject());
    const r = started(ctrl);
    await flushMicrotasks();
    informer.add({ metadata: { name: "new", namespace: "ns", resourceVersion: "2" } });
    assert.deepEqual(await depthByPriority(name), { "-100": 2, "0": 1 });
    informer.synced = true;
    clock.advance(100);
    await waitFor(() => rec.calls.length === 3, "all three reconciled");
    await r.stop();
    return rec.calls;
  };
  assert.deepEqual(await run(), ["ns/new", "ns/pre1", "ns/pre2"]);
});

Deno.test("an update that keeps the resourceVersion is queued at low priority", async () => {
  const name = "unchanged-rv-low";
  const busy = gate();
  const rec = new RecordingReconciler(async (req) => {
    if (req.name === "busy") await busy.promise;
  });
  const informer = new StubInformer<KubeObject>();
  const a = { metadata: { name: "a", namespace: "ns", resourceVersion: "7" } };
  const b = { metadata: { name: "b", namespace: "ns", resourceVersion: "7" } };
  informer.objects.set("ns/a", a);
  informer.objects.set("ns/b", b);
  const ctrl = new Controller({ name, reconciler: rec, clock: new FakeClock() });
  ctrl.watch(informer, enqueueForObject());
  const r = started(ctrl);
  await waitFor(() => rec.calls.length === 2, "initial list reconciled");

  ctrl.enqueue({ namespace: "ns", name: "busy" });
  await waitFor(() => rec.count("ns/busy") === 1, "the only worker is busy");
  // a first, but unchanged (a relist or resync replaying it); then a real change to b.
  informer.update({ metadata: { ...a.metadata, labels: { replayed: "yes" } } });
  informer.update({ metadata: { ...b.metadata, resourceVersion: "8" } });
  assert.deepEqual(await depthByPriority(name), { "-100": 1, "0": 1 });
  busy.open();
  await waitFor(() => rec.calls.length === 5, "both updates reconciled");
  assert.deepEqual(rec.calls.slice(3), ["ns/b", "ns/a"], "the real change goes first");
  await r.stop();
});

Deno.test("errors back off 5 ms, 10 ms, 20 ms per key with no overall bucket", async () => {
  const keys = 150;
  const run = async () => {
    const clock = new FakeClock();
    const rec = new RecordingReconciler((_req, n) => {
      if (n <= 3) throw new Error(`failure ${n}`);
    });
    const ctrl = new Controller({ name: "backoff-no-bucket", reconciler: rec, clock });
    const r = started(ctrl);
    for (let i = 0; i < keys; i++) ctrl.enqueue({ namespace: "ns", name: `k${i}` });
    const stillWaiting: number[] = [];
    for (const [round, delay] of [5, 10, 20].entries()) {
      await waitFor(
        () => rec.calls.length === keys * (round + 1) && ctrl.queue.delayedLen() === keys,
        `failure ${round + 1} of every key`,
      );
      assert.equal(clock.nextDeadline(), clock.now() + delay, `backoff after failure ${round + 1}`);
      clock.advance(delay - 1);
      assert.equal(ctrl.queue.len(), 0, "not yet due");
      clock.advance(1);
      stillWaiting.push(ctrl.queue.delayedLen());
    }
    await waitFor(() => rec.calls.length === keys * 4, "every key succeeded");
    await r.stop();
    return stillWaiting;
  };
  // client-go's default would add a 10 qps bucket with burst 100: 50 keys would wait 100 ms steps.
  assert.deepEqual(await run(), [0, 0, 0], "all 150 keys retried on time, every round");
});

for (
  const [outcome, behaviour, delay] of [
    ["an error", () => Promise.reject(new Error("boom")), 5],
    ["requeue", () => ({ requeue: true }), 5],
    ["requeueAfter", () => ({ requeueAfter: 1000 }), 1000],
  ] as const
) {
  Deno.test(`${outcome} requeues at the priority the key was handed out with`, async () => {
    const name = `requeue-keeps-priority-${delay}-${outcome.replace(/\W/g, "")}`;
    const clock = new FakeClock();
    const busy = gate();
    const rec = new RecordingReconciler((req, n) => {
      if (req.name === "busy") return busy.promise;
      if (req.name === "low" && n === 1) return behaviour();
    });
    const informer = new StubInformer<KubeObject>();
    informer.objects.set("ns/low", { metadata: { name: "low", namespace: "ns" } });
    const ctrl = new Controller({ name, reconciler: rec, clock });
    ctrl.watch(informer, enqueueForObject());
    const r = started(ctrl);
    await waitFor(() => rec.count("ns/low") === 1 && ctrl.queue.delayedLen() === 1, "requeued");

    ctrl.enqueue({ namespace: "ns", name: "busy" });
    await waitFor(() => rec.count("ns/busy") === 1, "the only worker is busy");
    clock.advance(delay);
    assert.equal(ctrl.queue.len(), 1, "low is due");
    // Queued after low became ready: only a lower priority puts low behind it.
    ctrl.enqueue({ namespace: "ns", name: "normal" });
    assert.deepEqual(await depthByPriority(name), { "-100": 1, "0": 1 });
    busy.open();
    await waitFor(() => rec.calls.length === 4, "both reconciled");
    assert.deepEqual(rec.calls.slice(2), ["ns/normal", "ns/low"]);
    await r.stop();
  });
}

Deno.test("a result's priority overrides the one the key was handed out with", async () => {
  const name = "requeue-result-priority";
  const clock = new FakeClock();
  const busy = gate();
  const rec = new RecordingReconciler((req, n) => {
    if (req.name === "busy") return busy.promise;
    if (req.name === "low" && n === 1) return { requeueAfter: 1000, priority: 10 };
  });
  const informer = new StubInformer<KubeObject>();
  informer.objects.set("ns/low", { metadata: { name: "low", namespace: "ns" } });
  const ctrl = new Controller({ name, reconciler: rec, clock });
  ctrl.watch(informer, enqueueForObject());
  const r = started(ctrl);
  await waitFor(() => ctrl.queue.delayedLen() === 1, "requeued");
  ctrl.enqueue({ namespace: "ns", name: "busy" });
  await waitFor(() => rec.count("ns/busy") === 1, "the only worker is busy");
  // normal is queued first; low overtakes it only by its raised priority.
  ctrl.enqueue({ namespace: "ns", name: "normal" });
  clock.advance(1000);
  assert.deepEqual(await depthByPriority(name), { "0": 1, "10": 1 });
  busy.open();
  await waitFor(() => rec.calls.length === 4, "both reconciled");
  assert.deepEqual(rec.calls.slice(2), ["ns/low", "ns/normal"]);
  await r.stop();
});

Deno.test("controller: wrapReconciler puts wrappers around the reconciler (last outermost), only before start", async () => {
  const inner = new RecordingReconciler();
  const ctrl = new Controller({ name: "wrapped", reconciler: inner });
  const order: string[] = [];
  const wrapper = (label: string) => (next: Reconciler): Reconciler => ({
    reconcile: (req, signal) => {
      order.push(label);
      // The inner wrapper keeps "skip" from the reconciler, as the shard gate does.
      return label === "first" && req.name === "skip"
        ? Promise.resolve({})
        : next.reconcile(req, signal);
    },
  });
  ctrl.wrapReconciler(wrapper("first"));
  ctrl.wrapReconciler(wrapper("second"));
  assert.equal(ctrl.reconciler, inner, "reconciler still names the unwrapped one");
  const run = started(ctrl);
  try {
    assert.throws(() => ctrl.wrapReconciler(wrapper("late")), /wrapReconciler after start/);
    ctrl.enqueue({ namespace: "ns", name: "a" });
    ctrl.enqueue({ namespace: "ns", name: "skip" });
    await waitFor(() => order.length === 4, "both keys through both wrappers");
    assert.deepEqual(order, ["second", "first", "second", "first"]);
    assert.deepEqual(inner.calls, ["ns/a"], "the inner wrapper kept skip from the reconciler");
  } finally {
    await run.stop();
  }
});
