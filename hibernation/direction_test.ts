import assert from "node:assert/strict";
import {
  COCOON_HIBERNATION_PHASE_ACTIVE,
  COCOON_HIBERNATION_PHASE_FAILED,
  COCOON_HIBERNATION_PHASE_HIBERNATED,
  COCOON_HIBERNATION_PHASE_HIBERNATING,
  COCOON_HIBERNATION_PHASE_PENDING,
  COCOON_HIBERNATION_PHASE_WAKING,
  type CocoonHibernationPhase,
} from "../common/apis/v1/mod.ts";
import { Harness, HIBERNATED_LIFECYCLE, request, VM, vmPod } from "./_fixtures.ts";
import { direction } from "./direction.ts";
import { readHibernateState } from "../common/meta/hibernate.ts";
import { Pods } from "../kube/mod.ts";
import { FakeRegistry } from "../snapshot/testing/fake.ts";

Deno.test("direction: the desire, except that a reversed desire finishes the transition in flight", () => {
  const phases: (CocoonHibernationPhase | undefined)[] = [
    undefined,
    COCOON_HIBERNATION_PHASE_PENDING,
    COCOON_HIBERNATION_PHASE_HIBERNATING,
    COCOON_HIBERNATION_PHASE_HIBERNATED,
    COCOON_HIBERNATION_PHASE_WAKING,
    COCOON_HIBERNATION_PHASE_ACTIVE,
    COCOON_HIBERNATION_PHASE_FAILED,
  ];
  for (const phase of phases) {
    const status = phase ? { phase } : undefined;
    assert.equal(
      direction(request("h", "Hibernate", { status })),
      phase === COCOON_HIBERNATION_PHASE_WAKING ? "Wake" : "Hibernate",
      `Hibernate in ${phase}`,
    );
    assert.equal(
      direction(request("h", "Wake", { status })),
      phase === COCOON_HIBERNATION_PHASE_HIBERNATING ? "Hibernate" : "Wake",
      `Wake in ${phase}`,
    );
  }
});

// --- reverse desires -------------------------------------------------------------------------

Deno.test("a desire flipped to Hibernate mid-wake finishes the wake first", async () => {
  const registry = new FakeRegistry();
  registry.put(VM, "hibernate");
  const h = Harness.create([
    request("hib", "Hibernate", { status: { phase: COCOON_HIBERNATION_PHASE_WAKING, vmName: VM } }),
    vmPod({ lifecycle: { state: "hibernated" } }),
  ], { registry });
  await h.reconcile("hib");
  assert.equal((await h.hib("hib")).status?.phase, COCOON_HIBERNATION_PHASE_WAKING);
  assert.equal(registry.callsOf("deleteManifest").length, 0, "tag kept while the VM is down");
  assert.equal(readHibernateState(await h.pod()), false, "no hibernate asked mid-wake");

  // vk finishes the wake; the Active write is followed by the hibernate the desire asks for.
  h.api.seed(Pods, vmPod({ vmID: "vmid-new", running: true, lifecycle: { state: "ready" } }));
  await h.reconcile("hib");
  assert.equal((await h.hib("hib")).status?.phase, COCOON_HIBERNATION_PHASE_ACTIVE);
  assert.equal(registry.contains(VM, "hibernate"), false);
  await h.reconcile("hib");
  assert.equal((await h.hib("hib")).status?.phase, COCOON_HIBERNATION_PHASE_HIBERNATING);
  assert.equal(readHibernateState(await h.pod()), true);
  await h.close();
});

Deno.test("a desire flipped to Wake mid-hibernate finishes the hibernate first", async () => {
  const registry = new FakeRegistry();
  const h = Harness.create([
    request("hib", "Wake", { status: { phase: COCOON_HIBERNATION_PHASE_HIBERNATING, vmName: VM } }),
    // A lagging view of the pod: still running with its old VM id.
    vmPod({ hibernate: true, vmID: "vmid-old", running: true }),
  ], { registry });
  await h.reconcile("hib");
  assert.equal((await h.hib("hib")).status?.phase, COCOON_HIBERNATION_PHASE_HIBERNATING);
  assert.equal(registry.callsOf("deleteManifest").length, 0, "no tag GC off a stale view");
  assert.equal(readHibernateState(await h.pod()), true);

  registry.put(VM, "hibernate");
  h.api.seed(Pods, vmPod({ hibernate: true, lifecycle: HIBERNATED_LIFECYCLE }));
  await h.reconcile("hib");
  assert.equal((await h.hib("hib")).status?.phase, COCOON_HIBERNATION_PHASE_HIBERNATED);
  await h.reconcile("hib");
  assert.equal((await h.hib("hib")).status?.phase, COCOON_HIBERNATION_PHASE_WAKING);
  assert.equal(readHibernateState(await h.pod()), false);
  await h.close();
});
