/**
 * The finalizer on the fake API (finalizer.ts): added in a pass of its own, the tag dropped or
 * kept on deletion.
 */
import assert from "node:assert/strict";
import {
  COCOON_HIBERNATION_PHASE_HIBERNATED,
  COCOON_HIBERNATION_PHASE_HIBERNATING,
  COCOON_HIBERNATION_PHASE_WAKING,
  CocoonHibernations,
  type CocoonHibernationStatus,
} from "../common/apis/v1/mod.ts";
import { readHibernateState } from "../common/meta/hibernate.ts";
import { ANNOTATION_ORPHAN_HIBERNATE_TAG } from "../common/meta/orphan_tag.ts";
import type { CocoonSet } from "../common/apis/v1/cocoonset_types.ts";
import { CocoonSets } from "../common/apis/v1/resources.ts";
import type { Pod } from "../kube/mod.ts";
import { FakeRegistry } from "../snapshot/testing/fake.ts";
import { Harness, HIBERNATED_LIFECYCLE, NS, request, VM, vmPod } from "./_fixtures.ts";
import { HIBERNATION_FINALIZER } from "./finalizer.ts";

// --- finalizer -------------------------------------------------------------------------------

Deno.test("adds the finalizer in a pass of its own and requeues, status untouched", async () => {
  const h = Harness.create([request("hib", "Hibernate", { finalizers: [] }), vmPod()]);
  const res = await h.reconcile("hib");
  assert.deepEqual(res, { requeue: true });
  const got = await h.hib("hib");
  assert.deepEqual(got.metadata.finalizers, [HIBERNATION_FINALIZER]);
  assert.equal(got.status?.phase, undefined);
  assert.equal(readHibernateState(await h.pod()), false, "no pod write in the finalizer pass");
  await h.close();
});

Deno.test("delete drops the VM's :hibernate tag and removes the finalizer", async () => {
  const registry = new FakeRegistry();
  registry.put(VM, "hibernate");
  const h = Harness.create([
    request("hib", "Hibernate", { deleting: true, status: { vmName: VM } }),
  ], { registry });
  assert.deepEqual(await h.reconcile("hib"), {});
  assert.equal(registry.contains(VM, "hibernate"), false);
  assert.equal(await h.gone("hib"), true, "finalizer removed, object gone");
  await h.close();
});

Deno.test("delete removes the finalizer even when the tag delete fails", async () => {
  const registry = new FakeRegistry();
  registry.put(VM, "hibernate");
  registry.failNext("deleteManifest", new Error("registry unavailable"), { times: Infinity });
  const h = Harness.create([
    request("hib", "Hibernate", { deleting: true, status: { vmName: VM } }),
  ], { registry });
  assert.deepEqual(await h.reconcile("hib"), {});
  assert.equal(registry.callsOf("deleteManifest", VM).length, 1);
  assert.equal(await h.gone("hib"), true);
  await h.close();
});

Deno.test("delete makes no registry call when the request never recorded a VM", async () => {
  const registry = new FakeRegistry();
  const h = Harness.create([request("hib", "Hibernate", { deleting: true })], { registry });
  await h.reconcile("hib");
  assert.equal(registry.calls.length, 0);
  assert.equal(await h.gone("hib"), true);
  await h.close();
});

Deno.test("delete keeps the tag while another live request tracks the VM; the last drops it", async () => {
  const registry = new FakeRegistry();
  registry.put(VM, "hibernate");
  const hibernated: CocoonHibernationStatus = {
    vmName: VM,
    phase: COCOON_HIBERNATION_PHASE_HIBERNATED,
  };
  const h = Harness.create([
    request("a", "Hibernate", { deleting: true, status: hibernated }),
    request("b", "Hibernate", { status: hibernated }),
  ], { registry });
  await h.reconcile("a");
  assert.equal(await h.gone("a"), true);
  assert.equal(registry.contains(VM, "hibernate"), true, "b still holds the VM");
  assert.equal(registry.callsOf("deleteManifest").length, 0);

  await h.api.delete(CocoonHibernations, NS, "b");
  await h.reconcile("b");
  assert.equal(await h.gone("b"), true);
  assert.equal(registry.contains(VM, "hibernate"), false, "the last holder drops the tag");
  await h.close();
});

Deno.test("delete keeps the tag for a duplicate that has not reconciled yet (podRef match)", async () => {
  const registry = new FakeRegistry();
  registry.put(VM, "hibernate");
  const h = Harness.create([
    request("a", "Hibernate", { deleting: true, status: { vmName: VM } }),
    request("c", "Hibernate", { finalizers: [] }),
  ], { registry });
  await h.reconcile("a");
  assert.equal(registry.contains(VM, "hibernate"), true);
  assert.equal(registry.callsOf("deleteManifest").length, 0);
  await h.close();
});

// A Waking request has withdrawn the hibernate annotation: vk-cocoon is restoring the VM from
// `:hibernate`. Its finalizer dropped that tag under the restore, which then failed for good.
Deno.test("delete while Waking keeps the tag until the restored VM runs", async (t) => {
  const waking: CocoonHibernationStatus = { vmName: VM, phase: COCOON_HIBERNATION_PHASE_WAKING };
  await t.step("restore in flight: the tag stays, the finalizer goes", async () => {
    const registry = new FakeRegistry();
    registry.put(VM, "hibernate");
    const h = Harness.create([
      request("hib", "Wake", { deleting: true, status: waking }),
      vmPod({ lifecycle: HIBERNATED_LIFECYCLE }),
    ], { registry });
    assert.deepEqual(await h.reconcile("hib"), {});
    assert.equal(await h.gone("hib"), true);
    assert.equal(registry.contains(VM, "hibernate"), true);
    assert.equal(registry.callsOf("deleteManifest").length, 0);
    await h.close();
  });
  await t.step("the VM already runs again: the tag goes", async () => {
    const registry = new FakeRegistry();
    registry.put(VM, "hibernate");
    const h = Harness.create([
      request("hib", "Wake", { deleting: true, status: waking }),
      vmPod({ vmID: "vmid-new", running: true, lifecycle: { state: "ready" } }),
    ], { registry });
    await h.reconcile("hib");
    assert.equal(await h.gone("hib"), true);
    assert.equal(registry.contains(VM, "hibernate"), false);
    await h.close();
  });
  await t.step("the pod is gone: the tag goes", async () => {
    const registry = new FakeRegistry();
    registry.put(VM, "hibernate");
    const h = Harness.create([request("hib", "Wake", { deleting: true, status: waking })], {
      registry,
    });
    await h.reconcile("hib");
    assert.equal(await h.gone("hib"), true);
    assert.equal(registry.contains(VM, "hibernate"), false);
    await h.close();
  });
});

Deno.test("delete keeps the tag while the pod is still asked to hibernate (its VM's state is only there)", async (t) => {
  const phases: [string, CocoonHibernationStatus][] = [
    ["Hibernated", { vmName: VM, phase: COCOON_HIBERNATION_PHASE_HIBERNATED }],
    ["Hibernating", { vmName: VM, phase: COCOON_HIBERNATION_PHASE_HIBERNATING }],
  ];
  for (const [name, status] of phases) {
    await t.step(`${name}: the tag stays, the finalizer goes`, async () => {
      const registry = new FakeRegistry();
      registry.put(VM, "hibernate");
      const h = Harness.create([
        request("hib", "Hibernate", { deleting: true, status }),
        vmPod({ hibernate: true, lifecycle: HIBERNATED_LIFECYCLE }),
      ], { registry });
      assert.deepEqual(await h.reconcile("hib"), {});
      assert.equal(await h.gone("hib"), true);
      assert.equal(registry.contains(VM, "hibernate"), true);
      assert.equal(registry.callsOf("deleteManifest").length, 0);
      await h.close();
    });
  }
  await t.step("the pod was woken by hand and runs: the tag goes", async () => {
    const registry = new FakeRegistry();
    registry.put(VM, "hibernate");
    const h = Harness.create([
      request("hib", "Hibernate", {
        deleting: true,
        status: { vmName: VM, phase: COCOON_HIBERNATION_PHASE_HIBERNATED },
      }),
      vmPod({ vmID: "vmid-new", running: true, lifecycle: { state: "ready" } }),
    ], { registry });
    await h.reconcile("hib");
    assert.equal(await h.gone("hib"), true);
    assert.equal(registry.contains(VM, "hibernate"), false);
    await h.close();
  });
  await t.step("the pod now runs another VM: the recorded VM's tag goes", async () => {
    const registry = new FakeRegistry();
    registry.put(VM, "hibernate");
    const h = Harness.create([
      request("hib", "Hibernate", {
        deleting: true,
        status: { vmName: VM, phase: COCOON_HIBERNATION_PHASE_HIBERNATED },
      }),
      vmPod({ vmName: "vk-other", hibernate: true }),
    ], { registry });
    await h.reconcile("hib");
    assert.equal(registry.contains(VM, "hibernate"), false);
    await h.close();
  });
});

// --- the orphan mark: who drops a kept tag once the VM is back ---------------------------------

function podAnnotation(pod: Pod, key: string): string | undefined {
  return pod.metadata.annotations?.[key];
}

Deno.test("delete that keeps the tag for the hibernated pod marks it orphaned, with the VM id the pod shows", async (t) => {
  const cases: [string, ReturnType<typeof vmPod>, string][] = [
    ["hibernated (no VM id)", vmPod({ hibernate: true, lifecycle: HIBERNATED_LIFECYCLE }), ""],
    // vk-cocoon has pushed and not removed the VM yet: the tag goes only under another id.
    ["asked, VM still up", vmPod({ hibernate: true, vmID: "vmid-old", running: true }), "vmid-old"],
  ];
  for (const [name, pod, recorded] of cases) {
    await t.step(name, async () => {
      const registry = new FakeRegistry();
      registry.put(VM, "hibernate");
      const h = Harness.create([
        request("hib", "Hibernate", {
          deleting: true,
          status: { vmName: VM, phase: COCOON_HIBERNATION_PHASE_HIBERNATED },
        }),
        pod,
      ], { registry });
      await h.reconcile("hib");
      assert.equal(await h.gone("hib"), true);
      assert.equal(registry.contains(VM, "hibernate"), true);
      assert.equal(podAnnotation(await h.pod(), ANNOTATION_ORPHAN_HIBERNATE_TAG), recorded);
      assert.equal(readHibernateState(await h.pod()), true, "the finalizer leaves the ask alone");
      await h.close();
    });
  }
  await t.step("Waking, the restore in flight: marked too", async () => {
    const registry = new FakeRegistry();
    registry.put(VM, "hibernate");
    const h = Harness.create([
      request("hib", "Wake", {
        deleting: true,
        status: { vmName: VM, phase: COCOON_HIBERNATION_PHASE_WAKING },
      }),
      vmPod({ lifecycle: HIBERNATED_LIFECYCLE }),
    ], { registry });
    await h.reconcile("hib");
    assert.equal(podAnnotation(await h.pod(), ANNOTATION_ORPHAN_HIBERNATE_TAG), "");
    await h.close();
  });
});

Deno.test("delete marks nothing when another owner keeps the tag, or when it is dropped", async (t) => {
  const hibernated: CocoonHibernationStatus = {
    vmName: VM,
    phase: COCOON_HIBERNATION_PHASE_HIBERNATED,
  };
  await t.step("the pod's CocoonSet is suspended: its suspend owns the tag", async () => {
    const registry = new FakeRegistry();
    registry.put(VM, "hibernate");
    const pod = vmPod({ hibernate: true, lifecycle: HIBERNATED_LIFECYCLE });
    const h = Harness.create([
      request("hib", "Hibernate", { deleting: true, status: hibernated }),
      pod,
    ], {
      registry,
    });
    h.api.seed(CocoonSets, {
      apiVersion: "cocoonset.cocoonstack.io/v1",
      kind: "CocoonSet",
      metadata: { namespace: NS, name: "demo" },
      spec: { agent: { image: "img" }, suspend: true },
    } as CocoonSet);
    await h.reconcile("hib");
    assert.equal(registry.contains(VM, "hibernate"), true);
    assert.equal(podAnnotation(await h.pod(), ANNOTATION_ORPHAN_HIBERNATE_TAG), undefined);
    await h.close();
  });
  await t.step("another live request still tracks the VM", async () => {
    const registry = new FakeRegistry();
    registry.put(VM, "hibernate");
    const h = Harness.create([
      request("a", "Hibernate", { deleting: true, status: hibernated }),
      request("b", "Hibernate", { status: hibernated }),
      vmPod({ hibernate: true, lifecycle: HIBERNATED_LIFECYCLE }),
    ], { registry });
    await h.reconcile("a");
    assert.equal(podAnnotation(await h.pod(), ANNOTATION_ORPHAN_HIBERNATE_TAG), undefined);
    await h.close();
  });
  await t.step("the VM runs again: the tag is dropped, nothing to mark", async () => {
    const registry = new FakeRegistry();
    registry.put(VM, "hibernate");
    const h = Harness.create([
      request("hib", "Hibernate", { deleting: true, status: hibernated }),
      vmPod({ vmID: "vmid-new", running: true, lifecycle: { state: "ready" } }),
    ], { registry });
    await h.reconcile("hib");
    assert.equal(registry.contains(VM, "hibernate"), false);
    assert.equal(podAnnotation(await h.pod(), ANNOTATION_ORPHAN_HIBERNATE_TAG), undefined);
    await h.close();
  });
});

Deno.test("killed after the mark, before the finalizer goes: the next pass ends the same way", async () => {
  const registry = new FakeRegistry();
  registry.put(VM, "hibernate");
  const h = Harness.create([
    request("hib", "Hibernate", {
      deleting: true,
      status: { vmName: VM, phase: COCOON_HIBERNATION_PHASE_HIBERNATED },
    }),
    vmPod({ hibernate: true, lifecycle: HIBERNATED_LIFECYCLE }),
  ], { registry });
  const undo = h.api.addReactor((a) =>
    a.verb === "patch" && a.resource === CocoonHibernations
      ? new Error("operator killed")
      : undefined
  );
  await assert.rejects(h.reconcile("hib"), /operator killed/);
  undo();
  assert.equal(await h.gone("hib"), false);
  assert.equal(podAnnotation(await h.pod(), ANNOTATION_ORPHAN_HIBERNATE_TAG), "");
  await h.reconcile("hib");
  assert.equal(await h.gone("hib"), true);
  assert.equal(registry.contains(VM, "hibernate"), true);
  assert.equal(podAnnotation(await h.pod(), ANNOTATION_ORPHAN_HIBERNATE_TAG), "");
  await h.close();
});
