import assert from "node:assert/strict";
import { isConflict, Pods } from "../kube/mod.ts";
import type { Pod } from "../kube/mod.ts";
import type { CocoonSet } from "../common/apis/v1/cocoonset_types.ts";
import { CocoonSets } from "../common/apis/v1/resources.ts";
import {
  ANNOTATION_HIBERNATED_ON_NODE,
  ANNOTATION_KEEP_SNAPSHOT_ON_DELETE,
  ANNOTATION_LIFECYCLE_STATE,
  applyHibernateState,
  applyLifecycleStatus,
  LABEL_SNAPSHOT_COMPATIBILITY_CLASS,
  LIFECYCLE_STATE_FAILED,
  LIFECYCLE_STATE_HIBERNATING,
  markRestoreFromHibernate,
  readHibernateState,
  readKeepSnapshotOnDelete,
  readRestoreFromHibernate,
} from "../common/meta/mod.ts";
import { ANNOTATION_DELETE_VM_NAMES } from "./teardown.ts";
import {
  decideReleasedWake,
  REASON_WAKE_NO_CAPACITY,
  reconcileReleasedWake,
  reconcileSuspendRelease,
  type ReleasedWakeFacts,
  type ReleasedWakeState,
} from "./seat_release.ts";
import {
  counterValue,
  depsOf,
  editPod,
  getPod,
  getSet,
  laggingCache,
  newTestEnv,
  newTestPass,
  reconcilerWith,
  reconcileSet,
  runStep,
  setSeed,
  type TestEnv,
  withFinalizer,
} from "./_test_support.ts";
import {
  hibernatedMainPod,
  mainPod,
  mainVMName,
  SEAT_SET_NAME,
  seatSet,
  writeActions,
} from "./_seats_test_support.ts";
import { HIBERNATE_SNAPSHOT_TAG } from "../snapshot/registry.ts";

const PODS_DELETED_TOTAL = "cocoon_operator_slot_release_pods_deleted_total";
const WAKE_TOTAL = "cocoon_operator_slot_release_wake_total";
const WAKE_UNSCHEDULABLE_TOTAL = "cocoon_operator_slot_release_wake_unschedulable_total";
const SET_LABELS = { namespace: "ns", cocoonset: "demo" };

/** A suspended release-policy set at generation 1, modified by mods. */
function relSet(...mods: ((cs: CocoonSet) => void)[]): CocoonSet {
  return seatSet((cs) => {
    cs.spec.suspend = true;
    cs.spec.hibernatePolicy = "release";
  }, ...mods);
}

/** A released set being unsuspended, with the given stored phase and node hint ("" = none). */
function wakeSet(
  phase: NonNullable<CocoonSet["status"]>["phase"],
  hint: string,
  ...mods: ((cs: CocoonSet) => void)[]
): CocoonSet {
  return relSet((cs) => {
    cs.spec.suspend = false;
    cs.status = { phase };
    if (hint) cs.metadata.annotations = { [ANNOTATION_HIBERNATED_ON_NODE]: hint };
  }, ...mods);
}

function putHibernateTag(env: TestEnv): void {
  env.registry.put(mainVMName, HIBERNATE_SNAPSHOT_TAG);
}

function storedSet(env: TestEnv): Promise<CocoonSet> {
  return getSet(env.fake, SEAT_SET_NAME);
}

function tagDeletes(env: TestEnv): string[] {
  return env.registry.callsOf("deleteManifest").map((c) => `${c.name}:${c.reference}`);
}

/** A probe error on every hasManifest: proves the registry is never consulted. */
function failEveryProbe(env: TestEnv): void {
  env.registry.failNext("hasManifest", new Error("boom"), { times: Infinity });
}

function withHibernate(pod: Pod): Pod {
  applyHibernateState(true, pod);
  return pod;
}

function restoreMarked(pod: Pod): Pod {
  markRestoreFromHibernate(pod);
  return pod;
}

/** The stored pod was deleted: gone, or Terminating while its kubelet finalizes it. */
async function assertDeleted(env: TestEnv, name: string, why: string): Promise<void> {
  const pod = await getPod(env.fake, name);
  assert.ok(pod === undefined || pod.metadata.deletionTimestamp, why);
  assert.ok(
    env.fake.actions.some((a) => a.verb === "delete" && a.resource === Pods && a.name === name),
    `${why}: a DELETE was sent`,
  );
}

// --- reconcileSuspendRelease -------------------------------------------------------------------

Deno.test("release suspend without a registry fails closed and keeps the pod", async () => {
  const env = newTestEnv([], undefined, { withoutRegistry: true });
  const main = env.fake.seed(Pods, hibernatedMainPod(relSet(), "node-a"));
  const cs = env.fake.seed(CocoonSets, relSet());

  await assert.rejects(
    runStep(newTestPass(depsOf(env), cs, [main]), reconcileSuspendRelease),
    /needs a registry/,
  );
  assert.ok(await getPod(env.fake, "demo-0"), "the seat is kept");
  assert.deepEqual(writeActions(env.fake), []);
});

Deno.test("release suspend of a pod-less set settles Suspended without requeue", async () => {
  const env = newTestEnv();
  const cs = env.fake.seed(CocoonSets, relSet());

  const result = await runStep(newTestPass(depsOf(env), cs), reconcileSuspendRelease);

  assert.deepEqual(result, {});
  assert.equal((await storedSet(env)).status?.phase, "Suspended");
  assert.equal(await getPod(env.fake, "demo-0"), undefined, "nothing is created");
});

Deno.test("release suspend keeps the pod until its snapshot is in the registry", async () => {
  const env = newTestEnv(); // no :hibernate tag
  const main = env.fake.seed(Pods, hibernatedMainPod(relSet(), "node-a"));
  const cs = env.fake.seed(CocoonSets, relSet());

  const result = await runStep(newTestPass(depsOf(env), cs, [main]), reconcileSuspendRelease);

  assert.deepEqual(result, { requeueAfter: 5_000 });
  const pod = await getPod(env.fake, "demo-0");
  assert.ok(pod && !pod.metadata.deletionTimestamp, "the pod survives an unverified snapshot");
  assert.ok(!env.fake.actions.some((a) => a.verb === "delete"));
  assert.equal((await storedSet(env)).status?.phase, "Suspending");
});

Deno.test("release suspend deletes the verified pod, stashes hint and VM names, lands Suspended", async () => {
  const env = newTestEnv();
  putHibernateTag(env);
  const main = env.fake.seed(Pods, hibernatedMainPod(relSet(), "node-a"));
  const cs = env.fake.seed(CocoonSets, relSet());

  const result = await runStep(newTestPass(depsOf(env), cs, [main]), reconcileSuspendRelease);

  assert.deepEqual(result, { requeueAfter: 5_000 });
  await assertDeleted(env, "demo-0", "the hibernated pod gives its seat back");
  const stored = await storedSet(env);
  assert.equal(stored.metadata.annotations?.[ANNOTATION_HIBERNATED_ON_NODE], "node-a");
  assert.ok(
    stored.metadata.annotations?.[ANNOTATION_DELETE_VM_NAMES]?.split(",").includes(mainVMName),
    "VM names are stashed for teardown before the pods go",
  );
  assert.equal(stored.status?.phase, "Suspended", "Suspended lands with the deletes");
  assert.deepEqual(tagDeletes(env), [], "suspend never drops the snapshot");
  assert.ok(env.registry.contains(mainVMName, HIBERNATE_SNAPSHOT_TAG));
});

Deno.test("release suspend keeps a terminal pod for triage and still settles Suspended", async () => {
  const env = newTestEnv(); // no tag: a terminal pod has no VM to snapshot
  const failed = mainPod(relSet(), { node: "node-a" });
  applyLifecycleStatus(
    { state: LIFECYCLE_STATE_FAILED, observedGeneration: 1, message: "" },
    failed,
  );
  const main = env.fake.seed(Pods, failed);
  const cs = env.fake.seed(CocoonSets, relSet());

  await runStep(newTestPass(depsOf(env), cs, [main]), reconcileSuspendRelease);

  const pod = await getPod(env.fake, "demo-0");
  assert.ok(pod && !pod.metadata.deletionTimestamp, "the terminal pod is kept");
  assert.ok(!env.fake.actions.some((a) => a.verb === "delete"));
  assert.equal((await storedSet(env)).status?.phase, "Suspended");
});

Deno.test("release suspend makes keep-snapshot-on-delete durable on the pod before the DELETE", async () => {
  const env = newTestEnv();
  putHibernateTag(env);
  const main = env.fake.seed(Pods, hibernatedMainPod(relSet(), "node-a"));
  const cs = env.fake.seed(CocoonSets, relSet());
  let flaggedAtDelete: boolean | undefined;
  env.fake.addReactor(async (action) => {
    if (action.verb !== "delete" || action.resource !== Pods) return undefined;
    // Read back from the API: the mark must be stored, not just set on the caller's copy.
    flaggedAtDelete = readKeepSnapshotOnDelete(await env.fake.get(Pods, "ns", action.name));
    return undefined;
  });

  await runStep(newTestPass(depsOf(env), cs, [main]), reconcileSuspendRelease);

  assert.equal(flaggedAtDelete, true);
});

Deno.test("release suspend frees the seat even when the keep-snapshot patch is rejected", async () => {
  const env = newTestEnv();
  putHibernateTag(env);
  const main = env.fake.seed(Pods, hibernatedMainPod(relSet(), "node-a"));
  const cs = env.fake.seed(CocoonSets, relSet());
  env.fake.addReactor((action) => {
    const annotations = (action.patch as { metadata?: { annotations?: Record<string, unknown> } })
      ?.metadata?.annotations;
    if (
      action.verb === "patch" && annotations?.[ANNOTATION_KEEP_SNAPSHOT_ON_DELETE] !== undefined
    ) {
      return new Error("webhook rejected the pod patch");
    }
    return undefined;
  });

  const result = await runStep(newTestPass(depsOf(env), cs, [main]), reconcileSuspendRelease);

  assert.deepEqual(result, { requeueAfter: 5_000 });
  await assertDeleted(env, "demo-0", "the seat is released without the mark");
  const pod = await getPod(env.fake, "demo-0");
  assert.ok(!pod || readHibernateState(pod), "the hibernate request itself still landed");
  assert.equal((await storedSet(env)).status?.phase, "Suspended");
});

// Not asserted by the Go tests: the order of the writes and the deletes metric.
Deno.test("release suspend writes stash, hint, keep-snapshot, DELETE, Suspended in that order and counts the delete", async () => {
  const env = newTestEnv();
  putHibernateTag(env);
  const main = env.fake.seed(Pods, withHibernate(hibernatedMainPod(relSet(), "node-a")));
  const cs = env.fake.seed(CocoonSets, relSet());
  const before = await counterValue(PODS_DELETED_TOTAL, SET_LABELS);

  await runStep(newTestPass(depsOf(env), cs, [main]), reconcileSuspendRelease);

  const steps = writeActions(env.fake).map((a) => {
    const body = JSON.stringify(a.patch ?? {});
    if (a.resource === CocoonSets && a.subresource === "status") {
      return `status ${(a.patch as { status?: { phase?: string } }).status?.phase}`;
    }
    if (a.resource === CocoonSets && body.includes(ANNOTATION_DELETE_VM_NAMES)) return "stash";
    if (a.resource === CocoonSets && body.includes(ANNOTATION_HIBERNATED_ON_NODE)) return "hint";
    if (a.verb === "patch" && body.includes(ANNOTATION_KEEP_SNAPSHOT_ON_DELETE)) return "keep";
    return `${a.verb} ${a.resource.plural}`;
  });
  assert.deepEqual(steps, ["stash", "hint", "keep", "delete pods", "status Suspended"]);
  const keep = writeActions(env.fake).find((a) =>
    JSON.stringify(a.patch ?? {}).includes(ANNOTATION_KEEP_SNAPSHOT_ON_DELETE)
  );
  assert.deepEqual(keep?.patch, {
    metadata: { annotations: { [ANNOTATION_KEEP_SNAPSHOT_ON_DELETE]: "true" } },
  });
  assert.equal(await counterValue(PODS_DELETED_TOTAL, SET_LABELS) - before, 1);
});

// --- reconcileReleasedWake -----------------------------------------------------------------------------

Deno.test("wake recreates the main restoring from its snapshot with a preferred affinity to the hint node", async () => {
  const env = newTestEnv();
  putHibernateTag(env);
  const cs = env.fake.seed(
    CocoonSets,
    relSet((c) => {
      c.spec.suspend = false;
      c.spec.snapshotCompatibilityClass = "n2-cascade-lake-v1";
      c.status = { phase: "Suspended" };
      c.metadata.annotations = { [ANNOTATION_HIBERNATED_ON_NODE]: "node-a" };
    }),
  );

  const got = await runStep(newTestPass(depsOf(env), cs), reconcileReleasedWake);

  assert.deepEqual(got, { requeueAfter: 5_000 });
  const pod = await env.fake.get(Pods, "ns", "demo-0");
  assert.ok(readRestoreFromHibernate(pod), "the new main restores from :hibernate");
  assert.equal(pod.spec?.nodeName, undefined, "the wake never hard-pins a node");
  assert.equal(pod.spec?.nodeSelector?.[LABEL_SNAPSHOT_COMPATIBILITY_CLASS], "n2-cascade-lake-v1");
  assert.deepEqual(pod.spec?.affinity, {
    nodeAffinity: {
      preferredDuringSchedulingIgnoredDuringExecution: [{
        weight: 100,
        preference: {
          matchExpressions: [{ key: "kubernetes.io/hostname", operator: "In", values: ["node-a"] }],
        },
      }],
    },
  }, "the hint is a preference, never a requirement");
  assert.equal((await storedSet(env)).status?.phase, "Waking");
  assert.deepEqual(tagDeletes(env), [], "the tag survives until the restored VM is live");
});

Deno.test("wake of a set pinned by spec.nodeName requires the pinned node, not the hint", async () => {
  const env = newTestEnv();
  putHibernateTag(env);
  const cs = env.fake.seed(
    CocoonSets,
    wakeSet("Suspended", "node-a", (c) => c.spec.nodeName = "node-b"),
  );

  const got = await runStep(newTestPass(depsOf(env), cs), reconcileReleasedWake);

  assert.notEqual(got, undefined);
  const pod = await env.fake.get(Pods, "ns", "demo-0");
  assert.deepEqual(pod.spec?.affinity, {
    nodeAffinity: {
      requiredDuringSchedulingIgnoredDuringExecution: {
        nodeSelectorTerms: [{
          matchExpressions: [{ key: "kubernetes.io/hostname", operator: "In", values: ["node-b"] }],
        }],
      },
    },
  });
});

Deno.test("wake restores on a fast unsuspend that lands while the phase still reads Suspending", async () => {
  const env = newTestEnv();
  putHibernateTag(env);
  const cs = env.fake.seed(CocoonSets, wakeSet("Suspending", "node-a"));

  const got = await runStep(newTestPass(depsOf(env), cs), reconcileReleasedWake);

  assert.notEqual(got, undefined);
  const pod = await env.fake.get(Pods, "ns", "demo-0");
  assert.ok(readRestoreFromHibernate(pod), "restore, never a fresh boot over the snapshot");
  assert.equal((await storedSet(env)).status?.phase, "Waking");
});

Deno.test("wake leaves Suspending without the node hint to the normal flow", async () => {
  const env = newTestEnv();
  failEveryProbe(env);
  const cs = env.fake.seed(CocoonSets, wakeSet("Suspending", ""));

  const got = await runStep(newTestPass(depsOf(env), cs), reconcileReleasedWake);

  assert.deepEqual(got, undefined);
  assert.deepEqual(env.registry.calls, []);
  assert.deepEqual(writeActions(env.fake), []);
});

Deno.test("wake waits out a stale pod cache under Suspended, then restores", async () => {
  const env = newTestEnv();
  putHibernateTag(env);
  const cs = env.fake.seed(CocoonSets, wakeSet("Suspended", "node-a"));
  // The cache still shows the released main; the API no longer has it.
  const stale = withHibernate(hibernatedMainPod(cs, "node-a"));

  const first = await runStep(newTestPass(depsOf(env), cs, [stale]), reconcileReleasedWake);

  assert.deepEqual(first, { requeueAfter: 5_000 });
  assert.deepEqual(tagDeletes(env), [], "waiting keeps the tag");
  assert.equal(await getPod(env.fake, "demo-0"), undefined, "nothing is created yet");

  const second = await runStep(newTestPass(depsOf(env), cs), reconcileReleasedWake);

  assert.notEqual(second, undefined);
  const pod = await env.fake.get(Pods, "ns", "demo-0");
  assert.ok(readRestoreFromHibernate(pod), "the cleared cache leads to a restore");
});

Deno.test("wake waits out a stale main under Suspending (no Suspended receipt), then restores", async () => {
  const env = newTestEnv();
  putHibernateTag(env);
  const cs = env.fake.seed(CocoonSets, wakeSet("Suspending", "node-a"));
  const stale = withHibernate(hibernatedMainPod(cs, "node-a"));

  const first = await runStep(newTestPass(depsOf(env), cs, [stale]), reconcileReleasedWake);
  assert.deepEqual(first, { requeueAfter: 5_000 });
  assert.equal(await getPod(env.fake, "demo-0"), undefined);

  const second = await runStep(newTestPass(depsOf(env), cs), reconcileReleasedWake);

  assert.notEqual(second, undefined);
  assert.ok(readRestoreFromHibernate(await env.fake.get(Pods, "ns", "demo-0")));
});

Deno.test("wake leaves a main whose delete never happened to the in-place unsuspend", async () => {
  const env = newTestEnv();
  const cs = env.fake.seed(CocoonSets, wakeSet("Suspending", "node-a"));
  const main = env.fake.seed(Pods, withHibernate(hibernatedMainPod(cs, "node-a")));

  const got = await runStep(newTestPass(depsOf(env), cs, [main]), reconcileReleasedWake);

  assert.deepEqual(got, undefined);
  assert.deepEqual(writeActions(env.fake), []);
});

Deno.test("wake without a snapshot hands the fresh boot to the normal flow", async () => {
  const env = newTestEnv(); // no tag: suspended before the first boot
  const cs = env.fake.seed(CocoonSets, wakeSet("Suspended", ""));

  const got = await runStep(newTestPass(depsOf(env), cs), reconcileReleasedWake);

  assert.deepEqual(got, undefined);
  assert.equal(await getPod(env.fake, "demo-0"), undefined, "the wake itself creates nothing");
  assert.deepEqual(writeActions(env.fake), []);
});

Deno.test("wake fails closed on a registry probe error: no pod, no write", async () => {
  const env = newTestEnv();
  failEveryProbe(env);
  const cs = env.fake.seed(CocoonSets, wakeSet("Suspended", ""));

  await assert.rejects(
    runStep(newTestPass(depsOf(env), cs), reconcileReleasedWake),
    /wake: probe hibernate snapshot/,
  );
  assert.equal(await getPod(env.fake, "demo-0"), undefined);
  assert.deepEqual(writeActions(env.fake), []);
});

Deno.test("wake waits while the restore pod has no live VM and keeps the snapshot", async () => {
  const env = newTestEnv();
  putHibernateTag(env);
  const cs = env.fake.seed(CocoonSets, wakeSet("Waking", ""));
  const main = env.fake.seed(Pods, mainPod(cs)); // unscheduled, no VM id

  const got = await runStep(newTestPass(depsOf(env), cs, [main]), reconcileReleasedWake);

  assert.deepEqual(got, { requeueAfter: 5_000 });
  assert.deepEqual(tagDeletes(env), []);
  assert.ok(env.registry.contains(mainVMName, HIBERNATE_SNAPSHOT_TAG));
  assert.equal((await storedSet(env)).status?.phase, "Waking");
});

Deno.test("wake drops the snapshot and the node hint once the restored VM is live; off the hint it scores pool", async () => {
  const env = newTestEnv();
  putHibernateTag(env);
  const cs = env.fake.seed(CocoonSets, wakeSet("Waking", "node-a"));
  const main = env.fake.seed(
    Pods,
    mainPod(cs, { node: "node-c", vmID: "vmid-new", running: true }),
  );
  const pool = await counterValue(WAKE_TOTAL, { ...SET_LABELS, placement: "pool" });
  const hintNode = await counterValue(WAKE_TOTAL, { ...SET_LABELS, placement: "hint-node" });

  const got = await runStep(newTestPass(depsOf(env), cs, [main]), reconcileReleasedWake);

  assert.deepEqual(got, { requeue: true });
  assert.deepEqual(tagDeletes(env), [`${mainVMName}:${HIBERNATE_SNAPSHOT_TAG}`]);
  assert.equal(env.registry.contains(mainVMName, HIBERNATE_SNAPSHOT_TAG), false);
  const stored = await storedSet(env);
  assert.equal(stored.metadata.annotations?.[ANNOTATION_HIBERNATED_ON_NODE], undefined);
  assert.notEqual(stored.status?.phase, "Waking", "the phase derives from the pods again");
  assert.equal(await counterValue(WAKE_TOTAL, { ...SET_LABELS, placement: "pool" }) - pool, 1);
  assert.equal(
    await counterValue(WAKE_TOTAL, { ...SET_LABELS, placement: "hint-node" }) - hintNode,
    0,
  );
});

Deno.test("wake keeps the snapshot while vk-cocoon is hibernating the restored main (pushed, VM not yet removed)", async () => {
  const env = newTestEnv();
  putHibernateTag(env);
  const cs = env.fake.seed(CocoonSets, wakeSet("Waking", "node-a"));
  const main = mainPod(cs, { node: "node-a", vmID: "vmid-old", running: true });
  main.metadata.annotations![ANNOTATION_LIFECYCLE_STATE] = LIFECYCLE_STATE_HIBERNATING;
  env.fake.seed(Pods, main);

  const got = await runStep(newTestPass(depsOf(env), cs, [main]), reconcileReleasedWake);

  assert.deepEqual(got, { requeueAfter: 5_000 });
  assert.deepEqual(tagDeletes(env), []);
  assert.ok(env.registry.contains(mainVMName, HIBERNATE_SNAPSHOT_TAG));
  assert.equal((await storedSet(env)).status?.phase, "Waking");
});

Deno.test("wake never engages from Running: a stale tag is not trusted", async () => {
  const env = newTestEnv();
  failEveryProbe(env);
  const cs = env.fake.seed(CocoonSets, wakeSet("Running", ""));

  const got = await runStep(newTestPass(depsOf(env), cs), reconcileReleasedWake);

  assert.deepEqual(got, undefined);
  assert.deepEqual(env.registry.calls, []);
});

Deno.test("wake completes after a stale write replaced Waking: restore-marked live main plus hint", async () => {
  const env = newTestEnv();
  putHibernateTag(env);
  const cs = env.fake.seed(CocoonSets, wakeSet("Pending", "node-a"));
  const main = env.fake.seed(
    Pods,
    restoreMarked(mainPod(cs, { node: "node-a", vmID: "vmid-new", running: true })),
  );

  const got = await runStep(newTestPass(depsOf(env), cs, [main]), reconcileReleasedWake);

  assert.notEqual(got, undefined);
  assert.deepEqual(tagDeletes(env), [`${mainVMName}:${HIBERNATE_SNAPSHOT_TAG}`]);
  assert.equal(
    (await storedSet(env)).metadata.annotations?.[ANNOTATION_HIBERNATED_ON_NODE],
    undefined,
    "the hint is cleared so the fallback retires",
  );
});

Deno.test("wake after a stale phase write repaints Waking while the restore is not live", async () => {
  const env = newTestEnv();
  putHibernateTag(env);
  const cs = env.fake.seed(CocoonSets, wakeSet("Pending", "node-a"));
  const main = env.fake.seed(Pods, restoreMarked(mainPod(cs, { node: "node-a" })));

  const got = await runStep(newTestPass(depsOf(env), cs, [main]), reconcileReleasedWake);

  assert.deepEqual(got, { requeueAfter: 5_000 });
  assert.deepEqual(tagDeletes(env), []);
  assert.equal((await storedSet(env)).status?.phase, "Waking");
});

Deno.test("wake stays disengaged after cleanup: the restore mark alone does not re-engage", async () => {
  const env = newTestEnv();
  failEveryProbe(env);
  const cs = env.fake.seed(CocoonSets, wakeSet("Running", ""));
  const main = env.fake.seed(
    Pods,
    restoreMarked(mainPod(cs, { node: "node-a", vmID: "vmid-new", running: true })),
  );

  const got = await runStep(newTestPass(depsOf(env), cs, [main]), reconcileReleasedWake);

  assert.deepEqual(got, undefined);
  assert.deepEqual(env.registry.calls, []);
});

Deno.test("wake leaves a Suspended set's placeholder pod to the in-place unsuspend", async () => {
  const env = newTestEnv();
  const cs = env.fake.seed(CocoonSets, wakeSet("Suspended", ""));
  const main = env.fake.seed(Pods, withHibernate(hibernatedMainPod(cs, "node-a")));

  const got = await runStep(newTestPass(depsOf(env), cs, [main]), reconcileReleasedWake);

  assert.deepEqual(got, undefined);
  assert.deepEqual(writeActions(env.fake), []);
});

Deno.test("wake scores its placement once even when a stale Waking status re-enters", async () => {
  const env = newTestEnv();
  putHibernateTag(env);
  const cs = env.fake.seed(CocoonSets, wakeSet("Waking", "node-a"));
  const main = env.fake.seed(
    Pods,
    mainPod(cs, { node: "node-a", vmID: "vmid-new", running: true }),
  );
  const score = (placement: string) => counterValue(WAKE_TOTAL, { ...SET_LABELS, placement });
  const hintNode0 = await score("hint-node");
  const pool0 = await score("pool");

  await runStep(newTestPass(depsOf(env), cs, [main]), reconcileReleasedWake);
  assert.equal(await score("hint-node") - hintNode0, 1, "landing on the hint scores hint-node");

  // The hint patch landed, the status write is seen stale.
  const stale = await storedSet(env);
  stale.status = { ...stale.status, phase: "Waking" };
  await runStep(newTestPass(depsOf(env), stale, [main]), reconcileReleasedWake);

  assert.equal(await score("hint-node") - hintNode0, 1, "the re-entry does not score again");
  assert.equal(await score("pool") - pool0, 0, "nor as pool");
});

// Not asserted by the Go tests: the Waking write precedes the create.
Deno.test("wake persists Waking before it creates the restore pod", async () => {
  const env = newTestEnv();
  putHibernateTag(env);
  const cs = env.fake.seed(CocoonSets, wakeSet("Suspended", "node-a"));

  await runStep(newTestPass(depsOf(env), cs), reconcileReleasedWake);

  const writes = writeActions(env.fake);
  const waking = writes.findIndex((a) =>
    a.subresource === "status" &&
    (a.patch as { status?: { phase?: string } }).status?.phase === "Waking"
  );
  const create = writes.findIndex((a) => a.verb === "create" && a.resource === Pods);
  assert.ok(waking >= 0 && create >= 0, JSON.stringify(writes.map((a) => a.verb)));
  assert.ok(waking < create, "Waking is durable before the pod exists");
});

// Not asserted by the Go tests: no capacity is reported on every pass.
Deno.test("wake reports WakeNoCapacity with the scheduler's message on every pass while Unschedulable", async () => {
  const env = newTestEnv();
  putHibernateTag(env);
  const cs = env.fake.seed(CocoonSets, wakeSet("Waking", "node-a"));
  const pending = restoreMarked(mainPod(cs));
  const message = "0/3 nodes are available: 3 Insufficient memory.";
  pending.status = {
    phase: "Pending",
    conditions: [{ type: "PodScheduled", status: "False", reason: "Unschedulable", message }],
  };
  const main = env.fake.seed(Pods, pending);
  const before = await counterValue(WAKE_UNSCHEDULABLE_TOTAL, SET_LABELS);

  for (let pass = 0; pass < 2; pass++) {
    const got = await runStep(newTestPass(depsOf(env), cs, [main]), reconcileReleasedWake);
    assert.deepEqual(got, { requeueAfter: 5_000 });
  }

  const events = env.recorder.withReason(REASON_WAKE_NO_CAPACITY);
  assert.equal(events.length, 2, "one Event per pass");
  for (const e of events) {
    assert.equal(e.type, "Warning");
    assert.equal(e.message, `main pod demo-0 unschedulable: ${message}`);
    assert.equal(e.object.kind, "CocoonSet");
    assert.equal(e.object.metadata.name, "demo");
  }
  assert.equal(await counterValue(WAKE_UNSCHEDULABLE_TOTAL, SET_LABELS) - before, 2);
  assert.equal((await storedSet(env)).status?.phase, "Waking", "never Failed: a seat may free up");
  assert.deepEqual(tagDeletes(env), []);
});

Deno.test("wake of a pod that is merely pending scheduling records no WakeNoCapacity", async () => {
  const env = newTestEnv();
  putHibernateTag(env);
  const cs = env.fake.seed(CocoonSets, wakeSet("Waking", "node-a"));
  const main = env.fake.seed(Pods, restoreMarked(mainPod(cs)));
  const before = await counterValue(WAKE_UNSCHEDULABLE_TOTAL, SET_LABELS);

  await runStep(newTestPass(depsOf(env), cs, [main]), reconcileReleasedWake);

  assert.deepEqual(env.recorder.events, []);
  assert.equal(await counterValue(WAKE_UNSCHEDULABLE_TOTAL, SET_LABELS) - before, 0);
});

// Not in the Go tests: a CocoonHibernation (or a person) may ask the restored main to hibernate
// while the wake still reads Waking. vk-cocoon pushes the new `:hibernate` before it removes the
// VM, so in that window the pod still shows the VM live; dropping the tag then would leave the
// VM removed with no snapshot at all.
Deno.test("wake keeps the snapshot when the restored main is asked to hibernate again", async () => {
  const env = newTestEnv();
  putHibernateTag(env);
  const cs = env.fake.seed(CocoonSets, wakeSet("Waking", "node-a"));
  const main = env.fake.seed(
    Pods,
    withHibernate(
      restoreMarked(mainPod(cs, { node: "node-a", vmID: "vmid-new", running: true })),
    ),
  );

  await runStep(newTestPass(depsOf(env), cs, [main]), reconcileReleasedWake);

  assert.deepEqual(tagDeletes(env), [], "the tag may already hold the new hibernation");
  assert.ok(env.registry.contains(mainVMName, HIBERNATE_SNAPSHOT_TAG));
});

// Not in the Go tests: a restore pod that fails (its pull of `:hibernate` failed in a registry
// outage) turns the set Failed, which replaces Waking; the hint still says the wake is unfinished.
// Once that pod is gone (deleted by a person, or as drifted), the main must restore again, not
// boot fresh over the snapshot.
Deno.test("wake restores again after a failed restore pod is gone, not a fresh boot", async () => {
  const env = newTestEnv([setSeed(wakeSet("Failed", "node-a"))]);
  putHibernateTag(env);

  await reconcileSet(env, SEAT_SET_NAME);

  const pod = await getPod(env.fake, "demo-0");
  assert.ok(pod, "the main is recreated");
  assert.ok(readRestoreFromHibernate(pod), "from its snapshot, never fresh over it");
  assert.equal((await storedSet(env)).status?.phase, "Waking");
  assert.deepEqual(tagDeletes(env), []);
});

// Not in the Go tests: a pass working from a copy of the set older than an unsuspend still
// releases the seat. The node hint it writes is what tells a later pass that the pods went; a
// cache that shows the unsuspend but not yet that hint sees no main and no hint, and boots the
// main fresh over its snapshot. The hint write returns the stored set: it must be heeded.
Deno.test("release suspend deletes nothing when the set it re-read has moved past the pass", async (t) => {
  // Two refusals guard the window, each pinned alone: with the VM names still to stash, the
  // locked stash write is refused (Conflict) before anything else; with them already stashed,
  // the unlocked hint write answers with the moved set and the generation check must stop the
  // deletes.
  for (const stashed of [false, true]) {
    await t.step(stashed ? "names already stashed" : "names to stash", async () => {
      const env = newTestEnv();
      putHibernateTag(env);
      env.fake.seed(
        CocoonSets,
        relSet(withFinalizer, (c) => {
          c.status = { phase: "Suspending" };
          if (stashed) c.metadata.annotations = { [ANNOTATION_DELETE_VM_NAMES]: mainVMName };
        }),
      );
      const stale = await storedSet(env);
      const main = env.fake.seed(Pods, withHibernate(hibernatedMainPod(stale, "node-a")));
      await env.fake.patch(CocoonSets, "ns", SEAT_SET_NAME, "merge", { spec: { suspend: false } });
      const unsuspended = await storedSet(env); // what a cache shows before the hint lands

      // Refused either way: the stash write carries the stale resourceVersion (Conflict), and a
      // stored set whose generation moved past the pass deletes nothing.
      const mark = env.fake.actions.length;
      const refusal = await runStep(
        newTestPass(depsOf(env), stale, [main]),
        reconcileSuspendRelease,
      ).then(
        (result) => result,
        (err) => {
          if (!isConflict(err)) throw err;
          return "conflict" as const;
        },
      );
      assert.deepEqual(refusal, stashed ? { requeue: true } : "conflict", "the refusal pinned");
      assert.ok(
        !env.fake.actions.slice(mark).some((a) => a.verb === "delete" && a.resource === Pods),
        "no pod delete sent",
      );
      // vk-cocoon finishes whatever pod delete was sent.
      if ((await getPod(env.fake, "demo-0"))?.metadata.deletionTimestamp) {
        await env.fake.delete(Pods, "ns", "demo-0", { gracePeriodSeconds: 0 });
      }
      const behind = reconcilerWith(env, laggingCache(env.fake, { set: unsuspended }));
      await behind.reconcile(
        { namespace: "ns", name: SEAT_SET_NAME },
        new AbortController().signal,
      );

      const now = await getPod(env.fake, "demo-0");
      assert.ok(
        now && (now.metadata.uid === main.metadata.uid || readRestoreFromHibernate(now)),
        "never a main booted fresh over the snapshot",
      );
      assert.equal(now.metadata.uid, main.metadata.uid, "the hibernated main is woken in place");
      assert.equal(now.metadata.deletionTimestamp, undefined);
    });
  }
});

// The same window seen through a lagging pod cache: the request is on the stored pod, the cached
// copy the pass works from predates it.
Deno.test("wake keeps the snapshot when only the stored main carries the new hibernate request", async () => {
  const env = newTestEnv();
  putHibernateTag(env);
  const cs = env.fake.seed(CocoonSets, wakeSet("Waking", "node-a"));
  const cached = env.fake.seed(
    Pods,
    restoreMarked(mainPod(cs, { node: "node-a", vmID: "vmid-new", running: true })),
  );
  await editPod(env, "demo-0", withHibernate);

  await runStep(newTestPass(depsOf(env), cs, [cached]), reconcileReleasedWake);

  assert.deepEqual(tagDeletes(env), [], "the tag may already hold the new hibernation");
  assert.ok(env.registry.contains(mainVMName, HIBERNATE_SNAPSHOT_TAG));
});

// ---- decideReleasedWake: the one state a released-seat wake is in ----

type WakeMain = NonNullable<ReleasedWakeFacts["main"]>;

/** A live main, not restore-marked, not asked to hibernate, not terminal. */
function wakeMain(fields: Partial<WakeMain> = {}): WakeMain {
  return {
    restoreMarked: false,
    hibernateRequested: false,
    live: true,
    terminal: false,
    ...fields,
  };
}

const wakeCases: [string, ReleasedWakeFacts, ReleasedWakeState][] = [
  ["Running: never engaged", { phase: "Running", hint: "node-a", hasRegistry: true }, "idle"],
  ["Suspended without a registry", { phase: "Suspended", hint: "n", hasRegistry: false }, "idle"],
  ["Suspending without the hint", { phase: "Suspending", hint: "", hasRegistry: true }, "idle"],
  ["Failed with a main", {
    phase: "Failed",
    hint: "n",
    hasRegistry: true,
    main: wakeMain({ terminal: true }),
  }, "idle"],
  ["Suspended, no main", { phase: "Suspended", hint: "n", hasRegistry: true }, "start"],
  [
    "Suspending with the hint, no main",
    { phase: "Suspending", hint: "n", hasRegistry: true },
    "start",
  ],
  ["Failed with the hint, no main", { phase: "Failed", hint: "n", hasRegistry: true }, "start"],
  ["Waking, no main", { phase: "Waking", hint: "", hasRegistry: true }, "start"],
  ["Waking, VM not live", {
    phase: "Waking",
    hint: "n",
    hasRegistry: true,
    main: wakeMain({ restoreMarked: true, live: false }),
  }, "restoring"],
  ["Waking, VM live", {
    phase: "Waking",
    hint: "n",
    hasRegistry: true,
    main: wakeMain({ restoreMarked: true }),
  }, "complete"],
  ["a stale phase over an unfinished wake, VM live", {
    phase: "Running",
    hint: "n",
    hasRegistry: true,
    main: wakeMain({ restoreMarked: true }),
  }, "complete"],
  ["a stale phase over an unfinished wake, VM not live", {
    phase: "Pending",
    hint: "n",
    hasRegistry: true,
    main: wakeMain({ restoreMarked: true, live: false }),
  }, "restoring"],
  ["a restore-marked main asked to hibernate is no unfinished wake", {
    phase: "Running",
    hint: "n",
    hasRegistry: true,
    main: wakeMain({ restoreMarked: true, hibernateRequested: true }),
  }, "idle"],
  ["Suspended with the hint, the cache still shows the main", {
    phase: "Suspended",
    hint: "n",
    hasRegistry: true,
    main: wakeMain(),
  }, "confirm-delete"],
  ["Suspending with the hint, the cache still shows the main", {
    phase: "Suspending",
    hint: "n",
    hasRegistry: true,
    main: wakeMain({ live: false }),
  }, "confirm-delete"],
  ["Suspended without the hint: a retain placeholder", {
    phase: "Suspended",
    hint: "",
    hasRegistry: true,
    main: wakeMain(),
  }, "leave"],
  ["Suspended with the hint, a kept failed pod", {
    phase: "Suspended",
    hint: "n",
    hasRegistry: true,
    main: wakeMain({ terminal: true }),
  }, "leave"],
];

Deno.test("decideReleasedWake: each row of the table gives its state, and every state is reachable", () => {
  for (const [name, facts, want] of wakeCases) {
    assert.equal(decideReleasedWake(facts), want, name);
  }
  const reached = new Set(wakeCases.map(([, , state]) => state));
  assert.equal(reached.size, 6, "all six ReleasedWakeState values");
});
