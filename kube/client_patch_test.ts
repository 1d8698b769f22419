import assert from "node:assert/strict";
import { type Pod, Pods } from "./core.ts";
import { FakeClient } from "./testing/fake.ts";
import { resourceType } from "./resource.ts";
import type { KubeObject } from "./object.ts";
import { isConflict } from "./errors.ts";
import {
  mergePatchBetween,
  patchAnnotations,
  patchObject,
  patchStatus,
  updateStatusLocked,
} from "./client_patch.ts";

interface Widget extends KubeObject {
  spec?: { size?: number };
  status?: { phase?: string; ready?: number };
}

const Widgets = resourceType<Widget>({
  group: "example.cocoonstack.io",
  version: "v1",
  kind: "Widget",
  plural: "widgets",
  namespaced: true,
  statusSubresource: true,
});

function widget(): Widget {
  return { metadata: { name: "w", namespace: "ns", uid: "uid-w" }, spec: { size: 1 } };
}

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
  const w: Widget = { metadata: { name: "demo", namespace: "ns" }, spec: { size: 1 } };
  const client = new FakeClient({ objects: [{ rt: Widgets, obj: w }] });
  const local = await client.get(Widgets, "ns", "demo");
  await patchStatus(client, Widgets, local, (c) => {
    c.status = { phase: "Running", ready: 0 };
  });
  const call = patchCalls(client)[0];
  assert.equal(call.subresource, "status");
  assert.equal(call.patchType, "merge");
  assert.deepEqual(call.patch, { status: { phase: "Running", ready: 0 } });
  const stored = await client.get(Widgets, "ns", "demo");
  assert.deepEqual(stored.status, { phase: "Running", ready: 0 });
  assert.equal(local.status?.phase, "Running");
});

Deno.test("patchAnnotations sets values and deletes keys given as empty strings", async () => {
  const { client, local } = setup(newPod({ a: "1", b: "2" }));
  await patchAnnotations(client, Pods, local, { a: "", c: "3" });
  const stored = await client.get(Pods, "ns", "demo");
  assert.deepEqual(stored.metadata.annotations, { b: "2", c: "3" });
  assert.deepEqual(local.metadata.annotations, { b: "2", c: "3" });
});

Deno.test("patchObject makes no request when the mutation changes nothing", async () => {
  const { client, local } = setup(newPod({ a: "1" }));
  await patchObject(client, Pods, local, (p) => {
    p.metadata.annotations!.a = "1";
  });
  assert.equal(patchCalls(client).length, 0);
});

Deno.test("patchObject with optimisticLock sends the resourceVersion and fails on a stale copy", async () => {
  const { client } = setup(newPod());
  const stale = await client.get(Pods, "ns", "demo");
  const fresh = await client.get(Pods, "ns", "demo");
  await patchObject(client, Pods, fresh, (p) => {
    p.metadata.labels = { first: "yes" };
  }, { optimisticLock: true });
  const sent = patchCalls(client)[0].patch as { metadata: { resourceVersion?: string } };
  assert.equal(sent.metadata.resourceVersion, stale.metadata.resourceVersion);
  await assert.rejects(
    patchObject(client, Pods, stale, (p) => {
      p.metadata.labels = { second: "yes" };
    }, { optimisticLock: true }),
    (err: unknown) => (err as { reason?: string }).reason === "Conflict",
  );
  const stored = await client.get(Pods, "ns", "demo");
  assert.deepEqual(stored.metadata.labels, { first: "yes" });
});

Deno.test("mergePatchBetween is undefined for equal objects and keeps explicit zeros", () => {
  const a: Widget = { metadata: { name: "w" }, status: { phase: "Running" } };
  assert.equal(mergePatchBetween(a, structuredClone(a)), undefined);
  const b: Widget = { ...a, status: { phase: "Running", ready: 0 } };
  assert.deepEqual(mergePatchBetween(a, b), { status: { ready: 0 } });
});

Deno.test("patchObject removes keys named like Object.prototype members", async () => {
  // "constructor" and "toString" are valid label keys; every object inherits a member of that
  // name, so only an own-property check tells that the key was removed.
  const { client, local } = setup(newPod());
  local.metadata.labels = { constructor: "a", toString: "b", keep: "c" };
  await client.update(Pods, local).then((p) => Object.assign(local, p));
  await patchObject(client, Pods, local, (p) => {
    p.metadata.labels = { keep: "c" };
  });
  assert.deepEqual(patchCalls(client).at(-1)?.patch, {
    metadata: { labels: { constructor: null, toString: null } },
  });
  assert.deepEqual((await client.get(Pods, "ns", "demo")).metadata.labels, { keep: "c" });
});

Deno.test("updateStatusLocked writes under the lock, remembers the write, and skips an equal status", async () => {
  const client = new FakeClient({ objects: [{ rt: Widgets, obj: widget() }] });
  const local = await client.get(Widgets, "ns", "w");
  const written = new Map<string, Widget["status"]>();
  const update = (obj: Widget, phase: string) =>
    updateStatusLocked({
      client,
      rt: Widgets,
      obj,
      status: { phase },
      equal: (a, b) => a?.phase === b?.phase,
      written,
      signal: undefined,
    });

  const rv = local.metadata.resourceVersion;
  assert.equal(await update(local, "Scaling"), true);
  const sent = patchCalls(client);
  assert.equal(sent.length, 1);
  assert.deepEqual(sent[0].patch, {
    metadata: { resourceVersion: rv },
    status: { phase: "Scaling" },
  });
  assert.deepEqual(written.get("uid-w"), { phase: "Scaling" });
  assert.equal(await update(local, "Scaling"), false, "equal to the copy: no request");
  assert.equal(patchCalls(client).length, 1);
});

Deno.test("updateStatusLocked asks the server when a copy equal to the status lags this process's own write", async () => {
  const client = new FakeClient({ objects: [{ rt: Widgets, obj: widget() }] });
  const behind = await client.get(Widgets, "ns", "w");
  const written = new Map<string, Widget["status"]>();
  const update = (obj: Widget, phase: string) =>
    updateStatusLocked({
      client,
      rt: Widgets,
      obj,
      status: { phase },
      equal: (a, b) => a?.phase === b?.phase,
      written,
      signal: undefined,
    });
  await update(await client.get(Widgets, "ns", "w"), "Scaling");
  client.actions.length = 0;

  // A cache still showing the copy from before that write: equal to what is computed now.
  behind.status = { phase: "Running" };
  const err = await update(behind, "Running").then(() => undefined, (e: unknown) => e);

  assert.ok(isConflict(err), `the lagging copy is refused with Conflict, got ${err}`);
  assert.deepEqual(patchCalls(client).map((a) => [a.subresource, a.patch]), [
    ["status", { metadata: { resourceVersion: behind.metadata.resourceVersion } }],
  ]);
  assert.equal((await client.get(Widgets, "ns", "w")).status?.phase, "Scaling", "nothing written");

  // A current copy passes the same check and is then trusted: no request the next time.
  const current = await client.get(Widgets, "ns", "w");
  current.status = { phase: "Running" };
  client.actions.length = 0;
  assert.equal(await update(current, "Running"), false);
  assert.equal(patchCalls(client).length, 1, "one empty locked patch");
  assert.equal(await update(current, "Running"), false);
  assert.equal(patchCalls(client).length, 1, "then none");
});
