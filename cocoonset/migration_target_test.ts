/**
 * Migration toward a node that cannot take the main (missing, another pool, another CPU class):
 * nothing is hibernated, deleted or recreated toward it, the set keeps running with a Warning and
 * Progressing=False MigrationTargetUnknown, and a migration already in flight finishes in place or
 * in the pool without stranding its snapshot. The Go operator quiesced and deleted the running
 * main, then recreated it pinned to a node where it never scheduled.
 */
import assert from "node:assert/strict";
import { Nodes, Pods } from "../kube/mod.ts";
import type { Pod } from "../kube/mod.ts";
import type { CocoonSet } from "../common/apis/v1/cocoonset_types.ts";
import { CocoonSets } from "../common/apis/v1/resources.ts";
import {
  applyHibernateState,
  markRestoreFromHibernate,
  readHibernateState,
  readRestoreFromHibernate,
} from "../common/meta/mod.ts";
import {
  actionsOf,
  conditionOf,
  depsOf,
  editPod,
  getPod,
  getSet,
  newTestEnv,
  newTestPass,
  poolNode,
  reconcileSet,
  runStep,
  type TestEnv,
  withFinalizer,
} from "./_test_support.ts";
import { mainPod, mainVMName, seatSet } from "./_seats_test_support.ts";
import { reconcileMigration, requiredNodeOf } from "./migrate.ts";
import { migrationTargetProblem, REASON_MIGRATION_TARGET_UNKNOWN } from "./nodes.ts";
import { hostnameAffinity } from "./pods.ts";
import { HIBERNATE_SNAPSHOT_TAG } from "../snapshot/registry.ts";

/** ns/demo pinned to node, with the finalizer, modified by mods. */
function pinnedSet(node: string, ...mods: ((cs: CocoonSet) => void)[]): CocoonSet {
  return seatSet(withFinalizer, (cs) => cs.spec.nodeName = node, ...mods);
}

function migrating(cs: CocoonSet): void {
  cs.status = { phase: "Migrating" };
}

function liveMain(cs: CocoonSet, node: string): Pod {
  const pod = mainPod(cs, { node, vmID: "vm-1", running: true });
  pod.status!.conditions = [{ type: "Ready", status: "True" }];
  return pod;
}

function hibernateWrites(env: TestEnv): number {
  return actionsOf(env, "patch", Pods).filter((a) =>
    JSON.stringify(a.patch).includes("vm.cocoonstack.io/hibernate")
  ).length;
}

function unknownTargetEvents(env: TestEnv) {
  return env.recorder.events.filter((e) => e.reason === REASON_MIGRATION_TARGET_UNKNOWN);
}

Deno.test("migration target: missing node, another pool or another CPU class cannot take the main", async (t) => {
  const env = newTestEnv([], undefined, {
    nodes: [poolNode("node-a"), poolNode("gpu-1", "gpu"), poolNode("zen-1", "default", "zen4")],
  });
  const cases: [string, string, string | undefined, string][] = [
    ["existing node of the pool", "node-a", undefined, ""],
    ["no such node", "node-z", undefined, "no node node-z in pool default"],
    [
      "another pool",
      "gpu-1",
      undefined,
      "node gpu-1 is in pool gpu, not in the set's pool default",
    ],
    ["matching class", "zen-1", "zen4", ""],
    [
      "another class",
      "zen-1",
      "zen5",
      "node zen-1 has snapshot CPU class zen4, not the set's class zen5",
    ],
    [
      "no class label",
      "node-a",
      "zen4",
      "node node-a has snapshot CPU class (none), not the set's class zen4",
    ],
  ];
  for (const [name, node, cls, want] of cases) {
    await t.step(name, async () => {
      const cs = pinnedSet(node, (c) => {
        if (cls) c.spec.snapshotCompatibilityClass = cls;
      });
      assert.equal(await migrationTargetProblem(newTestPass(depsOf(env), cs), node), want);
    });
  }
});

Deno.test("a set pinned to a missing node keeps running: nothing hibernated or deleted, Warning, MigrationTargetUnknown", async () => {
  const env = newTestEnv();
  const cs = env.fake.seed(CocoonSets, pinnedSet("node-z"));
  env.fake.seed(Pods, liveMain(cs, "node-a"));
  env.fake.actions.length = 0;

  assert.deepEqual(await reconcileSet(env, "demo"), {});

  assert.equal(hibernateWrites(env), 0, "the main is not asked to hibernate");
  assert.equal(actionsOf(env, "delete", Pods).length, 0);
  assert.equal(env.registry.calls.length, 0, "not even a snapshot probe");
  const main = await getPod(env.fake, "demo-0");
  assert.equal(main?.spec?.nodeName, "node-a");
  assert.ok(!readHibernateState(main!));
  const [event] = unknownTargetEvents(env);
  assert.equal(event?.type, "Warning");
  assert.match(event.message, /no node node-z in pool default/);
  const stored = await getSet(env.fake, "demo");
  assert.equal(stored.status?.phase, "Running");
  const progressing = conditionOf(stored, "Progressing");
  assert.deepEqual([progressing?.status, progressing?.reason], [
    "False",
    REASON_MIGRATION_TARGET_UNKNOWN,
  ]);
  assert.equal(conditionOf(stored, "Ready")?.status, "True");
});

Deno.test("a target outside the set's pool is no target either", async () => {
  const env = newTestEnv([], undefined, { nodes: [poolNode("node-a"), poolNode("node-b", "gpu")] });
  const cs = env.fake.seed(CocoonSets, pinnedSet("node-b"));
  env.fake.seed(Pods, liveMain(cs, "node-a"));

  await reconcileSet(env, "demo");

  assert.equal(hibernateWrites(env), 0);
  assert.match(unknownTargetEvents(env)[0]?.message ?? "", /in pool gpu, not in the set's pool/);
});

Deno.test("once the target node joins the pool, the next pass starts the migration", async () => {
  const env = newTestEnv([], undefined, { nodes: [poolNode("node-a")] });
  const cs = env.fake.seed(CocoonSets, pinnedSet("node-b"));
  env.fake.seed(Pods, liveMain(cs, "node-a"));
  await reconcileSet(env, "demo");
  assert.equal(hibernateWrites(env), 0);

  env.fake.seed(Nodes, poolNode("node-b"));
  await reconcileSet(env, "demo");

  assert.ok(readHibernateState((await getPod(env.fake, "demo-0"))!));
  const stored = await getSet(env.fake, "demo");
  assert.equal(stored.status?.phase, "Migrating");
  assert.equal(conditionOf(stored, "Progressing")?.reason, "Reconciling");
});

Deno.test("a fresh main pinned to a missing node is created pinned and waits, without a migration Warning", async () => {
  const env = newTestEnv([], undefined, { nodes: [poolNode("node-a")] });
  env.fake.seed(CocoonSets, pinnedSet("node-z"));

  await reconcileSet(env, "demo");

  const main = await getPod(env.fake, "demo-0");
  assert.equal(requiredNodeOf(main!), "node-z");
  assert.equal(unknownTargetEvents(env).length, 0);
});

Deno.test("target gone while the old main hibernates: it is woken in place and the snapshot kept until it runs", async () => {
  const env = newTestEnv([], undefined, { nodes: [poolNode("node-a")] });
  env.registry.put(mainVMName, HIBERNATE_SNAPSHOT_TAG);
  const cs = env.fake.seed(CocoonSets, pinnedSet("node-b", migrating));
  const quiesced = mainPod(cs, { node: "node-a" });
  applyHibernateState(true, quiesced);
  const main = env.fake.seed(Pods, quiesced);

  const got = await runStep(newTestPass(depsOf(env), cs, [main]), reconcileMigration);

  assert.deepEqual(got, { requeueAfter: 5_000 });
  const pod = await getPod(env.fake, "demo-0");
  assert.ok(pod && !pod.metadata.deletionTimestamp, "the old main is kept");
  assert.ok(!readHibernateState(pod), "and woken where it is");
  assert.ok(env.registry.contains(mainVMName, HIBERNATE_SNAPSHOT_TAG), "its snapshot is kept");
  assert.equal(unknownTargetEvents(env).length, 1);

  // vk-cocoon restores it on node-a: the snapshot goes, then the set settles.
  const running = mainPod(cs, { node: "node-a", vmID: "vm-2", running: true });
  const live = await editPod(env, "demo-0", (p) => {
    p.metadata.annotations = { ...p.metadata.annotations, ...running.metadata.annotations };
    p.status = running.status;
  });
  await runStep(
    newTestPass(depsOf(env), await getSet(env.fake, "demo"), [live]),
    reconcileMigration,
  );
  assert.ok(!env.registry.contains(mainVMName, HIBERNATE_SNAPSHOT_TAG));
});

Deno.test("target gone after the old main was deleted: restored from the snapshot anywhere in the pool", async () => {
  const env = newTestEnv([], undefined, { nodes: [poolNode("node-a")] });
  env.registry.put(mainVMName, HIBERNATE_SNAPSHOT_TAG);
  const cs = env.fake.seed(CocoonSets, pinnedSet("node-b", migrating));

  const got = await runStep(newTestPass(depsOf(env), cs), reconcileMigration);

  assert.deepEqual(got, { requeueAfter: 5_000 });
  const pod = await getPod(env.fake, "demo-0");
  assert.ok(pod && readRestoreFromHibernate(pod), "restores from the snapshot");
  assert.equal(pod.spec?.affinity, undefined, "pinned to no node");
  assert.ok(env.registry.contains(mainVMName, HIBERNATE_SNAPSHOT_TAG));
  assert.equal((await getSet(env.fake, "demo")).status?.phase, "Migrating");
});

Deno.test("target gone while the restore pod waits for it: the never-bound pod is replaced by an unpinned one", async () => {
  const env = newTestEnv([], undefined, { nodes: [poolNode("node-a")] });
  env.registry.put(mainVMName, HIBERNATE_SNAPSHOT_TAG);
  const cs = env.fake.seed(CocoonSets, pinnedSet("node-b", migrating));
  const waiting = mainPod(cs);
  waiting.spec!.affinity = hostnameAffinity("required", "node-b");
  markRestoreFromHibernate(waiting);
  const main = env.fake.seed(Pods, waiting);

  await runStep(newTestPass(depsOf(env), cs, [main]), reconcileMigration);
  assert.equal(await getPod(env.fake, "demo-0"), undefined, "the unbound pod is deleted");
  assert.ok(env.registry.contains(mainVMName, HIBERNATE_SNAPSHOT_TAG));

  await runStep(newTestPass(depsOf(env), await getSet(env.fake, "demo")), reconcileMigration);
  const recreated = await getPod(env.fake, "demo-0");
  assert.ok(recreated && readRestoreFromHibernate(recreated));
  assert.equal(requiredNodeOf(recreated), "");
});

Deno.test("a restore pod pinned to the current, known target is never replaced", async () => {
  const env = newTestEnv();
  env.registry.put(mainVMName, HIBERNATE_SNAPSHOT_TAG);
  const cs = env.fake.seed(CocoonSets, pinnedSet("node-b", migrating));
  const waiting = mainPod(cs);
  waiting.spec!.affinity = hostnameAffinity("required", "node-b");
  markRestoreFromHibernate(waiting);
  const main = env.fake.seed(Pods, waiting);

  await runStep(newTestPass(depsOf(env), cs, [main]), reconcileMigration);

  assert.equal(actionsOf(env, "delete", Pods).length, 0);
});
