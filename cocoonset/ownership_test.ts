import assert from "node:assert/strict";
import { Pods } from "../kube/mod.ts";
import { CocoonSets } from "../common/apis/v1/resources.ts";
import { listOwnedPods } from "./ownership.ts";
import {
  actionsOf,
  findSet,
  newCocoonSet,
  newTestEnv,
  reconcileSet,
  seedSet,
  TEST_NAMESPACE,
  withFinalizer,
} from "./_test_support.ts";

/** 64 characters: a valid object name, one more than a label value may hold. */
const longName = `long-${"x".repeat(59)}`;

Deno.test("a set named longer than a label value owns no pod, and no list is sent", async () => {
  const env = newTestEnv();
  const cs = seedSet(env, newCocoonSet(longName, withFinalizer));
  assert.deepEqual(await listOwnedPods(env.fake, cs), []);
  assert.equal(actionsOf(env, "list", Pods).length, 0, "the selector would be refused");
});

Deno.test("a deleted set named longer than a label value is torn down", async () => {
  // The name is valid for the set but no pod can carry it as a label: a selector on it is
  // refused, and teardown must not wait on a list that cannot be made.
  const env = newTestEnv();
  const cs = newCocoonSet(longName, withFinalizer);
  cs.metadata.annotations = { "cocoonset.cocoonstack.io/delete-vm-names": `vk-ns-${longName}-0` };
  seedSet(env, cs);
  await env.fake.delete(CocoonSets, TEST_NAMESPACE, longName);

  assert.deepEqual(await reconcileSet(env, longName), {});
  assert.equal(await findSet(env.fake, longName), undefined, "the finalizer was released");
  assert.deepEqual(
    env.registry.callsOf("deleteManifest").map((c) => `${c.name}:${c.reference}`),
    [`vk-ns-${longName}-0:hibernate`],
    "its :hibernate was dropped (policy always keeps :latest)",
  );
});
