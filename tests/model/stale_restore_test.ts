/**
 * The stale restore on scripted runs of the model world (both reconcilers, the vk-cocoon model):
 * a CocoonHibernation hibernates the main, is deleted, and the set brings the VM back. Its
 * `:hibernate` tag must go once the VM runs again — and not before — or a later restore brings
 * back the state of that old hibernation over everything the VM ran since: through the
 * operator's own restore of a missing main, or through vk-cocoon waking a new pod of the name
 * from whatever tag it finds.
 *
 * @module
 */
import assert from "node:assert/strict";
import { Pods } from "../../kube/core.ts";
import type { CocoonHibernation } from "../../common/apis/v1/cocoonhibernation_types.ts";
import { CocoonHibernations, CocoonSets } from "../../common/apis/v1/resources.ts";
import { readHibernateState, readOrphanTagMark, vmUp } from "../../common/meta/mod.ts";
import { HIBERNATE_SNAPSHOT_TAG } from "../../snapshot/registry.ts";
import { ModelRun } from "./_world.ts";
import type { VkMode } from "./_vk_model.ts";

const NS = "ns";
const SET = { ns: NS, name: "demo" };
const POD = "demo-0";
const VM = "vk-ns-demo-0";
const MODES: readonly VkMode[] = ["head", "contract"];

function failWith(run: ModelRun, what: string): never {
  throw new Error(`${what}\n${run.trace.join("\n")}`);
}

function assertNoViolation(run: ModelRun): void {
  if (run.violations.length > 0) {
    failWith(run, `violations: ${run.violations.map((v) => `${v.kind}: ${v.what}`).join("; ")}`);
  }
}

async function main(run: ModelRun) {
  return await run.fake.get(Pods, NS, POD);
}

function tagThere(run: ModelRun): boolean {
  return run.registry.contains(VM, HIBERNATE_SNAPSHOT_TAG);
}

/**
 * The set runs its main; a Hibernate request puts the VM to sleep (its tag pushed) and is
 * deleted. Returns the run right after the request's finalizer ran.
 */
async function requestDeletedWhileHibernated(mode: VkMode): Promise<ModelRun> {
  const run = new ModelRun(7, { mode, shape: "one", removeFailureRate: 0 });
  await run.prelude();
  const hib: CocoonHibernation = {
    apiVersion: "cocoonset.cocoonstack.io/v1",
    kind: "CocoonHibernation",
    metadata: { name: "h", namespace: NS },
    spec: { podRef: { name: POD }, desire: "Hibernate" },
  };
  await run.user("create CocoonHibernation ns/h Hibernate demo-0", async () => {
    await run.fake.create(CocoonHibernations, hib);
    run.hibKeys.push({ ns: NS, name: "h" });
  });
  await run.quiet(40, false);
  const stored = await run.fake.get(CocoonHibernations, NS, "h");
  if (stored.status?.phase !== "Hibernated") failWith(run, "the request did not hibernate");
  await run.user(
    "delete CocoonHibernation ns/h",
    () => run.fake.delete(CocoonHibernations, NS, "h"),
  );
  await run.pass("hib", { ns: NS, name: "h" }, false);
  assertNoViolation(run);
  return run;
}

for (const mode of MODES) {
  Deno.test(`stale restore (vk ${mode}): a deleted request's tag stays while the pod sleeps and goes once the VM is back`, async () => {
    const run = await requestDeletedWhileHibernated(mode);
    assert.equal(tagThere(run), true, "the hibernated VM's only copy stays");
    assert.notEqual(readOrphanTagMark(await main(run)), undefined, "the tag is marked orphaned");

    // The set withdraws the hibernate request nobody owns; the VM is still down.
    await run.pass("set", SET, false);
    assert.equal(readHibernateState(await main(run)), false);
    assert.equal(vmUp(await main(run)), false);
    assert.equal(tagThere(run), true, "not before the VM runs again");

    // vk-cocoon restores the VM from the tag; the set's next pass drops it.
    while (!vmUp(await main(run))) {
      if (!await run.vkStep()) failWith(run, "vk-cocoon never restored the VM");
    }
    assert.equal(tagThere(run), true, "the set has not looked yet");
    await run.quiet(40, false);
    assert.equal(tagThere(run), false, "the tag outlived the VM's return");
    assert.equal(readOrphanTagMark(await main(run)), undefined);
    assertNoViolation(run);
  });

  Deno.test(`stale restore (vk ${mode}): a main recreated under a suspend does not come back from the deleted request's tag`, async () => {
    const run = await requestDeletedWhileHibernated(mode);
    await run.quiet(40, false);
    // The VM runs on past the old snapshot; the user deletes its pod and suspends the set before
    // the main is back: the set creates it, restoring from `:hibernate` if there is one.
    await run.user("delete pod ns/demo-0", async () => {
      run.vk.noteUserDelete(await main(run));
      await run.fake.delete(Pods, NS, POD);
    });
    await run.user(
      "suspend ns/demo (retain)",
      () => run.fake.patch(CocoonSets, NS, SET.name, "merge", { spec: { suspend: true } }),
    );
    await run.quiet(60, false);
    assertNoViolation(run);
    assert.equal((await run.fake.get(CocoonSets, NS, SET.name)).status?.phase, "Suspended");
  });

  Deno.test(`stale restore (vk ${mode}): vk-cocoon does not wake a new pod of the VM from the deleted request's tag`, async () => {
    const run = await requestDeletedWhileHibernated(mode);
    await run.quiet(40, false);
    // A new pod of the name, asked to hibernate before its first boot, across a vk-cocoon
    // restart: vk-cocoon then tracks it as hibernated and wakes it from whatever tag it finds.
    await run.user("delete pod ns/demo-0", async () => {
      run.vk.noteUserDelete(await main(run));
      await run.fake.delete(Pods, NS, POD);
    });
    await run.vkStep(); // DeletePod: the VM goes (its state to :latest)
    await run.pass("set", SET, false); // the main is created again
    await run.vkStep(); // and bound, not booted yet
    await run.user(
      "suspend ns/demo (retain)",
      () => run.fake.patch(CocoonSets, NS, SET.name, "merge", { spec: { suspend: true } }),
    );
    await run.pass("set", SET, false); // asks the new pod to hibernate
    assert.equal(readHibernateState(await main(run)), true);
    if (!await run.vkStep(true)) failWith(run, "vk-cocoon could not restart");
    await run.quiet(20, false);
    await run.user(
      "unsuspend ns/demo",
      () => run.fake.patch(CocoonSets, NS, SET.name, "merge", { spec: { suspend: false } }),
    );
    await run.quiet(60, false);
    assertNoViolation(run);
    assert.equal(vmUp(await main(run)), true);
  });
}
