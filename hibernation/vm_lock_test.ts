import assert from "node:assert/strict";
import { StripedLock, VM_LOCK_STRIPES } from "./vm_lock.ts";
import { readHibernateState } from "../common/meta/hibernate.ts";
import { flushMicrotasks, waitFor } from "../kube/testing/mod.ts";
import { FakeRegistry } from "../snapshot/testing/fake.ts";
import { at, Harness, HIBERNATED_LIFECYCLE, readyOf, request, VM, vmPod } from "./_fixtures.ts";

Deno.test("keys on one stripe take turns in arrival order; other stripes run freely", async () => {
  const lock = new StripedLock();
  const order: string[] = [];
  const r1 = await lock.lock("vm-a");
  const second = lock.lock("vm-a").then((release) => {
    order.push("second");
    return release;
  });
  const third = lock.lock("vm-a").then((release) => {
    order.push("third");
    release();
  });
  // A key on a different stripe is not held up.
  let other = "";
  for (let i = 0; i < 1000 && !other; i++) {
    if (lock.stripeOf(`vm-${i}`) !== lock.stripeOf("vm-a")) other = `vm-${i}`;
  }
  (await lock.lock(other))();
  assert.deepEqual(order, []);
  r1();
  (await second)();
  await third;
  assert.deepEqual(order, ["second", "third"]);
});

Deno.test("an aborted waiter leaves the queue and the next waiter still gets the stripe", async () => {
  const lock = new StripedLock();
  const r1 = await lock.lock("vm");
  const ac = new AbortController();
  const aborted = lock.lock("vm", ac.signal);
  const next = lock.lock("vm");
  ac.abort(new Error("stop"));
  await assert.rejects(aborted, /stop/);
  r1();
  (await next)();
  const r = await lock.lock("vm");
  r();
  r(); // idempotent
});

Deno.test("stripes are bounded and deterministic", () => {
  const lock = new StripedLock();
  assert.equal(lock.stripes, VM_LOCK_STRIPES);
  const seen = new Set<number>();
  for (let i = 0; i < 5000; i++) {
    const s = lock.stripeOf(`vk-ns-demo-${i}`);
    assert.ok(s >= 0 && s < VM_LOCK_STRIPES);
    seen.add(s);
  }
  assert.equal(seen.size, VM_LOCK_STRIPES, "names spread over every stripe");
  assert.equal(lock.stripeOf("vk-ns-demo-0"), new StripedLock().stripeOf("vk-ns-demo-0"));
  assert.throws(() => new StripedLock(0));
});

// --- per-VM serialization --------------------------------------------------------------------

async function reconcileTogether(h: Harness, names: string[]): Promise<void> {
  await Promise.allSettled(names.map((n) => h.reconcile(n)));
}

Deno.test("requests on one pod never have two registry calls for the VM in flight", async (t) => {
  await t.step("agreeing requests (both probe the registry)", async () => {
    const registry = new FakeRegistry({ latency: 20 });
    const h = Harness.create([
      request("a", "Hibernate", { created: at(-2000) }),
      request("b", "Hibernate", { created: at(-1000) }),
      vmPod({ hibernate: true, lifecycle: HIBERNATED_LIFECYCLE }),
    ], { registry });
    await reconcileTogether(h, ["a", "b"]);
    assert.equal(registry.callsOf("hasManifest", VM).length, 2);
    assert.equal(registry.maxInFlight(VM), 1);
    await h.close();
  });
  await t.step(
    "opposing requests (Go: both reach the registry; here the later is refused)",
    async () => {
      const registry = new FakeRegistry({ latency: 20 });
      registry.put(VM, "hibernate");
      const h = Harness.create([
        request("a", "Hibernate", { created: at(-2000) }),
        request("b", "Wake", { created: at(-1000) }),
        // Live, and vk's pair qualifies: a probes the tag, b's wake would drop it.
        vmPod({ vmID: "vmid-1", running: true, lifecycle: HIBERNATED_LIFECYCLE }),
      ], { registry });
      await reconcileTogether(h, ["a", "b"]);
      assert.equal(registry.maxInFlight(VM), 1);
      assert.equal(registry.callsOf("hasManifest", VM).length, 1, "a probed");
      assert.equal(registry.callsOf("deleteManifest").length, 0, "b touched nothing");
      assert.equal(readyOf((await h.hib("b")).status)?.reason, "Conflict");
      assert.equal(readHibernateState(await h.pod()), true);
      await h.close();
    },
  );
});

Deno.test("a deleting request and a live one on the same pod are serialized", async () => {
  // As in Go the deleting request makes no registry call here (the live one holds the VM), so
  // what shows the lock is order: the finalizer waits until the live pass has let go of the VM.
  let releaseProbe!: () => void;
  const registry = new FakeRegistry({
    latency: (call) =>
      call.op === "hasManifest"
        ? new Promise<void>((resolve) => (releaseProbe = resolve))
        : Promise.resolve(),
  });
  const h = Harness.create([
    request("a", "Hibernate", { deleting: true, status: { vmName: VM } }),
    request("b", "Hibernate", { created: at(-1000) }),
    vmPod({ hibernate: true, lifecycle: HIBERNATED_LIFECYCLE }),
  ], { registry });
  const live = h.reconcile("b");
  await waitFor("b probing under the VM's lock", () => registry.calls.length === 1);
  const deleting = h.reconcile("a");
  await waitFor(
    "a's pass started",
    () => h.api.actions.some((x) => x.verb === "get" && x.name === "a"),
  );
  // The fake API answers in microtasks: without the lock a's finalizer would be done by now.
  await flushMicrotasks(200);
  assert.equal(await h.gone("a"), false, "the finalizer waits for the VM's lock");
  releaseProbe();
  await Promise.all([live, deleting]);
  assert.equal(await h.gone("a"), true);
  assert.equal(registry.callsOf("deleteManifest").length, 0, "b holds the VM");
  assert.equal(registry.maxInFlight(VM), 1);
  await h.close();
});

Deno.test("a retargeted request is serialized against a live one on its recorded VM", async () => {
  const registry = new FakeRegistry({ latency: 20 });
  registry.put(VM, "hibernate");
  const h = Harness.create([
    // Points at demo-1 now, but its status still names demo-0's VM: the tag it will delete.
    request("a", "Hibernate", { pod: "demo-1", deleting: true, status: { vmName: VM } }),
    request("b", "Hibernate"),
    vmPod({ hibernate: true, lifecycle: HIBERNATED_LIFECYCLE }),
  ], { registry });
  await reconcileTogether(h, ["a", "b"]);
  // The snapshot gate refuses a's delete: demo-0's VM is not the name a derives from its target
  // demo-1, and b's hibernation holds the tag.
  assert.equal(registry.callsOf("deleteManifest", VM).length, 0);
  assert.equal(registry.contains(VM, "hibernate"), true);
  assert.equal(registry.callsOf("hasManifest", VM).length, 1);
  assert.equal(registry.maxInFlight(VM), 1);
  await h.close();
});

Deno.test("an abort while waiting for the VM lock ends the pass without touching the VM", async () => {
  let releaseFirst!: () => void;
  const registry = new FakeRegistry({
    latency: (call) =>
      call.op === "hasManifest"
        ? new Promise<void>((resolve) => (releaseFirst = resolve))
        : Promise.resolve(),
  });
  const h = Harness.create([
    request("a", "Hibernate", { created: at(-2000) }),
    request("b", "Hibernate", { created: at(-1000) }),
    vmPod({ hibernate: true, lifecycle: HIBERNATED_LIFECYCLE }),
  ], { registry });
  const first = h.reconcile("a");
  while (registry.calls.length === 0) await new Promise((r) => setTimeout(r, 1));
  const ac = new AbortController();
  const second = h.reconcile("b", ac.signal);
  ac.abort(new Error("stopping"));
  await assert.rejects(second, /stopping/);
  releaseFirst();
  await first;
  assert.equal(registry.callsOf("hasManifest").length, 1, "the aborted pass never probed");
  assert.equal((await h.hib("b")).status, undefined);
  await h.close();
});
