import assert from "node:assert/strict";
import {
  type CocoonHibernationPhase,
  CocoonHibernationPhaseActive,
  CocoonHibernationPhaseFailed,
  CocoonHibernationPhaseHibernated,
  CocoonHibernationPhaseHibernating,
  CocoonHibernationPhasePending,
  CocoonHibernationPhaseWaking,
} from "../common/apis/v1/mod.ts";
import { Harness, hibernatedLifecycle, request, VM, vmPod } from "./_fixtures.ts";
import { direction } from "./direction.ts";
import { readHibernateState } from "../common/meta/hibernate.ts";
import { Pods } from "../kube/mod.ts";
import { FakeRegistry } from "../snapshot/testing/fake.ts";

Deno.test("direction: the desire, except that a reversed desire finishes the transition in flight", () => {
  const phases: (CocoonHibernationPhase | undefined)[] = [
    undefined,
    CocoonHibernationPhasePending,
    CocoonHibernationPhaseHibernating,
    CocoonHibernationPhaseHibernated,
    CocoonHibernationPhaseWaking,
    CocoonHibernationPhaseActive,
    CocoonHibernationPhaseFailed,
  ];
  for (const phase of phases) {
    const status = phase ? { phase } : undefined;
    assert.equal(
      direction(request("h", "Hibernate", { status })),
      phase === CocoonHibernationPhaseWaking ? "Wake" : "Hibernate",
      `Hibernate in ${phase}`,
    );
    assert.equal(
      direction(request("h", "Wake", { status })),
      phase === CocoonHibernationPhaseHibernating ? "Hibernate" : "Wake",
      `Wake in ${phase}`,
    );
  }
});

// --- reverse desires -------------------------------------------------------------------------

Deno.test("a desire flipped to Hibernate mid-wake finishes the wake first", async () => {
  const registry = new FakeRegistry();
  registry.put(VM, "hibernate");
  const h = Harness.create([
    request("hib", "Hibernate", { status: { phase: CocoonHibernationPhaseWaking, vmName: VM } }),
    vmPod({ lifecycle: { state: "hibernated" } }),
  ], { registry });
  await h.reconcile("hib");
  assert.equal((await h.hib("hib")).status?.phase, CocoonHibernationPhaseWaking);
  assert.equal(registry.callsOf("deleteManifest").length, 0, "tag kept while the VM is down");
  assert.equal(readHibernateState(await h.pod()), false, "no hibernate asked mid-wake");

  // vk finishes the wake; the Active write is followed by the hibernate the desire asks for.
  h.api.seed(Pods, vmPod({ vmID: "vmid-new", running: true, lifecycle: { state: "ready" } }));
  await h.reconcile("hib");
  assert.equal((await h.hib("hib")).status?.phase, CocoonHibernationPhaseActive);
  assert.equal(registry.contains(VM, "hibernate"), false);
  await h.reconcile("hib");
  assert.equal((await h.hib("hib")).status?.phase, CocoonHibernationPhaseHibernating);
  assert.equal(readHibernateState(await h.pod()), true);
  await h.close();
});

Deno.test("a desire flipped to Wake mid-hibernate finishes the hibernate first", async () => {
  const registry = new FakeRegistry();
  const h = Harness.create([
    request("hib", "Wake", { status: { phase: CocoonHibernationPhaseHibernating, vmName: VM } }),
    // A lagging view of the pod: still running with its old VM id.
    vmPod({ hibernate: true, vmID: "vmid-old", running: true }),
  ], { registry });
  await h.reconcile("hib");
  assert.equal((await h.hib("hib")).status?.phase, CocoonHibernationPhaseHibernating);
  assert.equal(registry.callsOf("deleteManifest").length, 0, "no tag GC off a stale view");
  assert.equal(readHibernateState(await h.pod()), true);

  registry.put(VM, "hibernate");
  h.api.seed(Pods, vmPod({ hibernate: true, lifecycle: hibernatedLifecycle }));
  await h.reconcile("hib");
  assert.equal((await h.hib("hib")).status?.phase, CocoonHibernationPhaseHibernated);
  await h.reconcile("hib");
  assert.equal((await h.hib("hib")).status?.phase, CocoonHibernationPhaseWaking);
  assert.equal(readHibernateState(await h.pod()), false);
  await h.close();
});
