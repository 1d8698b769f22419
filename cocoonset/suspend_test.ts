import assert from "node:assert/strict";
import { Pods } from "../kube/mod.ts";
import type { Pod } from "../kube/mod.ts";
import { readRestoreFromHibernate } from "../common/meta/mod.ts";
import {
  actionsOf,
  conditionOf,
  findSet,
  getPod,
  newCocoonSet,
  newTestEnv,
  reconcileSet,
  seedSet,
  TEST_NAMESPACE,
  withFinalizer,
} from "./_test_support.ts";
import { REASON_NAME_CONFLICT } from "./create.ts";
import { buildAgentPod } from "./pods.ts";
import { POLL_MS } from "./pass.ts";
import { HIBERNATE_SNAPSHOT_TAG } from "../snapshot/registry.ts";

/** A retain-suspended set with no pods yet. */
function suspendedSet() {
  return newCocoonSet("demo", (c) => {
    withFinalizer(c);
    c.spec.suspend = true;
  });
}

Deno.test("a suspended set without a main creates only the main, restoring from its snapshot", async () => {
  const env = newTestEnv();
  seedSet(env, suspendedSet());
  env.registry.put("vk-ns-demo-0", HIBERNATE_SNAPSHOT_TAG);

  assert.deepEqual(await reconcileSet(env, "demo"), { requeue: true });

  assert.deepEqual(actionsOf(env, "create", Pods).map((a) => a.name), ["demo-0"]);
  assert.equal(readRestoreFromHibernate((await getPod(env.fake, "demo-0"))!), true);
});

Deno.test("a suspended set whose main name is taken by a foreign pod reports NameConflict and fails the pass", async () => {
  const env = newTestEnv();
  const foreign: Pod = {
    metadata: { name: "demo-0", namespace: TEST_NAMESPACE, labels: { app: "someone-else" } },
    spec: { containers: [{ name: "c", image: "x" }] },
  };
  seedSet(env, suspendedSet(), [foreign]);

  // Go returned the create's AlreadyExists as an error; silently polling would hide the cause.
  await assert.rejects(reconcileSet(env, "demo"), /demo-0/);

  const warnings = env.recorder.withReason(REASON_NAME_CONFLICT);
  assert.equal(warnings.length, 1);
  assert.equal(warnings[0].type, "Warning");
  const ready = conditionOf(await findSet(env.fake, "demo"), "Ready");
  assert.deepEqual([ready?.status, ready?.reason], ["False", REASON_NAME_CONFLICT]);
  assert.equal((await findSet(env.fake, "demo"))?.status?.phase, "Suspending");
  assert.equal(actionsOf(env, "patch", Pods, "demo-0").length, 0, "the foreign pod is untouched");
  assert.equal(actionsOf(env, "delete", Pods, "demo-0").length, 0);
  assert.deepEqual((await getPod(env.fake, "demo-0"))?.metadata.labels, { app: "someone-else" });
});

Deno.test("a suspended set whose old main still terminates waits for it without an error", async () => {
  const env = newTestEnv();
  const cs = suspendedSet();
  const old = buildAgentPod(cs, 0);
  old.metadata.finalizers = ["test/hold"];
  seedSet(env, cs, [old]);
  await env.fake.delete(Pods, TEST_NAMESPACE, "demo-0");

  assert.deepEqual(await reconcileSet(env, "demo"), { requeueAfter: POLL_MS });

  assert.equal(env.recorder.withReason(REASON_NAME_CONFLICT).length, 0);
});
