import assert from "node:assert/strict";
import {
  type EventRecorder,
  type EventSubject,
  type EventType,
  isConflict,
  isNotFound,
  Pods,
} from "../../kube/mod.ts";
import { FakeClient } from "../../kube/testing/mod.ts";
import {
  DEMO_FINALIZER,
  demoPodName,
  DemoReconciler,
  DemoSets,
  RECONCILED_BY_LABEL,
  REPLICAS_LABEL,
} from "./demo_controller.ts";

/** Keeps every Event as "type reason". */
class ListRecorder implements EventRecorder {
  readonly events: string[] = [];
  event(_s: EventSubject, type: EventType, reason: string): void {
    this.events.push(`${type} ${reason}`);
  }
  eventf(_s: EventSubject, type: EventType, reason: string): void {
    this.events.push(`${type} ${reason}`);
  }
}

const REQ = { namespace: "ns", name: "a" };
const signal = new AbortController().signal;

function setup() {
  const fake = new FakeClient();
  const recorder = new ListRecorder();
  const r = new DemoReconciler(fake, recorder, "me");
  return { fake, recorder, r };
}

async function createSet(fake: FakeClient) {
  return await fake.create(DemoSets, {
    metadata: { name: "a", namespace: "ns" },
    spec: { agent: { image: "img", replicas: 2 } },
  });
}

function writes(fake: FakeClient, from: number) {
  return fake.actions.slice(from).filter((a) => a.verb !== "get" && a.verb !== "list");
}

Deno.test("demo reconciler: finalizer under an optimistic lock, then the controlled pod and status", async () => {
  const { fake, recorder, r } = setup();
  const created = await createSet(fake);

  let mark = fake.actions.length;
  assert.deepEqual(await r.reconcile(REQ, signal), { requeue: true });
  const [finalizerPatch, ...rest] = writes(fake, mark);
  assert.deepEqual(rest, []);
  assert.deepEqual(finalizerPatch.patch, {
    metadata: { finalizers: [DEMO_FINALIZER], resourceVersion: created.metadata.resourceVersion },
  });

  mark = fake.actions.length;
  assert.deepEqual(await r.reconcile(REQ, signal), {});
  assert.deepEqual(writes(fake, mark).map((a) => `${a.verb} ${a.resource.plural}`), [
    "create pods",
    "patch cocoonsets",
  ]);
  const pod = await fake.get(Pods, "ns", demoPodName("a"));
  assert.deepEqual(pod.metadata.ownerReferences, [{
    apiVersion: "cocoonset.cocoonstack.io/v1",
    kind: "CocoonSet",
    name: "a",
    uid: created.metadata.uid,
    controller: true,
    blockOwnerDeletion: true,
  }]);
  assert.equal(pod.metadata.labels?.[REPLICAS_LABEL], "2");
  assert.equal(pod.metadata.labels?.[RECONCILED_BY_LABEL], "me");
  const set = await fake.get(DemoSets, "ns", "a");
  assert.deepEqual(set.status, { phase: "Running", observedGeneration: set.metadata.generation });
  assert.deepEqual(recorder.events, ["Normal PodCreated"]);

  // Nothing to change: every merge-from patch is a no-op and sends nothing.
  mark = fake.actions.length;
  assert.deepEqual(await r.reconcile(REQ, signal), {});
  assert.deepEqual(writes(fake, mark), []);
  assert.ok(fake.actions.length > mark, "the pass did read");
});

Deno.test("demo reconciler: a finalizer added concurrently is not lost (Conflict, then retry)", async () => {
  const { fake, r } = setup();
  await createSet(fake);
  // Another controller adds its finalizer between our read and our patch.
  let raced = false;
  fake.addReactor(async (a) => {
    if (a.verb === "patch" && a.resource === DemoSets && !raced) {
      raced = true;
      await fake.patch(DemoSets, "ns", "a", "merge", {
        metadata: { finalizers: ["other.example.com/f"] },
      });
    }
    return undefined;
  });
  await assert.rejects(r.reconcile(REQ, signal), isConflict);
  assert.deepEqual((await fake.get(DemoSets, "ns", "a")).metadata.finalizers, [
    "other.example.com/f",
  ]);
  // The retry reads the new state and keeps both.
  assert.deepEqual(await r.reconcile(REQ, signal), { requeue: true });
  assert.deepEqual((await fake.get(DemoSets, "ns", "a")).metadata.finalizers, [
    "other.example.com/f",
    DEMO_FINALIZER,
  ]);
});

Deno.test("demo reconciler: deletion removes the pod before the finalizer", async () => {
  const { fake, r } = setup();
  await createSet(fake);
  await r.reconcile(REQ, signal);
  await r.reconcile(REQ, signal);
  await fake.delete(DemoSets, "ns", "a");
  const mark = fake.actions.length;
  assert.deepEqual(await r.reconcile(REQ, signal), {});
  assert.deepEqual(writes(fake, mark).map((a) => `${a.verb} ${a.resource.plural}`), [
    "delete pods",
    "patch cocoonsets",
  ]);
  await assert.rejects(fake.get(DemoSets, "ns", "a"), isNotFound);
  await assert.rejects(fake.get(Pods, "ns", demoPodName("a")), isNotFound);
  // Gone: a late event for the key is a quiet no-op.
  assert.deepEqual(await r.reconcile(REQ, signal), {});
});

Deno.test("demo reconciler: a same-named pod it does not control is left alone", async () => {
  const { fake, recorder, r } = setup();
  await createSet(fake);
  await fake.create(Pods, {
    metadata: { name: demoPodName("a"), namespace: "ns", labels: { [REPLICAS_LABEL]: "x" } },
    spec: { containers: [{ name: "c" }] },
  });
  await r.reconcile(REQ, signal);
  const mark = fake.actions.length;
  await assert.rejects(r.reconcile(REQ, signal), /not controlled by CocoonSet ns\/a/);
  assert.deepEqual(writes(fake, mark), []);
  const pod = await fake.get(Pods, "ns", demoPodName("a"));
  assert.equal(pod.metadata.labels?.[REPLICAS_LABEL], "x");
  assert.deepEqual(recorder.events, ["Warning PodNotOwned"]);
});
