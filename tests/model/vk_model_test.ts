/**
 * The model's own judges, on scripted sequences: a model-based test whose checks cannot fire
 * proves nothing, so each check is shown firing on the sequence it exists for, and staying quiet
 * on its harmless neighbour.
 *
 * @module
 */
import assert from "node:assert/strict";
import { type Pod, Pods } from "../../kube/core.ts";
import { FakeClient } from "../../kube/testing/fake.ts";
import { FakeRegistry } from "../../snapshot/testing/fake.ts";
import {
  ANNOTATION_COCOON_SET_GENERATION,
  ANNOTATION_HIBERNATE,
  ANNOTATION_LIFECYCLE_OBSERVED_GENERATION,
  ANNOTATION_LIFECYCLE_STATE,
  ANNOTATION_RESTORE_FROM_HIBERNATE,
  ANNOTATION_VM_NAME,
  ANNOTATION_VMID,
} from "../../common/meta/mod.ts";
import { Rng } from "./_rng.ts";
import { type VkMode, VkModel } from "./_vk_model.ts";
import { HIBERNATE_SNAPSHOT_TAG } from "../../snapshot/registry.ts";

const VM = "vk-ns-demo-0";

function pod(name: string, annotations: Record<string, string> = {}, ns = "ns"): Pod {
  return {
    apiVersion: "v1",
    kind: "Pod",
    metadata: {
      name,
      namespace: ns,
      annotations: {
        [ANNOTATION_VM_NAME]: VM,
        [ANNOTATION_COCOON_SET_GENERATION]: "2",
        ...annotations,
      },
    },
    spec: { containers: [{ name: "agent", image: "x" }] },
  };
}

/**
 * A world with one claimed VM (unless claimed is false) and a vk model that never fails; with
 * suspending, every push is a set suspend's.
 */
function world(mode: VkMode = "head", claimed = true, suspending = false) {
  const fake = new FakeClient();
  const registry = new FakeRegistry();
  const vk = new VkModel(
    mode,
    fake,
    registry,
    new Rng(1),
    () => claimed ? "test" : undefined,
    0,
    () => suspending,
  );
  return { fake, registry, vk };
}

async function settle(vk: VkModel): Promise<void> {
  for (let i = 0; i < 20 && await vk.step(); i++);
}

async function annotate(
  fake: FakeClient,
  name: string,
  annotations: Record<string, string | null>,
) {
  await fake.patch(Pods, "ns", name, "merge", { metadata: { annotations } });
}

/** Boots demo-0 and hibernates it: its state is then only in :hibernate. */
async function hibernated(mode: VkMode = "head", claimed = true) {
  const w = world(mode, claimed);
  w.fake.seed(Pods, pod("demo-0"));
  await settle(w.vk);
  await annotate(w.fake, "demo-0", { [ANNOTATION_HIBERNATE]: "true" });
  await settle(w.vk);
  return w;
}

Deno.test("vk model: deleting the tag that holds the only copy of a claimed state is a violation", async () => {
  const w = await hibernated();
  assert.equal(w.vk.tagHolds(VM, HIBERNATE_SNAPSHOT_TAG), w.vk.latest(VM));
  assert.equal(w.vk.liveHoldsLatest(VM), false);
  assert.match(w.vk.judgeTagDelete(VM, HIBERNATE_SNAPSHOT_TAG, "site")?.kind ?? "", /site/);

  const unclaimed = await hibernated("head", false);
  assert.equal(unclaimed.vk.judgeTagDelete(VM, HIBERNATE_SNAPSHOT_TAG, "site"), undefined);
});

Deno.test("vk model: deleting a tag older than the running VM's state is no violation", async () => {
  const w = await hibernated();
  await annotate(w.fake, "demo-0", { [ANNOTATION_HIBERNATE]: null });
  await settle(w.vk); // the wake restores, the VM moves on past the tag
  assert.equal(w.vk.liveHoldsLatest(VM), true);
  assert.equal(w.vk.judgeTagDelete(VM, HIBERNATE_SNAPSHOT_TAG, "site"), undefined);
  assert.deepEqual(w.vk.violations, []);
});

Deno.test("vk model: a fresh boot over claimed state is a violation; a restore is not", async () => {
  const w = await hibernated();
  await w.fake.delete(Pods, "ns", "demo-0", { gracePeriodSeconds: 0 });
  w.fake.seed(Pods, pod("demo-0"));
  await settle(w.vk);
  assert.deepEqual(w.vk.violations.map((v) => v.kind), ["booted fresh over saved state"]);

  const r = await hibernated();
  await r.fake.delete(Pods, "ns", "demo-0", { gracePeriodSeconds: 0 });
  r.fake.seed(Pods, pod("demo-0", { [ANNOTATION_RESTORE_FROM_HIBERNATE]: "true" }));
  await settle(r.vk);
  assert.deepEqual(r.vk.violations, []);
  assert.equal(r.vk.liveHoldsLatest(VM), true);
});

Deno.test("vk model: a restore whose tag is gone loses the state", async () => {
  const w = await hibernated();
  await w.registry.deleteManifest(VM, HIBERNATE_SNAPSHOT_TAG);
  await annotate(w.fake, "demo-0", { [ANNOTATION_HIBERNATE]: null });
  await settle(w.vk);
  // vk-cocoon retries the pull on every update; each attempt finds the tag gone.
  assert.deepEqual([...new Set(w.vk.violations.map((v) => v.kind))], [
    "restore found no snapshot (state lost)",
  ]);
});

Deno.test("vk model: a pod deleted while its VM holds the only copy of its state is a violation, unless the user deleted it", async () => {
  const w = world();
  w.fake.seed(Pods, pod("demo-0"));
  await settle(w.vk);
  await w.fake.delete(Pods, "ns", "demo-0");
  await settle(w.vk);
  assert.deepEqual(w.vk.violations.map((v) => v.kind), [
    "pod deleted before its VM's state was saved",
  ]);

  const u = world();
  u.fake.seed(Pods, pod("demo-0"));
  await settle(u.vk);
  u.vk.noteUserDelete(await u.fake.get(Pods, "ns", "demo-0"));
  await u.fake.delete(Pods, "ns", "demo-0");
  await settle(u.vk);
  assert.deepEqual(u.vk.violations, []);
});

Deno.test("vk model: two pods running one VM name is a violation", async () => {
  const w = world();
  w.fake.seed(Pods, pod("x-prod-0", {}, "team"));
  w.fake.seed(Pods, pod("prod-0", {}, "team-x"));
  await settle(w.vk);
  assert.ok(w.vk.violations.some((v) => v.kind === "two live VMs for one name"));
});

Deno.test("vk model: head writes no lifecycle annotations, contract writes the pair", async () => {
  const head = await hibernated("head");
  const h = await head.fake.get(Pods, "ns", "demo-0");
  assert.equal(h.metadata.annotations?.[ANNOTATION_LIFECYCLE_STATE], undefined);
  assert.equal(h.metadata.annotations?.[ANNOTATION_VMID], undefined);

  const contract = await hibernated("contract");
  const c = await contract.fake.get(Pods, "ns", "demo-0");
  assert.equal(c.metadata.annotations?.[ANNOTATION_LIFECYCLE_STATE], "hibernated");
  assert.equal(c.metadata.annotations?.[ANNOTATION_LIFECYCLE_OBSERVED_GENERATION], "2");
  assert.equal(c.metadata.annotations?.[ANNOTATION_VMID], undefined);
});

/**
 * demo-0 hibernated and woken once: its VM runs on past the `:hibernate` it came back from, which
 * stays in the registry (nobody dropped it). Then the user deletes the pod (vk-cocoon's DeletePod
 * forgets the name) and a new pod of the name, asked to hibernate before its first boot, meets a
 * vk-cocoon restart.
 */
async function newPodAfterRestart(suspending = false) {
  const w = world("head", true, suspending);
  w.fake.seed(Pods, pod("demo-0"));
  await settle(w.vk);
  await annotate(w.fake, "demo-0", { [ANNOTATION_HIBERNATE]: "true" });
  await settle(w.vk);
  await annotate(w.fake, "demo-0", { [ANNOTATION_HIBERNATE]: null });
  await settle(w.vk);
  w.vk.noteSeen(VM); // an operator pass saw the VM back: the tag's owner had its chance
  const old = await w.fake.get(Pods, "ns", "demo-0");
  w.vk.noteUserDelete(old);
  await w.fake.delete(Pods, "ns", "demo-0");
  await settle(w.vk);
  const fresh = pod("demo-0", { [ANNOTATION_HIBERNATE]: "true" });
  fresh.spec!.nodeName = "node-a";
  w.fake.seed(Pods, fresh);
  assert.equal(await w.vk.restart(), true);
  return w;
}

Deno.test("vk model: after a restart a new pod asked to hibernate is woken from whatever :hibernate holds; a stale one is a violation", async () => {
  const w = await newPodAfterRestart();
  await settle(w.vk);
  assert.equal(w.vk.runs("ns/demo-0"), false, "tracked as hibernated: no boot while asked");
  await annotate(w.fake, "demo-0", { [ANNOTATION_HIBERNATE]: null });
  await settle(w.vk);
  assert.equal(w.vk.runs("ns/demo-0"), true);
  assert.deepEqual(w.vk.violations.map((v) => v.kind), ["stale restore"]);
});

Deno.test("vk model: with the stale tag gone the new pod boots fresh, and nothing is judged", async () => {
  const w = await newPodAfterRestart();
  await w.registry.deleteManifest(VM, HIBERNATE_SNAPSHOT_TAG);
  await annotate(w.fake, "demo-0", { [ANNOTATION_HIBERNATE]: null });
  await settle(w.vk);
  assert.equal(w.vk.runs("ns/demo-0"), true);
  assert.deepEqual(w.vk.violations, []);
});

Deno.test("vk model: a stale restore of a tag a set's suspend pushed is counted, not judged", async () => {
  const w = await newPodAfterRestart(true);
  await annotate(w.fake, "demo-0", { [ANNOTATION_HIBERNATE]: null });
  await settle(w.vk);
  assert.deepEqual(w.vk.violations, []);
  assert.equal(w.vk.suspendLeftoverRestores, 1);
});

Deno.test("vk model: a restart is held off while a wake is owed or a hibernation is between push and removal", async () => {
  const w = await hibernated();
  await annotate(w.fake, "demo-0", { [ANNOTATION_HIBERNATE]: null });
  assert.equal(await w.vk.restart(), false, "a withdrawn hibernation's wake is owed");
  await settle(w.vk);
  await annotate(w.fake, "demo-0", { [ANNOTATION_HIBERNATE]: "true" });
  await w.vk.step(); // saved and pushed, not removed yet
  assert.equal(w.vk.hibernating, true);
  assert.equal(await w.vk.restart(), false);
});

Deno.test("vk model: a tag restored again before any operator pass saw its VM back is counted, not judged", async () => {
  const w = world("head", false);
  w.fake.seed(Pods, pod("demo-0"));
  await settle(w.vk);
  await annotate(w.fake, "demo-0", { [ANNOTATION_HIBERNATE]: "true" });
  await settle(w.vk);
  await annotate(w.fake, "demo-0", { [ANNOTATION_HIBERNATE]: null });
  await settle(w.vk); // back from the tag, running on past it; no pass has looked yet
  await w.fake.delete(Pods, "ns", "demo-0");
  await settle(w.vk);
  w.fake.seed(Pods, pod("demo-0", { [ANNOTATION_RESTORE_FROM_HIBERNATE]: "true" }));
  await settle(w.vk);
  assert.equal(w.vk.unseenReturnRestores, 1);
  assert.deepEqual(w.vk.violations, []);

  // The same once a pass has seen the VM back: judged.
  const seen = world("head", false);
  seen.fake.seed(Pods, pod("demo-0"));
  await settle(seen.vk);
  await annotate(seen.fake, "demo-0", { [ANNOTATION_HIBERNATE]: "true" });
  await settle(seen.vk);
  await annotate(seen.fake, "demo-0", { [ANNOTATION_HIBERNATE]: null });
  await settle(seen.vk);
  seen.vk.noteSeen(VM);
  await seen.fake.delete(Pods, "ns", "demo-0");
  await settle(seen.vk);
  seen.fake.seed(Pods, pod("demo-0", { [ANNOTATION_RESTORE_FROM_HIBERNATE]: "true" }));
  await settle(seen.vk);
  assert.deepEqual(seen.vk.violations.map((v) => v.kind), ["stale restore"]);
});
