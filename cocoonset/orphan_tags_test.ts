/**
 * Orphaned `:hibernate` tags on the fake API (orphan_tags.ts, with the request's finalizer and the
 * set's unsuspend that leave them): a tag whose request is gone goes once the set sees its VM
 * back under a new id, never before, and never when the set's own suspend took it over.
 */
import assert from "node:assert/strict";
import { type Pod, Pods } from "../kube/mod.ts";
import type { CocoonSet } from "../common/apis/v1/cocoonset_types.ts";
import { CocoonHibernations, CocoonSets } from "../common/apis/v1/resources.ts";
import {
  ANNOTATION_HIBERNATED_ON_NODE,
  ANNOTATION_ORPHAN_HIBERNATE_TAG,
  applyHibernateState,
  applyVMRuntime,
  markRestoreFromHibernate,
  readHibernateState,
  readOrphanTagMark,
  recordHibernateAsk,
} from "../common/meta/mod.ts";
import { HibernationReconciler } from "../hibernation/reconciler.ts";
import { HIBERNATE_SNAPSHOT_TAG } from "../snapshot/registry.ts";
import {
  actionsOf,
  editPod,
  getPod,
  getSet,
  hibernationLists,
  laggingCache,
  newHibernation,
  newTestEnv,
  reconcilerWith,
  reconcileSet,
  seedSet,
  TEST_NAMESPACE,
  type TestEnv,
  withFinalizer,
} from "./_test_support.ts";
import { mainPod, mainVMName, SEAT_SET_NAME, seatSet } from "./_seats_test_support.ts";
import { REASON_ORPHAN_HIBERNATE_WITHDRAWN } from "./seat_release.ts";

const POD = `${SEAT_SET_NAME}-0`;

function runningSet(...mods: ((cs: CocoonSet) => void)[]): CocoonSet {
  return seatSet(withFinalizer, (cs) => {
    cs.status = { phase: "Running" } as CocoonSet["status"];
  }, ...mods);
}

/** The main as vk-cocoon leaves it hibernated: asked (when vmID was asked), bound, no VM id. */
function hibernatedMain(cs: CocoonSet, askedVMID = "vm-1"): Pod {
  const pod = mainPod(cs, { node: "node-a", vmID: askedVMID });
  applyHibernateState(true, pod);
  recordHibernateAsk(pod);
  delete pod.metadata.annotations![`vm.cocoonstack.io/id`];
  return pod;
}

/** vk-cocoon brought the VM back: a new id and a running container. */
function vmBack(env: TestEnv, vmID: string): Promise<Pod> {
  return editPod(env, POD, (pod) => {
    applyVMRuntime({ vmID, ip: "10.0.0.2", vncPort: 0 }, pod);
    pod.status = {
      phase: "Running",
      conditions: [{ type: "Ready", status: "True" }],
      containerStatuses: [{
        name: "agent",
        ready: true,
        restartCount: 0,
        image: "x",
        imageID: "x",
        state: { running: {} },
      }],
    };
  });
}

/** vk-cocoon hibernated the VM again: id gone, nothing running. */
function vmDown(env: TestEnv): Promise<Pod> {
  return editPod(env, POD, (pod) => {
    delete pod.metadata.annotations!["vm.cocoonstack.io/id"];
    pod.status = { phase: "Pending" };
  });
}

function marked(pod: Pod | undefined, vmID = ""): Pod {
  pod!.metadata.annotations = {
    ...pod!.metadata.annotations,
    [ANNOTATION_ORPHAN_HIBERNATE_TAG]: vmID,
  };
  return pod!;
}

function tagThere(env: TestEnv): boolean {
  return env.registry.contains(mainVMName, HIBERNATE_SNAPSHOT_TAG);
}

function hibernations(env: TestEnv): HibernationReconciler {
  return new HibernationReconciler({
    client: env.fake,
    apiReader: env.fake,
    registry: env.registry,
    recorder: env.recorder,
    clock: env.clock,
  });
}

Deno.test("a deleted Hibernated request: the set brings the VM back and its tag goes once the VM is live, not before", async () => {
  const env = newTestEnv();
  const cs = seedSet(env, runningSet(), [hibernatedMain(runningSet())]);
  env.registry.put(mainVMName, HIBERNATE_SNAPSHOT_TAG);
  const hib = newHibernation(POD, "Hibernate");
  hib.metadata.finalizers = ["cocoonhibernation.cocoonset.cocoonstack.io/finalizer"];
  hib.status = { phase: "Hibernated", vmName: mainVMName };
  env.fake.seed(CocoonHibernations, hib);
  await env.fake.delete(CocoonHibernations, TEST_NAMESPACE, hib.metadata.name!);

  // The finalizer keeps the tag (the VM is only there) and lets the request go.
  await hibernations(env).reconcile(
    { namespace: TEST_NAMESPACE, name: hib.metadata.name! },
    new AbortController().signal,
  );
  assert.equal((await env.fake.list(CocoonHibernations, {})).items.length, 0);
  assert.equal(tagThere(env), true);
  assert.equal(readOrphanTagMark((await getPod(env.fake, POD))!), "");

  // The set withdraws the hibernate request nobody owns: vk-cocoon restores from the tag.
  await reconcileSet(env, cs.metadata.name!);
  const withdrawn = (await getPod(env.fake, POD))!;
  assert.equal(readHibernateState(withdrawn), false);
  assert.equal(tagThere(env), true, "the VM is not back yet");
  await reconcileSet(env, cs.metadata.name!);
  assert.equal(tagThere(env), true, "still not back");

  await vmBack(env, "vm-2");
  await reconcileSet(env, cs.metadata.name!);
  assert.equal(tagThere(env), false, "the restored VM runs: the old snapshot goes");
  assert.equal(readOrphanTagMark((await getPod(env.fake, POD))!), undefined);
  assert.deepEqual(env.registry.callsOf("deleteManifest", mainVMName).length, 1);
});

Deno.test("an orphaned tag stays while the VM runs under the id recorded with the mark", async () => {
  // The request was deleted between vk-cocoon's push and its removal: the VM still showed its id.
  const env = newTestEnv();
  const cs = runningSet();
  const pod = marked(mainPod(cs, { node: "node-a", vmID: "vm-1", running: true }), "vm-1");
  seedSet(env, cs, [pod]);
  env.registry.put(mainVMName, HIBERNATE_SNAPSHOT_TAG);
  await reconcileSet(env, SEAT_SET_NAME);
  assert.equal(tagThere(env), true, "vm-1 may be the VM about to be restored from it");
  assert.equal(readOrphanTagMark((await getPod(env.fake, POD))!), "vm-1");

  await vmDown(env);
  await reconcileSet(env, SEAT_SET_NAME);
  assert.equal(tagThere(env), true);
  await vmBack(env, "vm-2");
  await reconcileSet(env, SEAT_SET_NAME);
  assert.equal(tagThere(env), false);
});

Deno.test("an orphan hibernate request on a restored main: withdrawn after the wake, its tag goes once the VM is back", async () => {
  // The released-seat wake finished while its restored VM carried a hibernate request nobody
  // owns; vk-cocoon pushed a new tag from that VM. The wake keeps it (it may be the only copy).
  const env = newTestEnv();
  const cs = seatSet(withFinalizer, (c) => {
    c.spec.hibernatePolicy = "release";
    c.metadata.annotations = { [ANNOTATION_HIBERNATED_ON_NODE]: "node-a" };
    c.status = { phase: "Waking" } as CocoonSet["status"];
  });
  const main = mainPod(cs, { node: "node-a", vmID: "vm-2", running: true });
  markRestoreFromHibernate(main);
  applyHibernateState(true, main);
  recordHibernateAsk(main);
  seedSet(env, cs, [main]);
  env.registry.put(mainVMName, HIBERNATE_SNAPSHOT_TAG);

  await reconcileSet(env, SEAT_SET_NAME);
  assert.equal(tagThere(env), true, "the wake keeps a tag its VM may just have pushed");
  assert.equal(
    (await getSet(env.fake, SEAT_SET_NAME)).metadata.annotations?.[ANNOTATION_HIBERNATED_ON_NODE] ??
      "",
    "",
  );

  // vk-cocoon removes the VM; the set withdraws the request nobody owns and marks the tag.
  await vmDown(env);
  for (let i = 0; i < 3; i++) await reconcileSet(env, SEAT_SET_NAME);
  const pod = (await getPod(env.fake, POD))!;
  assert.equal(readHibernateState(pod), false);
  assert.equal(readOrphanTagMark(pod), "");
  assert.equal(tagThere(env), true, "vk-cocoon restores from it");

  await vmBack(env, "vm-3");
  await reconcileSet(env, SEAT_SET_NAME);
  assert.equal(tagThere(env), false);
});

Deno.test("a released-seat wake that withdraws an orphan request marks its tag, which goes with the wake", async () => {
  const env = newTestEnv();
  const cs = seatSet(withFinalizer, (c) => {
    c.spec.hibernatePolicy = "release";
    c.metadata.annotations = { [ANNOTATION_HIBERNATED_ON_NODE]: "node-a" };
    c.status = { phase: "Waking" } as CocoonSet["status"];
  });
  const main = mainPod(cs, { node: "node-a" });
  markRestoreFromHibernate(main);
  applyHibernateState(true, main);
  seedSet(env, cs, [main]);
  env.registry.put(mainVMName, HIBERNATE_SNAPSHOT_TAG);

  await reconcileSet(env, SEAT_SET_NAME);
  const pod = (await getPod(env.fake, POD))!;
  assert.equal(readHibernateState(pod), false);
  assert.equal(readOrphanTagMark(pod), "");
  assert.equal(env.recorder.withReason(REASON_ORPHAN_HIBERNATE_WITHDRAWN).length, 1);
  assert.equal(tagThere(env), true, "the restore reads it");

  await vmBack(env, "vm-2");
  for (let i = 0; i < 3; i++) await reconcileSet(env, SEAT_SET_NAME);
  assert.equal(tagThere(env), false);
  assert.equal(readOrphanTagMark((await getPod(env.fake, POD))!), undefined);
});

Deno.test("a suspend starting while the drop is pending takes the tag over; its resume keeps it", async () => {
  const env = newTestEnv();
  const cs = runningSet();
  seedSet(env, cs, [marked(hibernatedMain(cs))]);
  env.registry.put(mainVMName, HIBERNATE_SNAPSHOT_TAG);
  await env.fake.patch(CocoonSets, TEST_NAMESPACE, SEAT_SET_NAME, "merge", {
    spec: { suspend: true },
  });

  await reconcileSet(env, SEAT_SET_NAME);
  assert.equal(readOrphanTagMark((await getPod(env.fake, POD))!), undefined, "the suspend owns it");
  assert.equal((await getSet(env.fake, SEAT_SET_NAME)).status?.phase, "Suspended");

  await env.fake.patch(CocoonSets, TEST_NAMESPACE, SEAT_SET_NAME, "merge", {
    spec: { suspend: false },
  });
  await reconcileSet(env, SEAT_SET_NAME);
  const resumed = (await getPod(env.fake, POD))!;
  assert.equal(readHibernateState(resumed), false);
  assert.equal(readOrphanTagMark(resumed), undefined, "a resume marks nothing");
  await vmBack(env, "vm-2");
  for (let i = 0; i < 3; i++) await reconcileSet(env, SEAT_SET_NAME);
  assert.equal(tagThere(env), true, "the set's resume keeps its tags, as the Go operator's does");
  assert.equal(env.registry.callsOf("deleteManifest").length, 0);
});

Deno.test("a new request created while the drop is pending holds the tag; once it goes unstarted, the tag goes", async () => {
  const env = newTestEnv();
  const cs = runningSet();
  seedSet(env, cs, [marked(mainPod(cs, { node: "node-a", vmID: "vm-2", running: true }))]);
  env.registry.put(mainVMName, HIBERNATE_SNAPSHOT_TAG);
  const hib = env.fake.seed(CocoonHibernations, newHibernation(POD, "Hibernate"));

  await reconcileSet(env, SEAT_SET_NAME);
  assert.equal(tagThere(env), true, "the new request claims it");
  assert.equal(readOrphanTagMark((await getPod(env.fake, POD))!), "", "the mark waits");

  await env.fake.delete(CocoonHibernations, TEST_NAMESPACE, hib.metadata.name!);
  await reconcileSet(env, SEAT_SET_NAME);
  assert.equal(tagThere(env), false);
  assert.equal(readOrphanTagMark((await getPod(env.fake, POD))!), undefined);
});

Deno.test("a request waking the VM holds the tag: the set leaves tag and mark to it without reading past the cache", async () => {
  const env = newTestEnv();
  const cs = runningSet();
  seedSet(env, cs, [marked(mainPod(cs, { node: "node-a", vmID: "vm-2", running: true }))]);
  env.registry.put(mainVMName, HIBERNATE_SNAPSHOT_TAG);
  env.fake.seed(CocoonHibernations, newHibernation(POD, "Wake", "Waking"));
  const listsBefore = hibernationLists(env);
  const podReadsBefore = actionsOf(env, "get", Pods, POD).length;

  await reconcileSet(env, SEAT_SET_NAME);
  assert.equal(tagThere(env), true);
  assert.equal(readOrphanTagMark((await getPod(env.fake, POD))!), "", "the mark waits");
  assert.equal(hibernationLists(env) - listsBefore, 0, "no list of the namespace's requests");
  // getPod above is the test's own read.
  assert.equal(actionsOf(env, "get", Pods, POD).length - podReadsBefore, 1, "no read of the pod");
});

Deno.test("a new request's hibernate ask takes the mark off: its round's tag is its own", async () => {
  const env = newTestEnv();
  const cs = runningSet();
  seedSet(env, cs, [marked(mainPod(cs, { node: "node-a", vmID: "vm-2", running: true }))]);
  env.registry.put(mainVMName, HIBERNATE_SNAPSHOT_TAG);
  const hib = newHibernation(POD, "Hibernate");
  hib.metadata.finalizers = ["cocoonhibernation.cocoonset.cocoonstack.io/finalizer"];
  env.fake.seed(CocoonHibernations, hib);

  await hibernations(env).reconcile(
    { namespace: TEST_NAMESPACE, name: hib.metadata.name! },
    new AbortController().signal,
  );
  const pod = (await getPod(env.fake, POD))!;
  assert.equal(readHibernateState(pod), true);
  assert.equal(readOrphanTagMark(pod), undefined);
  await reconcileSet(env, SEAT_SET_NAME);
  assert.equal(tagThere(env), true);
});

Deno.test("a lagging cache showing the VM back cannot drop the tag once the stored pod asks to hibernate again", async () => {
  const env = newTestEnv();
  const cs = runningSet();
  const shown = marked(mainPod(cs, { node: "node-a", vmID: "vm-2", running: true }));
  // Stored: someone outside this operator asked vm-2 to hibernate again; vk-cocoon pushed.
  const stored = structuredClone(shown);
  applyHibernateState(true, stored);
  seedSet(env, cs, [stored]);
  env.registry.put(mainVMName, HIBERNATE_SNAPSHOT_TAG);
  const lagging = reconcilerWith(env, laggingCache(env.fake, { pods: [shown] }));

  await lagging.reconcile(
    { namespace: TEST_NAMESPACE, name: SEAT_SET_NAME },
    new AbortController().signal,
  );
  assert.equal(tagThere(env), true);
  assert.equal(env.registry.callsOf("deleteManifest").length, 0);
});

Deno.test("killed between the drop and the mark's removal, the next pass finishes the job", async () => {
  const env = newTestEnv();
  const cs = runningSet();
  seedSet(env, cs, [marked(mainPod(cs, { node: "node-a", vmID: "vm-2", running: true }))]);
  env.registry.put(mainVMName, HIBERNATE_SNAPSHOT_TAG);
  const undo = env.fake.addReactor((a) =>
    a.verb === "patch" && a.name === POD ? new Error("operator killed") : undefined
  );
  await assert.rejects(reconcileSet(env, SEAT_SET_NAME), /operator killed/);
  undo();
  assert.equal(tagThere(env), false, "the drop landed");
  assert.equal(readOrphanTagMark((await getPod(env.fake, POD))!), "", "the mark did not");

  await reconcileSet(env, SEAT_SET_NAME);
  assert.equal(readOrphanTagMark((await getPod(env.fake, POD))!), undefined);
  assert.equal(tagThere(env), false);
});

Deno.test("a registry failure on the drop keeps the mark; the retried pass drops the tag", async () => {
  const env = newTestEnv();
  const cs = runningSet();
  seedSet(env, cs, [marked(mainPod(cs, { node: "node-a", vmID: "vm-2", running: true }))]);
  env.registry.put(mainVMName, HIBERNATE_SNAPSHOT_TAG);
  env.registry.failNext("deleteManifest", new Error("registry unavailable"));
  await assert.rejects(reconcileSet(env, SEAT_SET_NAME), /registry unavailable/);
  assert.equal(readOrphanTagMark((await getPod(env.fake, POD))!), "");
  assert.equal(tagThere(env), true);

  await reconcileSet(env, SEAT_SET_NAME);
  assert.equal(tagThere(env), false);
  assert.equal(readOrphanTagMark((await getPod(env.fake, POD))!), undefined);
});

Deno.test("a mark left while the Go operator ran is settled on the first pass that sees the VM back", async () => {
  // The port marked the tag and was rolled back; Go's unsuspend brought the VM back and dropped
  // nothing. The port, back, finds the mark and the VM live under a new id.
  const env = newTestEnv();
  const cs = runningSet();
  seedSet(env, cs, [marked(mainPod(cs, { node: "node-a", vmID: "vm-7", running: true }))]);
  env.registry.put(mainVMName, HIBERNATE_SNAPSHOT_TAG);
  await reconcileSet(env, SEAT_SET_NAME);
  assert.equal(tagThere(env), false);
});
