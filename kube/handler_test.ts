import assert from "node:assert/strict";
import type { KubeObject, OwnerReference } from "./object.ts";
import { enqueueForObject, enqueueForOwner, enqueueFromMap } from "./handler.ts";

function pod(name: string, owners: OwnerReference[] = [], namespace = "ns"): KubeObject {
  return {
    apiVersion: "v1",
    kind: "Pod",
    metadata: { name, namespace, ownerReferences: owners },
  };
}

function ref(
  kind: string,
  apiVersion: string,
  name: string,
  controller?: boolean,
): OwnerReference {
  return { apiVersion, kind, name, uid: `uid-${name}`, controller };
}

const COCOON_SET = { kind: "CocoonSet", group: "cocoonset.cocoonstack.io", namespaced: true };

Deno.test("enqueueForObject maps every event to the object's own key", () => {
  const h = enqueueForObject();
  const p = pod("a");
  assert.deepEqual(h.create(p, false), [{ namespace: "ns", name: "a" }]);
  assert.deepEqual(h.update(p, p), [{ namespace: "ns", name: "a" }]);
  assert.deepEqual(h.delete(p), [{ namespace: "ns", name: "a" }]);
  assert.deepEqual(h.generic(pod("c", [], "")), [{ namespace: "", name: "c" }]);
});

Deno.test("enqueueForOwner follows only controller references of the owner kind and group", () => {
  const h = enqueueForOwner(COCOON_SET);
  const owned = pod("p", [
    ref("CocoonSet", "cocoonset.cocoonstack.io/v1", "not-controller"),
    ref("CocoonSet", "cocoonset.cocoonstack.io/v1alpha1", "demo", true),
  ]);
  assert.deepEqual(h.create(owned, false), [{ namespace: "ns", name: "demo" }]);

  const wrongGroup = pod("p", [ref("CocoonSet", "other.io/v1", "demo", true)]);
  assert.deepEqual(h.create(wrongGroup, false), []);
  const wrongKind = pod("p", [ref("ReplicaSet", "cocoonset.cocoonstack.io/v1", "demo", true)]);
  assert.deepEqual(h.create(wrongKind, false), []);
  const noController = pod("p", [ref("CocoonSet", "cocoonset.cocoonstack.io/v1", "demo")]);
  assert.deepEqual(h.delete(noController), []);

  // Core-group owners match an apiVersion without a group.
  const byNode = enqueueForOwner("Node", "");
  assert.deepEqual(byNode.create(pod("p", [ref("Node", "v1", "n1", true)]), false), [
    { namespace: "ns", name: "n1" },
  ]);
});

Deno.test("enqueueForOwner can match every owner and handles cluster-scoped owners", () => {
  const all = enqueueForOwner(COCOON_SET, { onlyController: false });
  const owned = pod("p", [
    ref("CocoonSet", "cocoonset.cocoonstack.io/v1", "a"),
    ref("CocoonSet", "cocoonset.cocoonstack.io/v1", "b", true),
    ref("CocoonSet", "cocoonset.cocoonstack.io/v1", "b"),
  ]);
  assert.deepEqual(all.create(owned, false), [
    { namespace: "ns", name: "a" },
    { namespace: "ns", name: "b" },
  ]);
  const clusterOwner = enqueueForOwner({ kind: "Namespace", group: "", namespaced: false });
  assert.deepEqual(clusterOwner.create(pod("p", [ref("Namespace", "v1", "team", true)]), false), [
    { namespace: "", name: "team" },
  ]);
});

Deno.test("enqueueForOwner on update enqueues both the old and the new owner", () => {
  const h = enqueueForOwner(COCOON_SET);
  const before = pod("p", [ref("CocoonSet", "cocoonset.cocoonstack.io/v1", "old", true)]);
  const after = pod("p", [ref("CocoonSet", "cocoonset.cocoonstack.io/v1", "new", true)]);
  assert.deepEqual(h.update(before, after), [
    { namespace: "ns", name: "old" },
    { namespace: "ns", name: "new" },
  ]);
  assert.deepEqual(h.update(before, before), [{ namespace: "ns", name: "old" }]);
});

Deno.test("enqueueFromMap maps old and new objects on update, deduplicated", () => {
  const h = enqueueFromMap((o: KubeObject) => [
    { namespace: "ns", name: `target-${o.metadata.labels?.target ?? "none"}` },
  ]);
  const a = { metadata: { name: "p", namespace: "ns", labels: { target: "a" } } };
  const b = { metadata: { name: "p", namespace: "ns", labels: { target: "b" } } };
  assert.deepEqual(h.create(a, true), [{ namespace: "ns", name: "target-a" }]);
  assert.deepEqual(h.update(a, b), [
    { namespace: "ns", name: "target-a" },
    { namespace: "ns", name: "target-b" },
  ]);
  assert.deepEqual(h.update(a, a), [{ namespace: "ns", name: "target-a" }]);
});
