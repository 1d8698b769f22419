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

/** A world with one claimed VM (unless claimed is false) and a vk model that never fails. */
function world(mode: VkMode = "head", claimed = true) {
  const fake = new FakeClient();
  const registry = new FakeRegistry();
  const vk = new VkModel(mode, fake, registry, new Rng(1), () => claimed ? "test" : undefined, 0);
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
