/**
 * Opposing requests on one VM on the fake API (opposing.ts; docs/hibernation.md, Differences 1).
 */
import assert from "node:assert/strict";
import {
  COCOON_HIBERNATION_PHASE_ACTIVE,
  COCOON_HIBERNATION_PHASE_FAILED,
  COCOON_HIBERNATION_PHASE_HIBERNATED,
  COCOON_HIBERNATION_PHASE_HIBERNATING,
  COCOON_HIBERNATION_PHASE_WAKING,
  CocoonHibernations,
} from "../common/apis/v1/mod.ts";
import { readHibernateState } from "../common/meta/hibernate.ts";
import { Pods } from "../kube/mod.ts";
import { FakeRegistry } from "../snapshot/testing/fake.ts";
import { at, Harness, HIBERNATED_LIFECYCLE, NS, readyOf, request, VM, vmPod } from "./_fixtures.ts";
import { REQUEUE_INTERVAL_MS } from "./timers.ts";
import { opposingRequest } from "./opposing.ts";
import { cameFirst } from "../snapshotgate/mod.ts";

// --- opposite requests on one VM (Differences from the Go operator) --------------------------

Deno.test("opposite requests: the later one is refused with Conflict and touches nothing", async () => {
  const registry = new FakeRegistry();
  const h = Harness.create([
    request("a", "Hibernate", { created: at(-10_000) }),
    request("b", "Wake", { created: at(-5_000) }),
    vmPod({ vmID: "vmid-1", running: true }),
  ], { registry });
  assert.deepEqual(await h.reconcile("a"), { requeueAfter: REQUEUE_INTERVAL_MS });
  assert.equal(readHibernateState(await h.pod()), true);

  const podRv = (await h.pod()).metadata.resourceVersion;
  assert.deepEqual(await h.reconcile("b"), { requeueAfter: REQUEUE_INTERVAL_MS });
  const b = await h.hib("b");
  assert.equal(b.status?.phase, COCOON_HIBERNATION_PHASE_FAILED);
  assert.equal(readyOf(b.status)?.reason, "Conflict");
  assert.match(readyOf(b.status)?.message ?? "", /CocoonHibernation a .*Hibernate VM vk-ns-demo-0/);
  assert.equal((await h.pod()).metadata.resourceVersion, podRv, "the refused request left the pod");
  assert.equal(registry.calls.length, 0);
  const conflict = (await h.events()).find((e) => e.reason === "Conflict");
  assert.equal(conflict?.type, "Warning");
  assert.equal(conflict?.involvedObject.name, "b");
  assert.match(conflict?.message ?? "", /CocoonHibernation a /);

  // While the refusal lasts, a pass costs no write at all.
  const writes = h.writes();
  for (let i = 0; i < 3; i++) {
    assert.deepEqual(await h.reconcile("b"), { requeueAfter: REQUEUE_INTERVAL_MS });
    assert.deepEqual(await h.reconcile("a"), { requeueAfter: REQUEUE_INTERVAL_MS });
  }
  assert.equal(h.writes(), writes);
  assert.deepEqual(await h.reasons("b"), ["Conflict"]);
  await h.close();
});

Deno.test("opposite requests: the refused one proceeds once the earlier one is gone", async () => {
  const registry = new FakeRegistry();
  registry.put(VM, "hibernate");
  const h = Harness.create([
    request("a", "Hibernate", {
      created: at(-10_000),
      status: { phase: COCOON_HIBERNATION_PHASE_HIBERNATED, vmName: VM },
    }),
    request("b", "Wake", { created: at(-5_000) }),
    vmPod({ hibernate: true, lifecycle: HIBERNATED_LIFECYCLE }),
  ], { registry });
  await h.reconcile("b");
  assert.equal((await h.hib("b")).status?.phase, COCOON_HIBERNATION_PHASE_FAILED);
  assert.equal(readHibernateState(await h.pod()), true, "the VM keeps the earlier request's state");

  await h.api.delete(CocoonHibernations, NS, "a");
  await h.reconcile("a");
  assert.equal(await h.gone("a"), true);
  assert.equal(registry.contains(VM, "hibernate"), true, "b still tracks the VM (podRef)");
  await h.reconcile("b");
  assert.equal((await h.hib("b")).status?.phase, COCOON_HIBERNATION_PHASE_WAKING);
  assert.equal(readHibernateState(await h.pod()), false);
  assert.deepEqual(await h.reasons("b"), ["Conflict", "RetryRequested"]);
  await h.close();
});

Deno.test("opposite requests: a later request that agrees with the earliest still acts", async () => {
  const h = Harness.create([
    request("a", "Hibernate", { created: at(-10_000) }),
    request("b", "Wake", { created: at(-5_000) }),
    request("c", "Hibernate", { created: at(-1_000) }),
    vmPod(),
  ]);
  await h.reconcile("c");
  assert.equal((await h.hib("c")).status?.phase, COCOON_HIBERNATION_PHASE_HIBERNATING);
  await h.reconcile("b");
  assert.equal((await h.hib("b")).status?.phase, COCOON_HIBERNATION_PHASE_FAILED);
  await h.close();
});

Deno.test("opposite requests: the earliest's transition in flight sets the direction, not its new desire", async (t) => {
  await t.step(
    "Hibernate asked of a VM the earliest is still waking waits for the wake",
    async () => {
      const registry = new FakeRegistry();
      registry.put(VM, "hibernate");
      const h = Harness.create([
        // Flipped back to Hibernate mid-wake: it keeps waking until Active.
        request("a", "Hibernate", {
          created: at(-10_000),
          status: { phase: COCOON_HIBERNATION_PHASE_WAKING, vmName: VM },
        }),
        request("b", "Hibernate", { created: at(-5_000) }),
        vmPod({ lifecycle: HIBERNATED_LIFECYCLE }),
      ], { registry });
      const podRv = (await h.pod()).metadata.resourceVersion;
      assert.deepEqual(await h.reconcile("b"), { requeueAfter: REQUEUE_INTERVAL_MS });
      assert.equal((await h.pod()).metadata.resourceVersion, podRv, "no hibernate asked mid-wake");
      const b = await h.hib("b");
      assert.equal(b.status?.phase, COCOON_HIBERNATION_PHASE_FAILED);
      assert.equal(readyOf(b.status)?.reason, "Conflict");
      assert.match(
        readyOf(b.status)?.message ?? "",
        /CocoonHibernation a .* wake of VM vk-ns-demo-0/,
      );
      assert.equal(registry.calls.length, 0);

      // The wake done, a turns to its Hibernate and b agrees with it again.
      h.api.seed(Pods, vmPod({ vmID: "vmid-new", running: true, lifecycle: { state: "ready" } }));
      await h.reconcile("a");
      assert.equal((await h.hib("a")).status?.phase, COCOON_HIBERNATION_PHASE_ACTIVE);
      await h.reconcile("a");
      assert.equal((await h.hib("a")).status?.phase, COCOON_HIBERNATION_PHASE_HIBERNATING);
      await h.reconcile("b");
      assert.equal((await h.hib("b")).status?.phase, COCOON_HIBERNATION_PHASE_HIBERNATING);
      assert.deepEqual(await h.reasons("b"), ["Conflict", "RetryRequested"]);
      await h.close();
    },
  );

  await t.step(
    "Wake asked of a VM the earliest is still hibernating keeps the snapshot",
    async () => {
      const registry = new FakeRegistry();
      registry.put(VM, "hibernate");
      const h = Harness.create([
        // Flipped to Wake mid-hibernate: it keeps hibernating until Hibernated.
        request("a", "Wake", {
          created: at(-10_000),
          status: { phase: COCOON_HIBERNATION_PHASE_HIBERNATING, vmName: VM },
        }),
        request("b", "Wake", { created: at(-5_000) }),
        // A lagging view of the pod: still running with its old VM id.
        vmPod({ hibernate: true, vmID: "vmid-old", running: true }),
      ], { registry });
      assert.deepEqual(await h.reconcile("b"), { requeueAfter: REQUEUE_INTERVAL_MS });
      assert.equal(readHibernateState(await h.pod()), true, "the hibernation is not withdrawn");
      assert.equal(registry.contains(VM, "hibernate"), true, "no tag GC off a stale view");
      assert.equal(registry.callsOf("deleteManifest").length, 0);
      assert.equal(readyOf((await h.hib("b")).status)?.reason, "Conflict");
      await h.close();
    },
  );
});

Deno.test("opposite requests created in the same second: the name decides, consistently", async () => {
  const h = Harness.create([
    request("x", "Wake", { created: at(0) }),
    request("y", "Hibernate", { created: at(0) }),
    vmPod(),
  ]);
  await h.reconcile("y");
  await h.reconcile("x");
  assert.equal((await h.hib("y")).status?.phase, COCOON_HIBERNATION_PHASE_FAILED);
  assert.equal((await h.hib("x")).status?.phase, COCOON_HIBERNATION_PHASE_WAKING);
  await h.close();
});

// --- the creation order (common/meta/creation_order.ts) ----------------------------------------

Deno.test("the earliest request is picked by the same creation order as a VM name's first comer", () => {
  // Pairs a real API server never writes (it stamps every object, in whole UTC seconds), where
  // two rules could disagree: a missing time, a fractional second, an offset.
  const pairs: [string | undefined, string | undefined][] = [
    [undefined, at(0)],
    [at(0), undefined],
    ["2026-03-02T10:00:00.500Z", "2026-03-02T10:00:00Z"],
    ["2026-03-02T10:30:00+01:00", "2026-03-02T10:00:00Z"],
    [at(0), at(0)],
  ];
  for (const [first, second] of pairs) {
    const a = request("a", "Hibernate", { uid: "uid-a", created: first });
    const b = request("b", "Wake", { uid: "uid-b", created: second });
    // a refused (b opposes it and came first) exactly when b is the first comer.
    const bFirst = cameFirst(
      { namespace: NS, name: "b", creationTimestamp: second },
      { namespace: NS, name: "a", creationTimestamp: first },
    );
    assert.equal(opposingRequest(a, [a, b], VM) === b, bFirst, `a ${first}, b ${second}`);
    assert.equal(opposingRequest(b, [a, b], VM) === a, !bFirst, `b ${second}, a ${first}`);
  }
});
