import assert from "node:assert/strict";
import { Pods } from "./core.ts";
import {
  addFinalizer,
  AlreadyOwnedError,
  containsFinalizer,
  ignoreNotFound,
  isControlledBy,
  removeFinalizer,
  setControllerReference,
  setOwnerReference,
} from "./controllerutil.ts";
import { newApiError } from "./errors.ts";
import type { KubeObject } from "./object.ts";
import { resourceType } from "./resource.ts";

const Sets = resourceType<KubeObject>({
  group: "cocoonset.cocoonstack.io",
  version: "v1",
  kind: "CocoonSet",
  plural: "cocoonsets",
  namespaced: true,
  statusSubresource: true,
});

const owner = (name = "demo", uid = "u-1"): KubeObject => ({
  metadata: { name, namespace: "ns", uid },
});

Deno.test("setControllerReference adds one controller reference with blockOwnerDeletion", () => {
  const pod: KubeObject = { metadata: { name: "p", namespace: "ns" } };
  setControllerReference(owner(), pod, Sets);
  assert.deepEqual(pod.metadata.ownerReferences, [{
    apiVersion: "cocoonset.cocoonstack.io/v1",
    kind: "CocoonSet",
    name: "demo",
    uid: "u-1",
    controller: true,
    blockOwnerDeletion: true,
  }]);
  // Setting it again replaces rather than duplicates.
  setControllerReference(owner(), pod, Sets);
  assert.equal(pod.metadata.ownerReferences?.length, 1);
  assert.equal(isControlledBy(pod, owner()), true);
});

Deno.test("setControllerReference refuses a second controller and cross-namespace owners", () => {
  const pod: KubeObject = { metadata: { name: "p", namespace: "ns" } };
  setControllerReference(owner("a", "u-a"), pod, Sets);
  assert.throws(() => setControllerReference(owner("b", "u-b"), pod, Sets), AlreadyOwnedError);
  const elsewhere: KubeObject = { metadata: { name: "q", namespace: "other" } };
  assert.throws(() => setControllerReference(owner(), elsewhere, Sets), /cross-namespace/);
  const noUid: KubeObject = { metadata: { name: "x", namespace: "ns" } };
  assert.throws(() => setControllerReference(noUid, elsewhere, Sets), /uid/);
});

Deno.test("setOwnerReference keeps the existing controller", () => {
  const pod: KubeObject = { metadata: { name: "p", namespace: "ns" } };
  setControllerReference(owner("a", "u-a"), pod, Sets);
  setOwnerReference(owner("b", "u-b"), pod, Sets);
  assert.equal(pod.metadata.ownerReferences?.length, 2);
  assert.equal(pod.metadata.ownerReferences?.[1].controller, undefined);
  assert.equal(isControlledBy(pod, owner("a", "u-a")), true);
  assert.equal(isControlledBy(pod, owner("b", "u-b")), false);
});

Deno.test("isControlledBy compares UIDs, not names", () => {
  const pod: KubeObject = { metadata: { name: "p", namespace: "ns" } };
  setControllerReference(owner("demo", "old-uid"), pod, Sets);
  assert.equal(isControlledBy(pod, owner("demo", "new-uid")), false);
  assert.equal(isControlledBy({ metadata: {} }, owner()), false);
  assert.equal(Pods.kind, "Pod");
});

Deno.test("finalizers: add is idempotent, remove drops every copy, both report change", () => {
  const obj: KubeObject = { metadata: { name: "x", finalizers: ["other"] } };
  assert.equal(containsFinalizer(obj, "f"), false);
  assert.equal(addFinalizer(obj, "f"), true);
  assert.equal(addFinalizer(obj, "f"), false);
  assert.deepEqual(obj.metadata.finalizers, ["other", "f"]);
  obj.metadata.finalizers!.push("f");
  assert.equal(removeFinalizer(obj, "f"), true);
  assert.deepEqual(obj.metadata.finalizers, ["other"]);
  assert.equal(removeFinalizer(obj, "f"), false);
});

Deno.test("ignoreNotFound swallows NotFound and rethrows everything else", async () => {
  const notFound = newApiError(404, "NotFound", { resource: "pods", name: "p" }, "gone");
  assert.equal(await Promise.reject(notFound).catch(ignoreNotFound), undefined);
  const conflict = newApiError(409, "Conflict", { resource: "pods", name: "p" }, "busy");
  await assert.rejects(Promise.reject(conflict).catch(ignoreNotFound), /busy/);
});
