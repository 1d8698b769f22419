import assert from "node:assert/strict";
import { FakeClient } from "./testing/fake.ts";
import { Manager } from "./manager.ts";
import { ConfigMaps, Leases, Pods } from "./core.ts";
import { byObject } from "./cache.ts";
import { controllerManagedBy } from "./builder.ts";
import type { Request } from "./reconcile.ts";
// The one reconciler the integration tests also run as an operator process on a real control
// plane, so a manager behaviour seen here is the one checked there; it is a user of the runtime,
// not a double of anything the runtime talks to (those come from ./testing/).
import {
  DEMO_FINALIZER,
  demoPodName,
  DemoSets,
  RECONCILED_BY_LABEL,
  REPLICAS_LABEL,
  setupDemoController,
} from "../tests/harness/demo_controller.ts";
import { waitFor } from "./testing/wait.ts";
import { isNotFound, newApiError } from "./errors.ts";

function manager(fake: FakeClient, extra: Partial<ConstructorParameters<typeof Manager>[0]> = {}) {
  return new Manager({
    client: fake,
    metricsBindAddress: "0",
    healthProbeBindAddress: "127.0.0.1:0",
    leaderElection: false,
    leaderElectionId: "demo-lease",
    ...extra,
  });
}

/** A single candidate with short lease timings, so loss and expiry happen within a test. */
const SOLO_LEADER = {
  leaderElection: true,
  leaderElectionNamespace: "ns",
  identity: "solo",
  leaseDurationMs: 1500,
  renewDeadlineMs: 1000,
  retryPeriodMs: 100,
};

const set = (name: string) => ({
  metadata: { name, namespace: "ns" },
  spec: { agent: { image: "img", replicas: 1 } },
});

Deno.test("manager: a For+Owns controller reconciles create, update and delete", async () => {
  const fake = new FakeClient();
  const mgr = manager(fake);
  setupDemoController(mgr, "me");
  const stop = new AbortController();
  const run = mgr.start(stop.signal);
  try {
    await fake.create(DemoSets, set("a"));
    const pod = await waitFor("pod created", () => fake.get(Pods, "ns", demoPodName("a")));
    assert.equal(pod.metadata.ownerReferences?.[0].name, "a");
    assert.equal(pod.metadata.labels?.[RECONCILED_BY_LABEL], "me");
    await waitFor(
      "status written",
      async () => (await fake.get(DemoSets, "ns", "a")).status?.observedGeneration === 1,
    );
    await fake.patch(DemoSets, "ns", "a", "merge", { spec: { agent: { replicas: 3 } } });
    await waitFor(
      "pod follows the spec",
      async () =>
        (await fake.get(Pods, "ns", demoPodName("a"))).metadata.labels?.[REPLICAS_LABEL] === "3",
    );
    // An owned-pod change (label edited by someone else) is mapped back to the owner.
    await fake.patch(Pods, "ns", demoPodName("a"), "merge", {
      metadata: { labels: { [REPLICAS_LABEL]: "9" } },
    });
    await waitFor(
      "owner reconciled from pod event",
      async () =>
        (await fake.get(Pods, "ns", demoPodName("a"))).metadata.labels?.[REPLICAS_LABEL] === "3",
    );
    await fake.delete(DemoSets, "ns", "a");
    await waitFor("finalizer cleaned up", async () => {
      try {
        await fake.get(DemoSets, "ns", "a");
        return false;
      } catch (err) {
        return isNotFound(err);
      }
    });
    await assert.rejects(fake.get(Pods, "ns", demoPodName("a")), isNotFound);
  } finally {
    stop.abort();
    assert.equal(await run, "stopped");
  }
});

Deno.test("manager: ready only after the caches synced; healthz always", async () => {
  const fake = new FakeClient();
  let releaseList!: () => void;
  const listGate = new Promise<void>((r) => releaseList = r);
  fake.addReactor(async (a) => {
    if (a.verb === "list") await listGate;
    return undefined;
  });
  const mgr = manager(fake);
  setupDemoController(mgr, "me");
  const stop = new AbortController();
  const run = mgr.start(stop.signal);
  try {
    const addr = await waitFor("probe server bound", () => mgr.servers.probeAddr);
    const base = `http://127.0.0.1:${addr.port}`;
    const probe = async (path: string) => {
      const res = await fetch(base + path);
      await res.body?.cancel();
      return res.status;
    };
    assert.equal(await probe("/healthz"), 200);
    assert.equal(await probe("/readyz"), 500);
    releaseList();
    await waitFor("ready after sync", async () => (await probe("/readyz")) === 200);
  } finally {
    releaseList();
    stop.abort();
    await run;
  }
});

Deno.test("manager: shutdown lets an in-flight reconcile finish before returning", async () => {
  const fake = new FakeClient();
  const mgr = manager(fake);
  let started = false;
  let finished = false;
  let release!: () => void;
  const gate = new Promise<void>((r) => release = r);
  controllerManagedBy(mgr).for(DemoSets).complete({
    async reconcile(_req: Request) {
      started = true;
      await gate;
      finished = true;
      return {};
    },
  });
  const stop = new AbortController();
  const run = mgr.start(stop.signal);
  await fake.create(DemoSets, set("slow"));
  await waitFor("reconcile started", () => started);
  stop.abort();
  let returned = false;
  run.then(() => returned = true);
  await new Promise((r) => setTimeout(r, 20));
  assert.equal(returned, false, "start() waits for the in-flight reconcile");
  release();
  assert.equal(await run, "stopped");
  assert.equal(finished, true);
});

Deno.test("manager: only the leader reconciles; a released lease is taken over at once", async () => {
  const fake = new FakeClient();
  const timings = { leaseDurationMs: 1500, renewDeadlineMs: 1000, retryPeriodMs: 100 };
  const a = manager(fake, {
    leaderElection: true,
    leaderElectionNamespace: "ns",
    identity: "a",
    ...timings,
  });
  const b = manager(fake, {
    leaderElection: true,
    leaderElectionNamespace: "ns",
    identity: "b",
    ...timings,
  });
  const ra = setupDemoController(a, "a");
  const rb = setupDemoController(b, "b");
  const stopA = new AbortController();
  const stopB = new AbortController();
  const runA = a.start(stopA.signal);
  await waitFor("a leads", () => a.elected);
  const runB = b.start(stopB.signal);
  try {
    await fake.create(DemoSets, set("x"));
    await waitFor(
      "a reconciled",
      async () =>
        (await fake.get(Pods, "ns", demoPodName("x"))).metadata.labels?.[RECONCILED_BY_LABEL] ===
          "a",
    );
    assert.equal(rb.reconciles, 0, "the standby never reconciles");
    assert.equal(b.elected, false);
    stopA.abort();
    assert.equal(await runA, "stopped");
    // a released the lease on shutdown and b, watching it, took it without waiting out the
    // lease duration (1.5 s here).
    await waitFor("b takes over", () => b.elected, 1000);
    const lease = await fake.get(Leases, "ns", "demo-lease");
    assert.equal(lease.spec?.holderIdentity, "b");
    await fake.patch(DemoSets, "ns", "x", "merge", { spec: { agent: { replicas: 5 } } });
    await waitFor(
      "b reconciles",
      async () =>
        (await fake.get(Pods, "ns", demoPodName("x"))).metadata.labels?.[RECONCILED_BY_LABEL] ===
          "b",
    );
    assert.ok(ra.reconciles > 0);
    const finalizers = (await fake.get(DemoSets, "ns", "x")).metadata.finalizers;
    assert.deepEqual(finalizers, [DEMO_FINALIZER]);
  } finally {
    stopA.abort();
    stopB.abort();
    await Promise.all([runA, runB]);
  }
});

Deno.test("manager: losing the lease stops the controllers and reports leadership-lost", async () => {
  const fake = new FakeClient();
  const mgr = manager(fake, SOLO_LEADER);
  const r = setupDemoController(mgr, "solo");
  const run = mgr.start(new AbortController().signal);
  await waitFor("elected", () => mgr.elected);
  await fake.create(DemoSets, set("y"));
  await waitFor("reconciled while leading", () => r.reconciles > 0);
  // The API server stops accepting Lease writes: renewals fail until the renew deadline.
  fake.addReactor((a) =>
    a.verb === "update" && a.resource === Leases
      ? newApiError(503, "ServiceUnavailable", { resource: "leases" }, "etcd down")
      : undefined
  );
  assert.equal(await run, "leadership-lost");
  assert.equal(mgr.elected, false);
  // Everything the manager started has stopped: no informer is left to trigger a reconcile.
  assert.equal(fake.openWatches, 0);
});

/** How p settled, or "still running" if it did not within ms. */
async function settleWithin(p: Promise<unknown>, ms: number): Promise<unknown> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  try {
    return await Promise.race([
      p.then((o) => ({ resolved: o }), (err) => ({ rejected: err })),
      new Promise((resolve) => timer = setTimeout(() => resolve("still running"), ms)),
    ]);
  } finally {
    clearTimeout(timer);
  }
}

Deno.test("manager: a controller that fails to start stops the manager with its error", async () => {
  const fake = new FakeClient();
  const mgr = manager(fake);
  setupDemoController(mgr, "me");
  const boom = new Error("cache sync timed out");
  mgr.add({ start: () => Promise.reject(boom) });
  const stop = new AbortController();
  const run = mgr.start(stop.signal);
  let outcome: unknown;
  try {
    // controller-runtime returns the first runnable error from Start: the process must not
    // keep running (and, with leader election, holding the lease) with a dead controller.
    outcome = await settleWithin(run, 2000);
  } finally {
    stop.abort();
    await run.catch(() => {});
  }
  assert.deepEqual(outcome, { rejected: boom });
  assert.equal(fake.openWatches, 0, "everything the manager started has stopped");
});

Deno.test("manager: a failing non-leader runnable stops the manager with its error", async () => {
  const fake = new FakeClient();
  const mgr = manager(fake, SOLO_LEADER);
  setupDemoController(mgr, "solo");
  const boom = new Error("server failed");
  let failNow!: () => void;
  const failing = new Promise<void>((_, reject) => failNow = () => reject(boom));
  mgr.add({ needLeaderElection: false, start: () => failing });
  const stop = new AbortController();
  const run = mgr.start(stop.signal);
  let outcome: unknown;
  try {
    await waitFor("elected", () => mgr.elected);
    failNow();
    outcome = await settleWithin(run, 2000);
  } finally {
    stop.abort();
    await run.catch(() => {});
  }
  assert.deepEqual(outcome, { rejected: boom });
  assert.equal(fake.openWatches, 0);
  // The lease was released on the way out.
  const lease = await fake.get(Leases, "ns", "demo-lease");
  assert.equal(lease.spec?.holderIdentity, "");
});

Deno.test("manager: a runnable that rejects during shutdown does not fail the stop", async () => {
  const fake = new FakeClient();
  const mgr = manager(fake);
  mgr.add({
    start: (signal) =>
      new Promise<void>((_, reject) =>
        signal.addEventListener("abort", () => reject(new Error("aborted")), { once: true })
      ),
  });
  const stop = new AbortController();
  const run = mgr.start(stop.signal);
  await waitFor("elected", () => mgr.elected);
  stop.abort();
  assert.equal(await run, "stopped");
});

Deno.test("manager: a signal that aborted before start() stops it at once", async () => {
  const fake = new FakeClient();
  const mgr = manager(fake);
  setupDemoController(mgr, "me");
  const stop = new AbortController();
  stop.abort(new Error("SIGTERM during startup"));
  const run = mgr.start(stop.signal);
  const outcome = await settleWithin(run, 2000);
  assert.deepEqual(outcome, { resolved: "stopped" });
  assert.equal(fake.openWatches, 0);
});

Deno.test("manager: a standby stopped during the election leaves the leader's lease alone", async () => {
  const fake = new FakeClient();
  const timings = { leaseDurationMs: 1500, renewDeadlineMs: 1000, retryPeriodMs: 100 };
  const opts = { leaderElection: true, leaderElectionNamespace: "ns", ...timings };
  const a = manager(fake, { ...opts, identity: "a" });
  const b = manager(fake, { ...opts, identity: "b" });
  setupDemoController(a, "a");
  const rb = setupDemoController(b, "b");
  const stopA = new AbortController();
  const stopB = new AbortController();
  const runA = a.start(stopA.signal);
  try {
    await waitFor("a leads", () => a.elected);
    const runB = b.start(stopB.signal);
    await waitFor("b campaigns", async () => {
      const lease = await fake.get(Leases, "ns", "demo-lease");
      return fake.actions.some((x) => x.verb === "get" && x.resource === Leases) &&
        lease.spec?.holderIdentity === "a";
    });
    stopB.abort();
    stopB.abort();
    assert.equal(await runB, "stopped");
    assert.equal(b.elected, false);
    assert.equal(rb.reconciles, 0);
    const lease = await fake.get(Leases, "ns", "demo-lease");
    assert.equal(lease.spec?.holderIdentity, "a");
    assert.equal(a.elected, true);
  } finally {
    stopA.abort();
    stopB.abort();
    await runA;
  }
});

Deno.test("manager: losing the lease aborts in-flight reconciles instead of draining them", async () => {
  const fake = new FakeClient();
  const mgr = manager(fake, SOLO_LEADER);
  let inFlight: AbortSignal | undefined;
  let abortedWhileLeaseHeld: boolean | undefined;
  // Default drain timeout (30 s): a graceful drain would keep writing long after the loss.
  controllerManagedBy(mgr).for(DemoSets).complete({
    reconcile(_req: Request, signal: AbortSignal) {
      inFlight = signal;
      return new Promise((_, reject) => {
        signal.addEventListener("abort", () => {
          reject(signal.reason);
        }, { once: true });
      });
    },
  });
  const run = mgr.start(new AbortController().signal);
  try {
    await waitFor("elected", () => mgr.elected);
    await fake.create(DemoSets, set("z"));
    await waitFor("reconcile in flight", () => inFlight !== undefined);
    fake.addReactor((a) =>
      a.verb === "update" && a.resource === Leases
        ? newApiError(503, "ServiceUnavailable", { resource: "leases" }, "etcd down")
        : undefined
    );
    // controller-runtime skips the graceful shutdown when leadership is lost: the work the
    // lease guarded is cancelled at once, not drained for up to 30 s.
    const outcome = await settleWithin(run, 10_000);
    abortedWhileLeaseHeld = inFlight?.aborted;
    assert.deepEqual(outcome, { resolved: "leadership-lost" });
    assert.equal(abortedWhileLeaseHeld, true);
  } finally {
    await run.catch(() => {});
  }
});

Deno.test("manager: caches that cannot sync fail start() with the kinds named", async () => {
  const fake = new FakeClient();
  fake.addReactor((a) =>
    a.verb === "list" && a.resource === Pods
      ? newApiError(403, "Forbidden", { resource: "pods" }, "cannot list pods")
      : undefined
  );
  const mgr = manager(fake, { cacheSyncTimeoutMs: 300 });
  setupDemoController(mgr, "me");
  await assert.rejects(
    mgr.start(new AbortController().signal),
    /timed out after 300 ms waiting for caches to sync: pods$/,
  );
  assert.equal(fake.openWatches, 0);
});

Deno.test("manager: byObject scopes what the cached client sees; apiReader still sees the rest", async () => {
  const fake = new FakeClient();
  const owned = "cocoonset.cocoonstack.io/name";
  const mgr = manager(fake, { byObject: [byObject(Pods, { labelSelector: owned })] });
  // Code wiring controllers after the manager exists scopes its kinds first.
  mgr.cache.configure(ConfigMaps, { labelSelector: "app=demo" });
  const reconciled: string[] = [];
  controllerManagedBy(mgr).for(Pods).complete({
    reconcile(req: Request) {
      reconciled.push(req.name);
      return Promise.resolve({});
    },
  });
  // for() created the pod informer: its scope is fixed now.
  assert.throws(() => mgr.cache.configure(Pods, {}), /after its informer was created/);
  const stop = new AbortController();
  const run = mgr.start(stop.signal);
  try {
    await fake.create(Pods, {
      metadata: { name: "unrelated", namespace: "ns" },
      spec: { containers: [] },
    });
    await fake.create(Pods, {
      metadata: { name: "managed", namespace: "ns", labels: { [owned]: "demo" } },
      spec: { containers: [] },
    });
    await fake.create(ConfigMaps, { metadata: { name: "other", namespace: "ns" } });
    await waitFor("managed pod reconciled", () => reconciled.includes("managed"));
    assert.deepEqual(reconciled, ["managed"]);
    await assert.rejects(mgr.client.get(Pods, "ns", "unrelated"), isNotFound);
    assert.equal((await mgr.apiReader.get(Pods, "ns", "unrelated")).metadata.name, "unrelated");
    assert.deepEqual((await mgr.client.list(ConfigMaps)).items, []);
    assert.equal((await mgr.apiReader.list(ConfigMaps)).items.length, 1);
  } finally {
    stop.abort();
    assert.equal(await run, "stopped");
  }
});

Deno.test("manager: a metrics port in use fails the start, and nothing is left running", async () => {
  const blocker = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  try {
    const fake = new FakeClient();
    const port = (blocker.addr as Deno.NetAddr).port;
    const mgr = manager(fake, { metricsBindAddress: `127.0.0.1:${port}` });
    setupDemoController(mgr, "me");
    await assert.rejects(
      () => mgr.start(new AbortController().signal),
      /metrics server: cannot listen on 127\.0\.0\.1:\d+/,
    );
    // The informers it had started are stopped: no watch stays open.
    assert.equal(fake.openWatches, 0);
  } finally {
    blocker.close();
  }
});
