import assert from "node:assert/strict";
import type { Pod } from "../../kube/core.ts";
import { Pods } from "../../kube/core.ts";
import { FakeClient } from "../../kube/testing/fake.ts";
import type { CocoonSet } from "../apis/v1/cocoonset_types.ts";
import { CocoonSets } from "../apis/v1/resources.ts";
import {
  AnnotationCocoonSetGeneration,
  AnnotationHibernate,
  AnnotationKeepSnapshotOnDelete,
} from "../meta/keys.ts";
import {
  applyHibernateState,
  readHibernateState,
  readKeepSnapshotOnDelete,
} from "../meta/hibernate.ts";
import {
  patchAnnotations,
  patchCocoonSetGeneration,
  patchHibernateState,
  patchKeepSnapshotOnDelete,
  patchObject,
  patchStatus,
} from "./client_patch.ts";
import { newReadyCondition, setStatusCondition } from "./condition.ts";

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

Deno.test("patchObject sends the delta and refreshes the object in place", async () => {
  const { client, local } = setup(newPod());
  const returned = await patchObject(client, Pods, local, (p) => {
    p.metadata.labels = { ...p.metadata.labels, x: "y" };
  });
  const stored = await client.get(Pods, "ns", "demo");
  assert.equal(stored.metadata.labels?.x, "y");
  assert.equal(returned, local);
  assert.equal(local.metadata.resourceVersion, stored.metadata.resourceVersion);
});

Deno.test("patchObject sends only what changed, with null for removed keys", async () => {
  const sent: unknown[] = [];
  const writer = {
    patch: (_rt: unknown, _ns: string, _name: string, type: string, body: unknown) => {
      sent.push({ type, body });
      return Promise.resolve(newPod());
    },
  } as unknown as Parameters<typeof patchObject>[0];
  const pod = newPod({ keep: "1", drop: "2" });
  await patchObject(writer, Pods, pod, (p) => {
    delete p.metadata.annotations!.drop;
    p.metadata.annotations!.add = "3";
  });
  assert.deepEqual(sent, [{
    type: "merge",
    body: { metadata: { annotations: { drop: null, add: "3" } } },
  }]);
});

Deno.test("patchStatus writes through the status subresource", async () => {
  const cs: CocoonSet = {
    apiVersion: "cocoonset.cocoonstack.io/v1",
    kind: "CocoonSet",
    metadata: { name: "demo", namespace: "ns" },
    spec: { agent: { image: "img" } },
  };
  const client = new FakeClient({ objects: [{ rt: CocoonSets, obj: cs }] });
  const local = await client.get(CocoonSets, "ns", "demo");
  await patchStatus(client, CocoonSets, local, (c) => {
    c.status = { phase: "Running", readyAgents: 1, desiredAgents: 1, conditions: [] };
    setStatusCondition(c.status.conditions!, newReadyCondition(1, "True", "AllAgentsReady", "1/1"));
  });
  const call = patchCalls(client)[0];
  assert.equal(call.subresource, "status");
  const stored = await client.get(CocoonSets, "ns", "demo");
  assert.equal(stored.status?.phase, "Running");
  assert.equal(stored.status?.conditions?.[0].reason, "AllAgentsReady");
  assert.equal(local.status?.phase, "Running");
});

Deno.test("patchAnnotations sets values and deletes keys given as empty strings", async () => {
  const { client, local } = setup(newPod({ a: "1", b: "2" }));
  await patchAnnotations(client, Pods, local, { a: "", c: "3" });
  const stored = await client.get(Pods, "ns", "demo");
  assert.deepEqual(stored.metadata.annotations, { b: "2", c: "3" });
  assert.deepEqual(local.metadata.annotations, { b: "2", c: "3" });
});

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
  assert.equal(stored.metadata.annotations?.[AnnotationHibernate], "true");
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
  assert.equal(stored.metadata.annotations?.[AnnotationCocoonSetGeneration], "42");
  assert.equal(patchCalls(client).length, 1);
  await patchCocoonSetGeneration(client, local, 42);
  assert.equal(patchCalls(client).length, 1);
});

Deno.test("patchCocoonSetGeneration is a no-op for a pod already stamped", async () => {
  const { client, local } = setup(newPod({ [AnnotationCocoonSetGeneration]: "7" }));
  await patchCocoonSetGeneration(client, local, 7);
  assert.equal(patchCalls(client).length, 0);
});

Deno.test("patchKeepSnapshotOnDelete persists the mark and then short-circuits", async () => {
  const { client, local } = setup(newPod());
  await patchKeepSnapshotOnDelete(client, local);
  const stored = await client.get(Pods, "ns", "demo");
  assert.equal(stored.metadata.annotations?.[AnnotationKeepSnapshotOnDelete], "true");
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
