import assert from "node:assert/strict";
import { KIND_COCOON_SET, TOLERATION_KEY } from "./keys.ts";
import { cocoonSetOwnerName, hasCocoonTolerationKey, isOwnedByCocoonSet } from "./owner.ts";

Deno.test("hasCocoonTolerationKey", () => {
  assert.equal(hasCocoonTolerationKey([{ key: TOLERATION_KEY }]), true);
  assert.equal(
    hasCocoonTolerationKey([{ key: TOLERATION_KEY, operator: "Equal", value: "x" }]),
    true,
  );
  assert.equal(hasCocoonTolerationKey(undefined), false);
  assert.equal(hasCocoonTolerationKey([]), false);
  assert.equal(hasCocoonTolerationKey([{ key: "other" }]), false);
});

Deno.test("cocoonSetOwnerName and isOwnedByCocoonSet", () => {
  const rs = { apiVersion: "apps/v1", kind: "ReplicaSet", name: "rs", uid: "1" };
  const cs = {
    apiVersion: "cocoonset.cocoonstack.io/v1",
    kind: KIND_COCOON_SET,
    name: "demo",
    uid: "2",
  };
  assert.equal(cocoonSetOwnerName([rs, cs]), "demo");
  assert.equal(isOwnedByCocoonSet([rs, cs]), true);
  assert.equal(cocoonSetOwnerName([rs]), "");
  assert.equal(isOwnedByCocoonSet(undefined), false);
});
