/**
 * Snapshot safety on the fake API, the CocoonSet side: every released-seat wake ends, a stale node hint
 * never restores a failed main, migration deletes the old main only on the VM's own confirmation,
 * and teardown deletes tags only under names the set derives and no other namespace shares.
 */
import assert from "node:assert/strict";
import { Pods } from "../kube/mod.ts";
import type { Pod } from "../kube/mod.ts";
import type { CocoonSet } from "../common/apis/v1/cocoonset_types.ts";
import { CocoonHibernations, CocoonSets } from "../common/apis/v1/resources.ts";
import {
  ANNOTATION_HIBERNATE_ASKED_VMID,
  ANNOTATION_HIBERNATED_ON_NODE,
  ANNOTATION_VM_NAME,
  ANNOTATION_VMID,
  applyHibernateState,
  applyLifecycleStatus,
  markRestoreFromHibernate,
  readHibernateState,
} from "../common/meta/mod.ts";
import { ANNOTATION_DELETE_VM_NAMES } from "./teardown.ts";
import {
  REASON_ORPHAN_HIBERNATE_WITHDRAWN,
  reconcileReleasedWake,
  reconcileSuspendRelease,
} from "./seat_release.ts";
import { allOwnedPodsHibernated, applyUnsuspend } from "./suspend.ts";
import {
  DEFERRED_DROP_EVENT_INTERVAL_MS,
  dropTag,
  REASON_HIBERNATE_REFUSED,
  REASON_SNAPSHOT_DELETE_DEFERRED,
  REASON_SNAPSHOT_DELETE_REFUSED,
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
  runStep,
  seedSet,
  TEST_NAMESPACE,
  withFinalizer,
} from "./_test_support.ts";
import { mainPod, mainVMName, SEAT_SET_NAME, seatSet } from "./_seats_test_support.ts";
import { HIBERNATE_SNAPSHOT_TAG } from "../snapshot/registry.ts";

function wakeSet(phase: string, hint: string): CocoonSet {
  return seatSet((cs) => {
    cs.spec.hibernatePolicy = "release";
    cs.status = { phase } as CocoonSet["status"];
    if (hint) cs.metadata.annotations = { [ANNOTATION_HIBERNATED_ON_NODE]: hint };
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

Deno.test("a released-seat wake withdraws a hibernate request nobody owns and finishes", async () => {
  const env = newTestEnv();
  env.registry.put(mainVMName, HIBERNATE_SNAPSHOT_TAG);
  const cs = env.fake.seed(CocoonSets, wakeSet("Waking", "node-a"));
  // The restore pod carries a hibernate request whose CocoonHibernation is gone.
  const main = env.fake.seed(Pods, withHibernate(restoreMarked(mainPod(cs, { node: "node-a" }))));

  await runStep(newTestPass(depsOf(env), cs, [main]), reconcileReleasedWake);

  assert.equal(readHibernateState((await getPod(env.fake, "demo-0"))!), false);
  assert.equal(env.recorder.withReason(REASON_ORPHAN_HIBERNATE_WITHDRAWN).length, 1);
  assert.ok(
    env.registry.contains(mainVMName, HIBERNATE_SNAPSHOT_TAG),
    "the restore still needs it",
  );
});

Deno.test("a hibernate request a CocoonHibernation owns is left on the restore pod", async () => {
  const env = newTestEnv();
  env.registry.put(mainVMName, HIBERNATE_SNAPSHOT_TAG);
  env.fake.seed(CocoonHibernations, newHibernation("demo-0", "Hibernate", "Hibernating"));
  const cs = env.fake.seed(CocoonSets, wakeSet("Waking", "node-a"));
  const main = env.fake.seed(Pods, withHibernate(restoreMarked(mainPod(cs, { node: "node-a" }))));

  await runStep(newTestPass(depsOf(env), cs, [main]), reconcileReleasedWake);

  assert.equal(readHibernateState((await getPod(env.fake, "demo-0"))!), true);
  assert.equal(env.recorder.withReason(REASON_ORPHAN_HIBERNATE_WITHDRAWN).length, 0);
});

Deno.test("a stale node hint is cleared once the main runs in place; a failed main is then not restored from it", async () => {
  const env = newTestEnv();
  env.registry.put(mainVMName, HIBERNATE_SNAPSHOT_TAG);
  // An aborted release left the hint (and the tag); the main runs in place.
  const cs = env.fake.seed(CocoonSets, wakeSet("Running", "node-a"));
  const main = env.fake.seed(
    Pods,
    mainPod(cs, { node: "node-a", vmID: "vmid-1", running: true }),
  );
  await runStep(newTestPass(depsOf(env), cs, [main]), reconcileReleasedWake);
  let stored = await getSet(env.fake, SEAT_SET_NAME);
  assert.equal(stored.metadata.annotations?.[ANNOTATION_HIBERNATED_ON_NODE] ?? "", "");

  // Weeks later the main fails and the user deletes it: the normal flow boots it, no restore.
  await env.fake.delete(Pods, TEST_NAMESPACE, "demo-0", { gracePeriodSeconds: 0 });
  stored = await getSet(env.fake, SEAT_SET_NAME);
  stored.status = { phase: "Failed" } as CocoonSet["status"];
  stored = await env.fake.updateStatus(CocoonSets, stored);
  const got = await runStep(newTestPass(depsOf(env), stored, []), reconcileReleasedWake);
  assert.equal(got, undefined);
  assert.equal(await getPod(env.fake, "demo-0"), undefined, "no restore pod from the stale tag");
});

async function seedDeleting(env: ReturnType<typeof newTestEnv>, cs: CocoonSet): Promise<void> {
  withFinalizer(cs);
  seedSet(env, cs, []);
  await env.fake.delete(CocoonSets, cs.metadata.namespace ?? "", cs.metadata.name ?? "");
}

Deno.test("tenancy: teardown never deletes a name taken from delete-vm-names alone", async () => {
  const env = newTestEnv();
  env.registry.put("vk-victim-app-0", HIBERNATE_SNAPSHOT_TAG);
  env.registry.put("vk-victim-app-0", "latest");
  const cs = newCocoonSet("demo", (c) => {
    c.metadata.annotations = { [ANNOTATION_DELETE_VM_NAMES]: "vk-ns-demo-0,vk-victim-app-0" };
  });
  await seedDeleting(env, cs);
  await reconcileSet(env, "demo");
  assert.ok(env.registry.contains("vk-victim-app-0", HIBERNATE_SNAPSHOT_TAG));
  assert.ok(env.registry.contains("vk-victim-app-0", "latest"));
  assert.equal(
    env.registry.callsOf("deleteManifest").filter((c) => c.name === "vk-victim-app-0").length,
    0,
  );
  const refused = env.recorder.withReason(REASON_SNAPSHOT_DELETE_REFUSED);
  assert.ok(refused.length > 0);
  assert.match(refused[0].message, /vk-victim-app-0/);
  assert.equal((await env.fake.list(CocoonSets)).items.length, 0, "teardown still finishes");
});

Deno.test("tenancy: teardown of team-x/prod keeps vk-team-x-prod-0, which team/x-prod-0 shares, naming both", async () => {
  const env = newTestEnv();
  const vm = "vk-team-x-prod-0";
  env.registry.put(vm, "latest");
  env.registry.put(vm, HIBERNATE_SNAPSHOT_TAG);
  const other = mainPod(newCocoonSet("x-prod"));
  other.metadata.namespace = "team";
  other.metadata.name = "x-prod-0";
  other.metadata.annotations = { ...other.metadata.annotations, [ANNOTATION_VM_NAME]: vm };
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
  assert.ok(env.registry.contains(vm, HIBERNATE_SNAPSHOT_TAG));
  const refused = env.recorder.withReason(REASON_SNAPSHOT_DELETE_REFUSED);
  assert.ok(refused.length > 0);
  assert.match(refused[0].message, /CocoonSet team-x\/prod.*Pod team\/x-prod-0/);
});

async function migrationStep(
  env: ReturnType<typeof newTestEnv>,
  edit: (pod: Pod) => void,
): Promise<boolean> {
  const cs = await getSet(env.fake, SEAT_SET_NAME);
  let main = await getPod(env.fake, "demo-0");
  if (!main) return true;
  edit(main);
  main = await env.fake.update(Pods, main);
  await runStep(newTestPass(depsOf(env), cs, [main]), reconcileMigration);
  const after = await getPod(env.fake, "demo-0");
  return after === undefined || after.metadata.deletionTimestamp !== undefined;
}

Deno.test("migration deletes the old main only on the VM's own confirmation", async (t) => {
  const seed = () => {
    const env = newTestEnv();
    env.registry.put(mainVMName, HIBERNATE_SNAPSHOT_TAG);
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
  await t.step(
    "a vk-cocoon that writes no lifecycle annotations: pushed, not removed",
    async () => {
      const env = seed();
      assert.equal(await migrationStep(env, () => {}), false, "the tag alone is no confirmation");
      // The removal done, vk-cocoon clears the VM id: that is its confirmation.
      assert.equal(
        await migrationStep(env, (p) => {
          delete p.metadata.annotations![ANNOTATION_VMID];
          p.status = { phase: "Pending" };
        }),
        true,
      );
    },
  );
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

Deno.test("with a vk-cocoon that writes no lifecycle annotations, a retain suspend ends once the VM id is cleared", async () => {
  const env = newTestEnv();
  const cs = seedSet(
    env,
    seatSet(withFinalizer, (c) => {
      c.spec.suspend = true;
    }),
    [mainPod(seatSet(), { node: "node-a", vmID: "vmid-1", running: true })],
  );
  await reconcileSet(env, cs.metadata.name!);
  assert.equal(
    readHibernateState((await getPod(env.fake, "demo-0"))!),
    true,
    "the VM is asked to hibernate",
  );
  // vk-cocoon pushes first: the tag alone does not end the suspend.
  env.registry.put(mainVMName, HIBERNATE_SNAPSHOT_TAG);
  await reconcileSet(env, cs.metadata.name!);
  assert.equal((await getSet(env.fake, cs.metadata.name!)).status?.phase, "Suspending");
  // It removes the VM and clears the id last.
  const pod = (await getPod(env.fake, "demo-0"))!;
  delete pod.metadata.annotations![ANNOTATION_VMID];
  pod.status = { phase: "Pending" };
  await env.fake.update(Pods, pod);
  await reconcileSet(env, cs.metadata.name!);
  assert.equal((await getSet(env.fake, cs.metadata.name!)).status?.phase, "Suspended");
});

Deno.test("with a vk-cocoon that writes no lifecycle annotations, a release suspend frees the seat once the VM id is cleared", async () => {
  const env = newTestEnv();
  const cs = seedSet(
    env,
    seatSet(withFinalizer, (c) => {
      c.spec.suspend = true;
      c.spec.hibernatePolicy = "release";
    }),
    [withHibernate(mainPod(seatSet(), { node: "node-a", running: true }))],
  );
  env.registry.put(mainVMName, HIBERNATE_SNAPSHOT_TAG);
  for (let i = 0; i < 4; i++) await reconcileSet(env, cs.metadata.name!);
  const released = await getPod(env.fake, "demo-0");
  assert.ok(!released || released.metadata.deletionTimestamp, "the seat is released");
  assert.equal(env.registry.contains(mainVMName, HIBERNATE_SNAPSHOT_TAG), true, "the tag is kept");
  assert.equal((await getSet(env.fake, cs.metadata.name!)).status?.phase, "Suspended");
});

/** team-x/prod (main VM vk-team-x-prod-0) beside team/x-prod-0, which derives the same name. */
function collidingSets(mod: (cs: CocoonSet) => void): ReturnType<typeof newTestEnv> {
  const env = newTestEnv();
  const other = mainPod(newCocoonSet("x-prod"));
  other.metadata.namespace = "team";
  other.metadata.name = "x-prod-0";
  other.metadata.annotations = {
    ...other.metadata.annotations,
    [ANNOTATION_VM_NAME]: "vk-team-x-prod-0",
  };
  env.fake.seed(Pods, other);
  const cs = newCocoonSet("prod", withFinalizer, (c) => {
    c.metadata.namespace = "team-x";
    c.metadata.generation = 1;
  }, mod);
  env.fake.seed(CocoonSets, cs);
  env.fake.seed(Pods, mainPod(cs, { node: "node-a", vmID: "vmid-1", running: true }));
  return env;
}

async function reconcileProd(env: ReturnType<typeof newTestEnv>): Promise<void> {
  await env.reconciler.reconcile(
    { namespace: "team-x", name: "prod" },
    new AbortController().signal,
  );
}

Deno.test("a suspend does not hibernate a VM whose name another namespace derives, naming both", async (t) => {
  for (const policy of ["retain", "release"] as const) {
    await t.step(policy, async () => {
      const env = collidingSets((c) => {
        c.spec.suspend = true;
        c.spec.hibernatePolicy = policy;
      });
      await reconcileProd(env);
      await reconcileProd(env);
      const main = await env.fake.get(Pods, "team-x", "prod-0");
      assert.equal(readHibernateState(main), false, "no push into the shared repository");
      assert.equal(main.metadata.deletionTimestamp, undefined, "the seat is not released");
      const refused = env.recorder.withReason(REASON_HIBERNATE_REFUSED);
      assert.ok(refused.length > 0);
      assert.match(refused[0].message, /CocoonSet team-x\/prod.*Pod team\/x-prod-0/);
      const cs = await env.fake.get(CocoonSets, "team-x", "prod");
      assert.equal(cs.status?.phase, "Suspending");
    });
  }
});

Deno.test("a migration does not hibernate a VM whose name another namespace derives, naming both", async () => {
  const env = collidingSets((c) => {
    c.spec.nodeName = "node-b";
  });
  await reconcileProd(env);
  await reconcileProd(env);
  const main = await env.fake.get(Pods, "team-x", "prod-0");
  assert.equal(readHibernateState(main), false, "no push into the shared repository");
  assert.equal(main.metadata.deletionTimestamp, undefined);
  const refused = env.recorder.withReason(REASON_HIBERNATE_REFUSED);
  assert.ok(refused.length > 0);
  assert.match(refused[0].message, /CocoonSet team-x\/prod.*Pod team\/x-prod-0/);
  assert.notEqual((await env.fake.get(CocoonSets, "team-x", "prod")).status?.phase, "Migrating");
});

Deno.test("without a colliding namespace the same suspend and migration hibernate", async () => {
  for (
    const mod of [
      (c: CocoonSet) => c.spec.suspend = true,
      (c: CocoonSet) => c.spec.nodeName = "node-b",
    ]
  ) {
    const env = collidingSets(mod);
    await env.fake.delete(Pods, "team", "x-prod-0");
    await reconcileProd(env);
    await reconcileProd(env);
    assert.equal(readHibernateState(await env.fake.get(Pods, "team-x", "prod-0")), true);
    assert.equal(env.recorder.withReason(REASON_HIBERNATE_REFUSED).length, 0);
  }
});

/**
 * A re-suspend of a set run by a vk-cocoon without lifecycle annotations, seen through a lagging cache: the stored main
 * was woken (VM vmid-2) and asked to hibernate again; the cache still shows it as the previous
 * round left it (hibernate request set, VM id cleared). The tag is the previous round's.
 */
function resuspendBehindCache(mod: (cs: CocoonSet) => void) {
  const env = newTestEnv();
  env.registry.put(mainVMName, HIBERNATE_SNAPSHOT_TAG);
  const cs = seedSet(env, seatSet(withFinalizer, (c) => c.metadata.generation = 3, mod));
  const stored = env.fake.seed(
    Pods,
    withHibernate(mainPod(cs, { node: "node-a", vmID: "vmid-2", running: true })),
  );
  const cached = structuredClone(stored);
  delete cached.metadata.annotations![ANNOTATION_VMID];
  cached.status = { phase: "Pending" };
  return { env, cs, cached };
}

Deno.test("a lagging cache showing the previous round's hibernated pod does not end a silent suspend", async () => {
  const { env, cs, cached } = resuspendBehindCache((c) => c.spec.suspend = true);
  assert.equal(await allOwnedPodsHibernated(newTestPass(depsOf(env), cs, [cached])), false);
});

Deno.test("a lagging cache does not make a release delete a silent main that runs again", async () => {
  const { env, cs, cached } = resuspendBehindCache((c) => {
    c.spec.suspend = true;
    c.spec.hibernatePolicy = "release";
  });
  await runStep(newTestPass(depsOf(env), cs, [cached]), reconcileSuspendRelease);
  const main = await getPod(env.fake, "demo-0");
  assert.equal(main?.metadata.deletionTimestamp, undefined, "the running VM's pod stays");
  assert.equal(env.fake.actions.filter((a) => a.verb === "delete").length, 0);
});

Deno.test("a lagging cache does not make a migration delete a silent main that runs again", async () => {
  const { env, cs, cached } = resuspendBehindCache((c) => {
    c.spec.nodeName = "node-b";
    c.status = { phase: "Migrating" } as CocoonSet["status"];
  });
  await runStep(newTestPass(depsOf(env), cs, [cached]), reconcileMigration);
  const main = await getPod(env.fake, "demo-0");
  assert.equal(main?.metadata.deletionTimestamp, undefined, "the running VM's pod stays");
  assert.equal(env.fake.actions.filter((a) => a.verb === "delete").length, 0);
});

/**
 * A main a Hibernate request has hibernated (VM down, tag pushed) whose request the set's cache
 * does not show yet: the API server does (the request, then its pod patch, are newer than the
 * cached request list).
 */
function hibernatedByUnseenRequest(mod: (cs: CocoonSet) => void) {
  const live = newTestEnv().fake;
  live.seed(CocoonHibernations, newHibernation("demo-0", "Hibernate", "Hibernated"));
  const env = newTestEnv([], undefined, { apiReader: live });
  env.registry.put(mainVMName, HIBERNATE_SNAPSHOT_TAG);
  const cs = seedSet(env, seatSet(withFinalizer, mod));
  const main = env.fake.seed(Pods, withHibernate(mainPod(cs, { node: "node-a" })));
  return { env, cs, main };
}

Deno.test("a migration pass does not wake a main a request hibernated that its cache does not show", async () => {
  // Pinned to the node it is on: a hibernated main there reads as "quiesced where it should be".
  const { env, cs, main } = hibernatedByUnseenRequest((c) => c.spec.nodeName = "node-a");
  await runStep(newTestPass(depsOf(env), cs, [main]), reconcileMigration);
  assert.equal(readHibernateState((await getPod(env.fake, "demo-0"))!), true, "still hibernated");
  assert.notEqual((await getSet(env.fake, SEAT_SET_NAME)).status?.phase, "Migrating");
});

Deno.test("an unsuspend does not clear the hibernate request of a request its cache does not show", async () => {
  const { env, cs, main } = hibernatedByUnseenRequest(() => {});
  await applyUnsuspend(newTestPass(depsOf(env), cs, [main]));
  assert.equal(readHibernateState((await getPod(env.fake, "demo-0"))!), true, "still hibernated");
});

Deno.test("a migration finishes past a live Hibernate request that yields to it", async () => {
  const env = newTestEnv();
  env.registry.put(mainVMName, HIBERNATE_SNAPSHOT_TAG);
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
    i < 4 && (await getSet(env.fake, SEAT_SET_NAME)).status?.phase === "Migrating";
    i++
  ) {
    await reconcileSet(env, SEAT_SET_NAME);
  }
  assert.equal(env.registry.contains(mainVMName, HIBERNATE_SNAPSHOT_TAG), false);
  assert.notEqual((await getSet(env.fake, SEAT_SET_NAME)).status?.phase, "Migrating");
});

Deno.test("a drop the gate defers gets a Warning naming the claimant, once per requeue interval", async () => {
  const env = newTestEnv();
  env.registry.put(mainVMName, HIBERNATE_SNAPSHOT_TAG);
  const cs = seedSet(env, seatSet((c) => c.status = { phase: "Running" } as CocoonSet["status"]));
  env.fake.seed(CocoonHibernations, newHibernation("demo-0", "Hibernate", "Hibernated"));
  const drop = async () => {
    const verdict = await dropTag(newTestPass(depsOf(env), cs), mainVMName, HIBERNATE_SNAPSHOT_TAG);
    assert.equal(verdict.allowed, false);
  };
  await drop();
  await drop();
  const deferred = () => env.recorder.withReason(REASON_SNAPSHOT_DELETE_DEFERRED);
  assert.equal(deferred().length, 1, "one Warning for two passes inside the interval");
  assert.equal(deferred()[0].type, "Warning");
  assert.match(deferred()[0].message, /CocoonHibernation ns\/h-demo-0/);
  env.clock.advance(DEFERRED_DROP_EVENT_INTERVAL_MS);
  await drop();
  assert.equal(deferred().length, 2);
  assert.ok(env.registry.contains(mainVMName, HIBERNATE_SNAPSHOT_TAG));
});

Deno.test("a migration keeps a tag the VM asked to hibernate may just have pushed", async () => {
  const env = newTestEnv();
  env.registry.put(mainVMName, HIBERNATE_SNAPSHOT_TAG);
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
    [ANNOTATION_HIBERNATE_ASKED_VMID]: "vmid-1",
  };
  env.fake.seed(Pods, main);
  await runStep(newTestPass(depsOf(env), cs, [main]), reconcileMigration);
  assert.ok(
    env.registry.contains(mainVMName, HIBERNATE_SNAPSHOT_TAG),
    "the tag may be the only copy",
  );
  assert.equal(env.registry.callsOf("deleteManifest").length, 0);
  const asked = await getPod(env.fake, "demo-0");
  assert.equal(readHibernateState(asked!), true, "asked to hibernate again for the migration");
  assert.equal((await getSet(env.fake, SEAT_SET_NAME)).status?.phase, "Migrating");
});

/**
 * team-x/prod (running its main) and team/x-prod both derive vk-team-x-prod-0; team/x-prod has
 * no pod. Which of the two came first is set by their creationTimestamps.
 */
function collidingSetOnly(prodFirst: boolean): ReturnType<typeof newTestEnv> {
  const env = newTestEnv();
  const early = "2026-01-01T00:00:00Z";
  const late = "2026-01-02T00:00:00Z";
  env.fake.seed(
    CocoonSets,
    newCocoonSet("x-prod", (c) => {
      c.metadata.namespace = "team";
      c.metadata.creationTimestamp = prodFirst ? late : early;
    }),
  );
  const cs = newCocoonSet("prod", withFinalizer, (c) => {
    c.metadata.namespace = "team-x";
    c.metadata.generation = 1;
    c.metadata.creationTimestamp = prodFirst ? early : late;
    c.spec.suspend = true;
  });
  env.fake.seed(CocoonSets, cs);
  env.fake.seed(Pods, mainPod(cs, { node: "node-a", vmID: "vmid-1", running: true }));
  return env;
}

Deno.test("a collision with a set alone refuses the second comer's hibernate, not the first's", async (t) => {
  await t.step(
    "team-x/prod came first: its suspend hibernates, the later set holds nothing",
    async () => {
      const env = collidingSetOnly(true);
      await reconcileProd(env);
      await reconcileProd(env);
      assert.equal(readHibernateState(await env.fake.get(Pods, "team-x", "prod-0")), true);
      assert.equal(env.recorder.withReason(REASON_HIBERNATE_REFUSED).length, 0);
    },
  );
  await t.step(
    "team/x-prod came first: team-x/prod does not hibernate through its name",
    async () => {
      const env = collidingSetOnly(false);
      await reconcileProd(env);
      await reconcileProd(env);
      assert.equal(readHibernateState(await env.fake.get(Pods, "team-x", "prod-0")), false);
      const refused = env.recorder.withReason(REASON_HIBERNATE_REFUSED);
      assert.ok(refused.length > 0);
      assert.match(refused[0].message, /CocoonSet team-x\/prod.*CocoonSet team\/x-prod/);
    },
  );
});
