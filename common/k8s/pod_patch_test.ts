import assert from "node:assert/strict";
import type { Pod } from "../../kube/core.ts";
import { Pods } from "../../kube/core.ts";
import { FakeClient } from "../../kube/testing/fake.ts";
import {
  ANNOTATION_COCOON_SET_GENERATION,
  ANNOTATION_HIBERNATE,
  ANNOTATION_KEEP_SNAPSHOT_ON_DELETE,
} from "../meta/keys.ts";
import {
  applyHibernateState,
  readHibernateState,
  readKeepSnapshotOnDelete,
} from "../meta/hibernate.ts";
import {
  patchCocoonSetGeneration,
  patchHibernateState,
  patchKeepSnapshotOnDelete,
} from "./pod_patch.ts";

function newPod(annotations?: Record<string, string>): Pod {
  return {
    apiVersion: "v1",
    kind: "Pod",
    metadata: { name: "demo", namespace: "ns", ...(annotations ? { annotations } : {}) },
    spec: { containers: [{ name: "vm", image: "img" }] },
  };
}

/** A fake API holding pod, plus the local copy a reconciler would work on. */
function setup(pod: Pod): { client: FakeClient; local: Pod } {
  const client = new FakeClient({ objects: [{ rt: Pods, obj: pod }] });
  return { client, local: structuredClone(pod) };
}

const patchCalls = (client: FakeClient) => client.actions.filter((a) => a.verb === "patch");

Deno.test("patchHibernateState makes no API call when already in that state", async () => {
  const pod = newPod();
  applyHibernateState(true, pod);
  const { client, local } = setup(pod);
  await patchHibernateState(client, local, true);
  assert.equal(patchCalls(client).length, 0);
  await patchHibernateState(client, newPod(), false);
  assert.equal(patchCalls(client).length, 0);
});

Deno.test("patchHibernateState sets the annotation", async () => {
  const { client, local } = setup(newPod());
  await patchHibernateState(client, local, true);
  const stored = await client.get(Pods, "ns", "demo");
  assert.equal(stored.metadata.annotations?.[ANNOTATION_HIBERNATE], "true");
  assert.equal(readHibernateState(local), true);
});

Deno.test("patchHibernateState(false) clears the annotation on the server", async () => {
  const pod = newPod({ other: "x" });
  applyHibernateState(true, pod);
  const { client, local } = setup(pod);
  await patchHibernateState(client, local, false);
  const stored = await client.get(Pods, "ns", "demo");
  assert.deepEqual(stored.metadata.annotations, { other: "x" });
});

Deno.test("patchCocoonSetGeneration writes the value and short-circuits when right", async () => {
  const { client, local } = setup(newPod());
  await patchCocoonSetGeneration(client, local, 42);
  const stored = await client.get(Pods, "ns", "demo");
  assert.equal(stored.metadata.annotations?.[ANNOTATION_COCOON_SET_GENERATION], "42");
  assert.equal(patchCalls(client).length, 1);
  await patchCocoonSetGeneration(client, local, 42);
  assert.equal(patchCalls(client).length, 1);
});

Deno.test("patchCocoonSetGeneration is a no-op for a pod already stamped", async () => {
  const { client, local } = setup(newPod({ [ANNOTATION_COCOON_SET_GENERATION]: "7" }));
  await patchCocoonSetGeneration(client, local, 7);
  assert.equal(patchCalls(client).length, 0);
});

Deno.test("patchKeepSnapshotOnDelete persists the mark and then short-circuits", async () => {
  const { client, local } = setup(newPod());
  await patchKeepSnapshotOnDelete(client, local);
  const stored = await client.get(Pods, "ns", "demo");
  assert.equal(stored.metadata.annotations?.[ANNOTATION_KEEP_SNAPSHOT_ON_DELETE], "true");
  assert.equal(readKeepSnapshotOnDelete(stored), true);
  await patchKeepSnapshotOnDelete(client, stored);
  assert.equal(patchCalls(client).length, 1);
});

Deno.test("patch helpers surface API errors (NotFound)", async () => {
  const client = new FakeClient();
  await assert.rejects(patchHibernateState(client, newPod(), true), (err: unknown) => {
    assert.equal((err as { reason?: string }).reason, "NotFound");
    return true;
  });
});
