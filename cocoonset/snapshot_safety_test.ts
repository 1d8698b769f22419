/**
 * Issue 18 on the fake API, the CocoonSet side: every released-seat wake ends, a stale node hint
 * never restores a failed main, migration deletes the old main only on the VM's own confirmation,
 * and teardown deletes tags only under names the set derives and no other namespace shares.
 */
import assert from "node:assert/strict";
import { type Pod, Pods } from "../kube/core.ts";
import type { CocoonSet } from "../common/apis/v1/cocoonset_types.ts";
import { CocoonHibernations, CocoonSets } from "../common/apis/v1/resources.ts";
import {
  AnnotationHibernateAskedVMID,
  AnnotationHibernatedOnNode,
  AnnotationVMID,
  AnnotationVMName,
  applyHibernateState,
  applyLifecycleStatus,
  HibernateSnapshotTag,
  markRestoreFromHibernate,
  readHibernateState,
} from "../common/meta/mod.ts";
import { AnnotationDeleteVMNames } from "./delete.ts";
import { ReasonOrphanHibernateWithdrawn, reconcileWake } from "./slot_release.ts";
import {
  deferredDropEventIntervalMs,
  dropTag,
  ReasonSnapshotDeleteDeferred,
  ReasonSnapshotDeleteRefused,
} from "./tag_gate.ts";
import { reconcileMigration } from "./migrate.ts";
import {
  depsOf,
  getPod,
  getSet,
  newCocoonSet,
  newHibernation,
  newTestEnv,
  newTestPass,
  reconcileSet,
  seedSet,
  testNamespace,
  withFinalizer,
} from "./_test_support.ts";
import { mainPod, mainVMName, seatSet, seatSetName } from "./_seats_test_support.ts";

function wakeSet(phase: string, hint: string): CocoonSet {
  return seatSet((cs) => {
    cs.spec.hibernatePolicy = "release";
    cs.status = { phase } as CocoonSet["status"];
    if (hint) cs.metadata.annotations = { [AnnotationHibernatedOnNode]: hint };
  });
}

function withHibernate(pod: Pod): Pod {
  applyHibernateState(true, pod);
  return pod;
}

function restoreMarked(pod: Pod): Pod {
  markRestoreFromHibernate(pod);
  return pod;
}

Deno.test("finding 3: a released-seat wake withdraws a hibernate request nobody owns and finishes", async () => {
  const env = newTestEnv();
  env.registry.put(mainVMName, HibernateSnapshotTag);
  const cs = env.fake.seed(CocoonSets, wakeSet("Waking", "node-a"));
  // The restore pod carries a hibernate request whose CocoonHibernation is gone.
  const main = env.fake.seed(Pods, withHibernate(restoreMarked(mainPod(cs, { node: "node-a" }))));

  await reconcileWake(newTestPass(depsOf(env), cs, [main]));

  assert.equal(readHibernateState((await getPod(env.fake, "demo-0"))!), false);
  assert.equal(env.recorder.withReason(ReasonOrphanHibernateWithdrawn).length, 1);
  assert.ok(env.registry.contains(mainVMName, HibernateSnapshotTag), "the restore still needs it");
});

Deno.test("finding 3: a hibernate request a CocoonHibernation owns is left on the restore pod", async () => {
  const env = newTestEnv();
  env.registry.put(mainVMName, HibernateSnapshotTag);
  env.fake.seed(CocoonHibernations, newHibernation("demo-0", "Hibernate", "Hibernating"));
  const cs = env.fake.seed(CocoonSets, wakeSet("Waking", "node-a"));
  const main = env.fake.seed(Pods, withHibernate(restoreMarked(mainPod(cs, { node: "node-a" }))));

  await reconcileWake(newTestPass(depsOf(env), cs, [main]));

  assert.equal(readHibernateState((await getPod(env.fake, "demo-0"))!), true);
  assert.equal(env.recorder.withReason(ReasonOrphanHibernateWithdrawn).length, 0);
});

Deno.test("finding 4: a stale node hint is cleared once the main runs in place; a failed main is then not restored from it", async () => {
  const env = newTestEnv();
  env.registry.put(mainVMName, HibernateSnapshotTag);
  // An aborted release left the hint (and the tag); the main runs in place.
  const cs = env.fake.seed(CocoonSets, wakeSet("Running", "node-a"));
  const main = env.fake.seed(
    Pods,
    mainPod(cs, { node: "node-a", vmID: "vmid-1", running: true }),
  );
  await reconcileWake(newTestPass(depsOf(env), cs, [main]));
  let stored = await getSet(env.fake, seatSetName);
  assert.equal(stored.metadata.annotations?.[AnnotationHibernatedOnNode] ?? "", "");

  // Weeks later the main fails and the user deletes it: the normal flow boots it, no restore.
  await env.fake.delete(Pods, testNamespace, "demo-0", { gracePeriodSeconds: 0 });
  stored = await getSet(env.fake, seatSetName);
  stored.status = { phase: "Failed" } as CocoonSet["status"];
  stored = await env.fake.updateStatus(CocoonSets, stored);
  const got = await reconcileWake(newTestPass(depsOf(env), stored, []));
  assert.equal(got.handled, false);
  assert.equal(await getPod(env.fake, "demo-0"), undefined, "no restore pod from the stale tag");
});

async function seedDeleting(env: ReturnType<typeof newTestEnv>, cs: CocoonSet): Promise<void> {
  withFinalizer(cs);
  seedSet(env, cs, []);
  await env.fake.delete(CocoonSets, cs.metadata.namespace ?? "", cs.metadata.name ?? "");
}

Deno.test("tenancy: teardown never deletes a name taken from delete-vm-names alone", async () => {
  const env = newTestEnv();
  env.registry.put("vk-victim-app-0", HibernateSnapshotTag);
  env.registry.put("vk-victim-app-0", "latest");
  const cs = newCocoonSet("demo", (c) => {
    c.metadata.annotations = { [AnnotationDeleteVMNames]: "vk-ns-demo-0,vk-victim-app-0" };
  });
  await seedDeleting(env, cs);
  await reconcileSet(env, "demo");
  assert.ok(env.registry.contains("vk-victim-app-0", HibernateSnapshotTag));
  assert.ok(env.registry.contains("vk-victim-app-0", "latest"));
  assert.equal(
    env.registry.callsOf("deleteManifest").filter((c) => c.name === "vk-victim-app-0").length,
    0,
  );
  const refused = env.recorder.withReason(ReasonSnapshotDeleteRefused);
  assert.ok(refused.length > 0);
  assert.match(refused[0].message, /vk-victim-app-0/);
  assert.equal((await env.fake.list(CocoonSets)).items.length, 0, "teardown still finishes");
});

Deno.test("tenancy: teardown of team-x/prod keeps vk-team-x-prod-0, which team/x-prod-0 shares, naming both", async () => {
  const env = newTestEnv();
  const vm = "vk-team-x-prod-0";
  env.registry.put(vm, "latest");
  env.registry.put(vm, HibernateSnapshotTag);
  const other = mainPod(newCocoonSet("x-prod"));
  other.metadata.namespace = "team";
  other.metadata.name = "x-prod-0";
  other.metadata.annotations = { ...other.metadata.annotations, [AnnotationVMName]: vm };
  env.fake.seed(Pods, other);
  const cs = newCocoonSet("prod", (c) => {
    c.metadata.namespace = "team-x";
    c.status = { agents: [{ slot: 0, role: "main", podName: "prod-0", vmName: vm }] };
  });
  await seedDeleting(env, cs);
  await env.reconciler.reconcile(
    { namespace: "team-x", name: "prod" },
    new AbortController().signal,
  );
  assert.ok(env.registry.contains(vm, "latest"));
  assert.ok(env.registry.contains(vm, HibernateSnapshotTag));
  const refused = env.recorder.withReason(ReasonSnapshotDeleteRefused);
  assert.ok(refused.length > 0);
  assert.match(refused[0].message, /CocoonSet team-x\/prod.*Pod team\/x-prod-0/);
});

async function migrationStep(
  env: ReturnType<typeof newTestEnv>,
  edit: (pod: Pod) => void,
): Promise<boolean> {
  const cs = await getSet(env.fake, seatSetName);
  let main = await getPod(env.fake, "demo-0");
  if (!main) return true;
  edit(main);
  main = await env.fake.update(Pods, main);
  await reconcileMigration(newTestPass(depsOf(env), cs, [main]));
  const after = await getPod(env.fake, "demo-0");
  return after === undefined || after.metadata.deletionTimestamp !== undefined;
}

Deno.test("finding 5: migration deletes the old main only on the VM's own confirmation", async (t) => {
  const seed = () => {
    const env = newTestEnv();
    env.registry.put(mainVMName, HibernateSnapshotTag);
    const cs = env.fake.seed(
      CocoonSets,
      seatSet((c) => {
        c.spec.nodeName = "node-b";
        c.status = { phase: "Migrating" } as CocoonSet["status"];
      }),
    );
    // The migration asked the VM to hibernate; vk-cocoon pushed the tag, the VM still runs.
    env.fake.seed(
      Pods,
      withHibernate(mainPod(cs, { node: "node-a", vmID: "vmid-1", running: true })),
    );
    return env;
  };
  await t.step("vk-cocoon of today (no lifecycle annotations): pushed, not removed", async () => {
    const env = seed();
    assert.equal(await migrationStep(env, () => {}), false, "the tag alone is no confirmation");
    // The removal done, vk-cocoon clears the VM id: that is its confirmation.
    assert.equal(
      await migrationStep(env, (p) => {
        delete p.metadata.annotations![AnnotationVMID];
        p.status = { phase: "Pending" };
      }),
      true,
    );
  });
  await t.step(
    "a vk-cocoon that writes lifecycle annotations: hibernating, then hibernated",
    async () => {
      const env = seed();
      const lifecycle = (state: string) => (p: Pod) =>
        applyLifecycleStatus({ state, observedGeneration: 1, message: "" }, p);
      assert.equal(await migrationStep(env, lifecycle("hibernating")), false);
      // A push rolled back after a failed removal: the VM runs on, reports ready again.
      assert.equal(await migrationStep(env, lifecycle("ready")), false);
      assert.equal(await migrationStep(env, lifecycle("hibernated")), true);
    },
  );
});

Deno.test("model seed 241: a migration finishes past a live Hibernate request that yields to it", async () => {
  const env = newTestEnv();
  env.registry.put(mainVMName, HibernateSnapshotTag);
  const cs = seedSet(
    env,
    seatSet(withFinalizer, (c) => {
      c.spec.nodeName = "node-b";
      c.status = { phase: "Migrating" } as CocoonSet["status"];
    }),
  );
  // The restored main runs on the target; the request waits for the migration to end.
  env.fake.seed(
    Pods,
    restoreMarked(mainPod(cs, { node: "node-b", vmID: "vmid-2", running: true })),
  );
  env.fake.seed(CocoonHibernations, newHibernation("demo-0", "Hibernate", "Hibernating"));
  for (
    let i = 0;
    i < 4 && (await getSet(env.fake, seatSetName)).status?.phase === "Migrating";
    i++
  ) {
    await reconcileSet(env, seatSetName);
  }
  assert.equal(env.registry.contains(mainVMName, HibernateSnapshotTag), false);
  assert.notEqual((await getSet(env.fake, seatSetName)).status?.phase, "Migrating");
});

Deno.test("a drop the gate defers gets a Warning naming the claimant, once per requeue interval", async () => {
  const env = newTestEnv();
  env.registry.put(mainVMName, HibernateSnapshotTag);
  const cs = seedSet(env, seatSet((c) => c.status = { phase: "Running" } as CocoonSet["status"]));
  env.fake.seed(CocoonHibernations, newHibernation("demo-0", "Hibernate", "Hibernated"));
  const drop = async () => {
    const verdict = await dropTag(newTestPass(depsOf(env), cs), mainVMName, HibernateSnapshotTag);
    assert.equal(verdict.allowed, false);
  };
  await drop();
  await drop();
  const deferred = () => env.recorder.withReason(ReasonSnapshotDeleteDeferred);
  assert.equal(deferred().length, 1, "one Warning for two passes inside the interval");
  assert.equal(deferred()[0].type, "Warning");
  assert.match(deferred()[0].message, /CocoonHibernation ns\/h-demo-0/);
  env.clock.advance(deferredDropEventIntervalMs);
  await drop();
  assert.equal(deferred().length, 2);
  assert.ok(env.registry.contains(mainVMName, HibernateSnapshotTag));
});

Deno.test("model seed 3093 (vk-cocoon HEAD): a migration keeps a tag the VM asked to hibernate may just have pushed", async () => {
  const env = newTestEnv();
  env.registry.put(mainVMName, HibernateSnapshotTag);
  const cs = env.fake.seed(
    CocoonSets,
    seatSet((c) => {
      c.spec.nodeName = "node-b";
      c.status = { phase: "Running" } as CocoonSet["status"];
    }),
  );
  // A suspend asked vmid-1 to hibernate, an unsuspend withdrew the ask after vk-cocoon pushed:
  // the VM still shows up under vmid-1 until vk-cocoon removes it and restores it from the tag.
  const main = mainPod(cs, { node: "node-a", vmID: "vmid-1", running: true });
  main.metadata.annotations = {
    ...main.metadata.annotations,
    [AnnotationHibernateAskedVMID]: "vmid-1",
  };
  env.fake.seed(Pods, main);
  await reconcileMigration(newTestPass(depsOf(env), cs, [main]));
  assert.ok(
    env.registry.contains(mainVMName, HibernateSnapshotTag),
    "the tag may be the only copy",
  );
  assert.equal(env.registry.callsOf("deleteManifest").length, 0);
  const asked = await getPod(env.fake, "demo-0");
  assert.equal(readHibernateState(asked!), true, "asked to hibernate again for the migration");
  assert.equal((await getSet(env.fake, seatSetName)).status?.phase, "Migrating");
});
