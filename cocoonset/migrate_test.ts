import assert from "node:assert/strict";
import { Pods } from "../kube/mod.ts";
import type { Pod } from "../kube/mod.ts";
import type { CocoonSet } from "../common/apis/v1/cocoonset_types.ts";
import { CocoonHibernations, CocoonSets } from "../common/apis/v1/resources.ts";
import {
  ANNOTATION_HIBERNATE,
  applyHibernateState,
  readHibernateState,
  readRestoreFromHibernate,
} from "../common/meta/mod.ts";
import {
  decideMigration,
  type MigrationFacts,
  type MigrationState,
  reconcileMigration,
} from "./migrate.ts";
import {
  depsOf,
  editPod,
  getPod,
  getSet,
  newHibernation,
  newTestEnv,
  newTestPass,
  runStep,
  type TestEnv,
} from "./_test_support.ts";
import {
  mainPod,
  mainVMName,
  SEAT_SET_NAME,
  seatSet,
  writeActions,
} from "./_seats_test_support.ts";
import { HIBERNATE_SNAPSHOT_TAG } from "../snapshot/registry.ts";

/** A set whose spec.nodeName is node ("" = unpinned), modified by mods. */
function migSet(node: string, ...mods: ((cs: CocoonSet) => void)[]): CocoonSet {
  return seatSet((cs) => {
    if (node) cs.spec.nodeName = node;
  }, ...mods);
}

function migrating(cs: CocoonSet): void {
  cs.status = { phase: "Migrating" };
}

function putHibernateTag(env: TestEnv): void {
  env.registry.put(mainVMName, HIBERNATE_SNAPSHOT_TAG);
}

function failEveryProbe(env: TestEnv): void {
  env.registry.failNext("hasManifest", new Error("boom"), { times: Infinity });
}

function tagDeletes(env: TestEnv): string[] {
  return env.registry.callsOf("deleteManifest").map((c) => `${c.name}:${c.reference}`);
}

function withHibernate(pod: Pod): Pod {
  applyHibernateState(true, pod);
  return pod;
}

async function storedPhase(env: TestEnv): Promise<string | undefined> {
  return (await getSet(env.fake, SEAT_SET_NAME)).status?.phase;
}

Deno.test("migration does not engage without spec.nodeName", async () => {
  const env = newTestEnv();
  const cs = env.fake.seed(CocoonSets, migSet(""));
  const main = env.fake.seed(Pods, mainPod(cs, { node: "node-a", vmID: "vmid-1", running: true }));

  const got = await runStep(newTestPass(depsOf(env), cs, [main]), reconcileMigration);

  assert.deepEqual(got, undefined);
  assert.deepEqual(env.registry.calls, []);
  assert.deepEqual(writeActions(env.fake), []);
});

Deno.test("migration does not engage when the main already runs on the target", async () => {
  const env = newTestEnv();
  const cs = env.fake.seed(CocoonSets, migSet("node-b"));
  const main = env.fake.seed(Pods, mainPod(cs, { node: "node-b", vmID: "vmid-1", running: true }));

  const got = await runStep(newTestPass(depsOf(env), cs, [main]), reconcileMigration);

  assert.deepEqual(got, undefined);
  assert.deepEqual(env.registry.calls, [], "the fast path never probes the registry");
  assert.deepEqual(writeActions(env.fake), []);
});

Deno.test("migration starts by asking the main on the wrong node to hibernate", async () => {
  const env = newTestEnv();
  const cs = env.fake.seed(CocoonSets, migSet("node-b"));
  const main = env.fake.seed(Pods, mainPod(cs, { node: "node-a", vmID: "vmid-1", running: true }));

  const got = await runStep(newTestPass(depsOf(env), cs, [main]), reconcileMigration);

  assert.deepEqual(got, { requeueAfter: 5_000 });
  const pod = await env.fake.get(Pods, "ns", "demo-0");
  assert.ok(readHibernateState(pod), "the old main is quiesced so vk-cocoon pushes :hibernate");
  assert.ok(!pod.metadata.deletionTimestamp, "and kept until the snapshot exists");
  assert.equal(await storedPhase(env), "Migrating");
});

Deno.test("migration deletes the quiesced old main once its snapshot landed, keeping the snapshot", async () => {
  const env = newTestEnv();
  putHibernateTag(env);
  const cs = env.fake.seed(CocoonSets, migSet("node-b"));
  // The VM confirmed its hibernation the way a vk-cocoon without lifecycle annotations does: it
  // cleared the VM id after the push and the removal.
  const main = env.fake.seed(
    Pods,
    withHibernate(mainPod(cs, { node: "node-a" })),
  );

  const got = await runStep(newTestPass(depsOf(env), cs, [main]), reconcileMigration);

  assert.notEqual(got, undefined);
  const pod = await getPod(env.fake, "demo-0");
  assert.ok(pod === undefined || pod.metadata.deletionTimestamp, "the old pod is deleted");
  assert.ok(env.fake.actions.some((a) => a.verb === "delete" && a.resource === Pods));
  assert.deepEqual(tagDeletes(env), [], "the snapshot is not dropped while tearing down");
  assert.equal(await storedPhase(env), "Migrating");
});

Deno.test("migration recreates a missing main restoring from the snapshot, required onto the target", async () => {
  const env = newTestEnv();
  putHibernateTag(env);
  const cs = env.fake.seed(CocoonSets, migSet("node-b"));

  const got = await runStep(newTestPass(depsOf(env), cs), reconcileMigration);

  assert.deepEqual(got, { requeueAfter: 5_000 });
  const pod = await env.fake.get(Pods, "ns", "demo-0");
  assert.ok(readRestoreFromHibernate(pod));
  assert.equal(pod.spec?.nodeName, undefined);
  assert.deepEqual(
    pod.spec?.affinity?.nodeAffinity?.requiredDuringSchedulingIgnoredDuringExecution
      ?.nodeSelectorTerms,
    [{ matchExpressions: [{ key: "kubernetes.io/hostname", operator: "In", values: ["node-b"] }] }],
  );
  assert.equal(await storedPhase(env), "Migrating");
});

Deno.test("migration waits while the restored main has no VM id, keeping the snapshot", async () => {
  const env = newTestEnv();
  putHibernateTag(env);
  const cs = env.fake.seed(CocoonSets, migSet("node-b", migrating));
  const main = env.fake.seed(Pods, mainPod(cs, { node: "node-b" }));

  const got = await runStep(newTestPass(depsOf(env), cs, [main]), reconcileMigration);

  assert.deepEqual(got, { requeueAfter: 5_000 });
  assert.deepEqual(tagDeletes(env), []);
  assert.equal(await storedPhase(env), "Migrating");
});

Deno.test("migration drops the snapshot once the main is live on the target", async () => {
  const env = newTestEnv();
  putHibernateTag(env);
  const cs = env.fake.seed(CocoonSets, migSet("node-b", migrating));
  const main = env.fake.seed(
    Pods,
    mainPod(cs, { node: "node-b", vmID: "vmid-new", running: true }),
  );

  const got = await runStep(newTestPass(depsOf(env), cs, [main]), reconcileMigration);

  assert.deepEqual(got, { requeueAfter: 5_000 });
  assert.deepEqual(tagDeletes(env), [`${mainVMName}:${HIBERNATE_SNAPSHOT_TAG}`]);
  assert.equal(env.registry.contains(mainVMName, HIBERNATE_SNAPSHOT_TAG), false);
  // The next pass finds no snapshot and the main settled on the target: hands back.
  const next = await runStep(newTestPass(depsOf(env), cs, [main]), reconcileMigration);
  assert.deepEqual(next, undefined);
});

Deno.test("migration never deletes the recreated restore pod while it is unscheduled", async () => {
  const env = newTestEnv();
  putHibernateTag(env);
  const cs = env.fake.seed(CocoonSets, migSet("node-b", migrating));
  const main = env.fake.seed(Pods, mainPod(cs)); // no node yet, no VM id

  const got = await runStep(newTestPass(depsOf(env), cs, [main]), reconcileMigration);

  assert.notEqual(got, undefined);
  const pod = await getPod(env.fake, "demo-0");
  assert.ok(pod && !pod.metadata.deletionTimestamp, "an unscheduled restore pod survives");
  assert.ok(!env.fake.actions.some((a) => a.verb === "delete"));
});

Deno.test("migration fails the pass on a registry probe error instead of unwinding", async () => {
  const env = newTestEnv();
  failEveryProbe(env);
  const cs = env.fake.seed(CocoonSets, migSet("node-b"));
  const main = env.fake.seed(Pods, mainPod(cs, { node: "node-a", vmID: "vmid-1", running: true }));

  await assert.rejects(
    runStep(newTestPass(depsOf(env), cs, [main]), reconcileMigration),
    /migrate: probe hibernate snapshot/,
  );
  assert.deepEqual(writeActions(env.fake), []);
});

Deno.test("migration drops a stale tag instead of deleting the live, never-quiesced main", async () => {
  const env = newTestEnv();
  putHibernateTag(env);
  const cs = env.fake.seed(CocoonSets, migSet("node-b"));
  const main = env.fake.seed(Pods, mainPod(cs, { node: "node-a", vmID: "vmid-1", running: true }));

  const got = await runStep(newTestPass(depsOf(env), cs, [main]), reconcileMigration);

  assert.notEqual(got, undefined);
  const pod = await getPod(env.fake, "demo-0");
  assert.ok(pod && !pod.metadata.deletionTimestamp, "the live pod survives the stale tag");
  assert.deepEqual(tagDeletes(env), [`${mainVMName}:${HIBERNATE_SNAPSHOT_TAG}`]);
  assert.equal(await storedPhase(env), "Migrating");
});

Deno.test("migration re-targeted back wakes the quiesced main in place, keeping the tag", async () => {
  const env = newTestEnv();
  putHibernateTag(env);
  const cs = env.fake.seed(CocoonSets, migSet("node-b"));
  const main = env.fake.seed(Pods, withHibernate(mainPod(cs, { node: "node-b" })));

  const got = await runStep(newTestPass(depsOf(env), cs, [main]), reconcileMigration);

  assert.notEqual(got, undefined);
  const pod = await env.fake.get(Pods, "ns", "demo-0");
  assert.equal(readHibernateState(pod), false, "woken in place, not left waiting for a restore");
  assert.deepEqual(tagDeletes(env), [], "the tag stays until the VM runs again");
});

Deno.test("migration leaves a main hibernated on the target by a CocoonHibernation alone", async () => {
  const env = newTestEnv();
  failEveryProbe(env);
  const cs = env.fake.seed(CocoonSets, migSet("node-b"));
  const main = env.fake.seed(Pods, withHibernate(mainPod(cs, { node: "node-b" })));
  env.fake.seed(CocoonHibernations, newHibernation("demo-0", "Hibernate"));

  const got = await runStep(newTestPass(depsOf(env), cs, [main]), reconcileMigration);

  assert.deepEqual(got, undefined);
  assert.deepEqual(env.registry.calls, [], "decided before any registry probe");
  const pod = await env.fake.get(Pods, "ns", "demo-0");
  assert.equal(pod.metadata.annotations?.[ANNOTATION_HIBERNATE], "true", "not woken");
  assert.deepEqual(writeActions(env.fake), []);
});

Deno.test("migration aborted after the old pod was deleted still restores the main, without affinity", async () => {
  const env = newTestEnv();
  putHibernateTag(env);
  const cs = env.fake.seed(CocoonSets, migSet("", migrating)); // nodeName cleared mid-flight

  const got = await runStep(newTestPass(depsOf(env), cs), reconcileMigration);

  assert.notEqual(got, undefined);
  const pod = await env.fake.get(Pods, "ns", "demo-0");
  assert.ok(readRestoreFromHibernate(pod), "restored, not fresh-booted over the snapshot");
  assert.equal(pod.spec?.affinity, undefined);
});

Deno.test("migration skips the registry probe for a pinned set at rest", async () => {
  const env = newTestEnv();
  failEveryProbe(env);
  const cs = env.fake.seed(CocoonSets, migSet("node-b"));
  const main = env.fake.seed(Pods, mainPod(cs, { node: "node-b", vmID: "vmid-1", running: true }));

  const got = await runStep(newTestPass(depsOf(env), cs, [main]), reconcileMigration);

  assert.deepEqual(got, undefined);
  assert.deepEqual(env.registry.calls, []);
});

Deno.test("migration disengages from a CocoonHibernation wake in flight (no Migrating phase)", async () => {
  const env = newTestEnv();
  putHibernateTag(env);
  const cs = env.fake.seed(CocoonSets, migSet("node-b"));
  const main = env.fake.seed(Pods, mainPod(cs, { node: "node-b" })); // hibernate cleared, VM not live

  const got = await runStep(newTestPass(depsOf(env), cs, [main]), reconcileMigration);

  assert.deepEqual(got, undefined);
  assert.deepEqual(tagDeletes(env), [], "the wake's snapshot is not touched");
  assert.deepEqual(writeActions(env.fake), [], "not repainted as Migrating");
});

// Not asserted by the Go tests: Migrating is stored before the hibernate patch.
Deno.test("migration persists Migrating before it patches hibernate onto the old main", async () => {
  const env = newTestEnv();
  const cs = env.fake.seed(CocoonSets, migSet("node-b"));
  const main = env.fake.seed(Pods, mainPod(cs, { node: "node-a", vmID: "vmid-1", running: true }));

  await runStep(newTestPass(depsOf(env), cs, [main]), reconcileMigration);

  const steps = writeActions(env.fake).map((a) =>
    a.subresource === "status"
      ? `status ${(a.patch as { status?: { phase?: string } }).status?.phase}`
      : `${a.verb} ${a.resource.plural} ${JSON.stringify(a.patch)}`
  );
  assert.deepEqual(steps, [
    "status Migrating",
    `patch pods ${
      JSON.stringify({ metadata: { annotations: { [ANNOTATION_HIBERNATE]: "true" } } })
    }`,
  ]);
});

// The restore create of a pinned set that lost its main is a migration side effect
// too. The Go original created first and wrote Migrating after; a kill in between left a restore
// that no pass recognised as a migration, and its snapshot was never dropped.
Deno.test("migration persists Migrating before it recreates a missing main", async () => {
  const env = newTestEnv();
  putHibernateTag(env);
  const cs = env.fake.seed(CocoonSets, migSet("node-b", (c) => c.status = { phase: "Running" }));

  await runStep(newTestPass(depsOf(env), cs), reconcileMigration);

  const steps = writeActions(env.fake).map((a) =>
    a.subresource === "status"
      ? `status ${(a.patch as { status?: { phase?: string } }).status?.phase}`
      : `${a.verb} ${a.resource.plural}`
  );
  assert.deepEqual(steps, ["status Migrating", "create pods"]);
});

// vk-cocoon pushes :hibernate before it removes the VM and clears the VM id: for a moment the
// snapshot exists while the pod still shows the old VM live. Woken then, the next pass took that
// old VM for the restored one and dropped the snapshot vk-cocoon was about to restore from.
Deno.test("migration re-targeted back wakes the main only once its VM is down, so the tag outlives the old VM", async () => {
  const env = newTestEnv();
  putHibernateTag(env);
  const cs = env.fake.seed(CocoonSets, migSet("node-b", migrating));
  env.fake.seed(
    Pods,
    withHibernate(mainPod(cs, { node: "node-b", vmID: "vmid-1", running: true })),
  );
  const pass = async () =>
    await runStep(
      newTestPass(depsOf(env), await getSet(env.fake, SEAT_SET_NAME), [
        (await getPod(env.fake, "demo-0"))!,
      ]),
      reconcileMigration,
    );

  // vk-cocoon has pushed the snapshot but not yet torn the VM down.
  await pass();
  await pass();
  assert.ok(env.registry.contains(mainVMName, HIBERNATE_SNAPSHOT_TAG), "the tag is kept");
  assert.ok(readHibernateState((await getPod(env.fake, "demo-0"))!), "not woken yet");

  // The VM is down (no id, no running container): woken in place, the tag kept.
  await editPod(env, "demo-0", (p) => {
    const down = withHibernate(mainPod(cs, { node: "node-b" }));
    p.metadata.annotations = down.metadata.annotations;
    p.status = {};
  });
  await pass();
  assert.equal(readHibernateState((await getPod(env.fake, "demo-0"))!), false, "woken");
  await pass();
  assert.ok(env.registry.contains(mainVMName, HIBERNATE_SNAPSHOT_TAG), "kept until it runs");

  // Restored from the snapshot: now the tag goes.
  await editPod(env, "demo-0", (p) => {
    const up = mainPod(cs, { node: "node-b", vmID: "vmid-2", running: true });
    p.metadata.annotations = up.metadata.annotations;
    p.status = up.status;
  });
  await pass();
  assert.equal(env.registry.contains(mainVMName, HIBERNATE_SNAPSHOT_TAG), false);
});

// The tag a wake in place restores from is no leftover: while the woken VM is not up yet,
// pointing spec.nodeName at another node again must not drop it (the Go original did, so
// vk-cocoon's restore found no snapshot and the VM's state was gone).
Deno.test("migration re-targeted forward while a wake in place restores keeps the tag until that VM runs", async () => {
  const env = newTestEnv();
  putHibernateTag(env);
  const cs = env.fake.seed(CocoonSets, migSet("node-b", migrating));
  env.fake.seed(Pods, withHibernate(mainPod(cs, { node: "node-a" }))); // quiesced, VM down
  const retarget = (node: string) =>
    env.fake.patch(CocoonSets, "ns", SEAT_SET_NAME, "merge", { spec: { nodeName: node } });
  const pass = async () =>
    await runStep(
      newTestPass(depsOf(env), await getSet(env.fake, SEAT_SET_NAME), [
        (await getPod(env.fake, "demo-0"))!,
      ]),
      reconcileMigration,
    );

  await retarget("node-a");
  await pass();
  assert.equal(readHibernateState((await getPod(env.fake, "demo-0"))!), false, "woken in place");

  // Re-targeted forward before vk-cocoon restored the VM from the tag.
  await retarget("node-b");
  await pass();
  assert.ok(env.registry.contains(mainVMName, HIBERNATE_SNAPSHOT_TAG), "the restore's tag is kept");
  const pod = await getPod(env.fake, "demo-0");
  assert.ok(pod && !pod.metadata.deletionTimestamp, "and its pod");

  // Restored and running: now the tag is a leftover; dropped before the migration starts again.
  await editPod(env, "demo-0", (p) => {
    const up = mainPod(cs, { node: "node-a", vmID: "vmid-2", running: true });
    p.metadata.annotations = up.metadata.annotations;
    p.status = up.status;
  });
  await pass();
  assert.equal(env.registry.contains(mainVMName, HIBERNATE_SNAPSHOT_TAG), false);
  await pass();
  assert.ok(readHibernateState((await getPod(env.fake, "demo-0"))!), "quiesced for node-b");
});

// ---- decideMigration: the one state a migration with a snapshot is in ----

type MigrationMainFacts = NonNullable<MigrationFacts["main"]>;

/** A main live on node-a, not asked to hibernate, not restore-marked, not pinned. */
function migMain(fields: Partial<MigrationMainFacts> = {}): MigrationMainFacts {
  return {
    node: "node-a",
    hibernateRequested: false,
    live: true,
    up: true,
    mayBeLeaving: false,
    restoreMarked: false,
    requiredNode: "",
    ...fields,
  };
}

const migrationCases: [string, MigrationFacts, MigrationState][] = [
  [
    "on another node, not asked, VM not live: wait before the tag counts as a leftover",
    { main: migMain({ live: false, up: false }), desired: "node-b", migrating: false },
    "await-live-elsewhere",
  ],
  [
    "on another node, not asked, VM may be leaving: ask again",
    { main: migMain({ mayBeLeaving: true }), desired: "node-b", migrating: true },
    "ask-again",
  ],
  [
    "on another node, not asked, VM live and staying: the tag is stale",
    { main: migMain(), desired: "node-b", migrating: false },
    "drop-stale-tag",
  ],
  [
    "on another node, asked to hibernate: delete once the VM confirms",
    {
      main: migMain({ hibernateRequested: true, live: false }),
      desired: "node-b",
      migrating: true,
    },
    "release-old-main",
  ],
  ["no main: restore on the target", { desired: "node-b", migrating: true }, "recreate"],
  ["no main, no target: restore anywhere", { desired: "", migrating: true }, "recreate"],
  [
    "asked to hibernate on the target, VM still up: wait for vk-cocoon to remove it",
    {
      main: migMain({ node: "node-b", hibernateRequested: true }),
      desired: "node-b",
      migrating: true,
    },
    "await-vm-down",
  ],
  [
    "asked to hibernate, no target, VM down: wake in place",
    {
      main: migMain({ hibernateRequested: true, live: false, up: false }),
      desired: "",
      migrating: true,
    },
    "wake-in-place",
  ],
  [
    "restoring while the set is not Migrating: a CocoonHibernation's wake",
    { main: migMain({ node: "node-b", live: false }), desired: "node-b", migrating: false },
    "not-ours",
  ],
  [
    "unbound restore pod pinned to an abandoned target",
    {
      main: migMain({ node: "", live: false, restoreMarked: true, requiredNode: "node-c" }),
      desired: "node-b",
      migrating: true,
    },
    "replace-restore-pod",
  ],
  [
    "unbound restore pod pinned to the target: wait",
    {
      main: migMain({ node: "", live: false, restoreMarked: true, requiredNode: "node-b" }),
      desired: "node-b",
      migrating: true,
    },
    "await-restore",
  ],
  [
    "restored and live on the target: drop the tag",
    { main: migMain({ node: "node-b" }), desired: "node-b", migrating: true },
    "drop-tag",
  ],
];

Deno.test("decideMigration: each row of the table gives its state, and every state is reachable", () => {
  for (const [name, facts, want] of migrationCases) {
    assert.equal(decideMigration(facts), want, name);
  }
  const reached = new Set(migrationCases.map(([, , state]) => state));
  assert.deepEqual(reached.size, 11, "all eleven MigrationState values");
});
