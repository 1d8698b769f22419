/** The failed-main step on its own (failed_main.ts); the pass around it is in reconciler_test.ts. */
import assert from "node:assert/strict";
import { CocoonSets } from "../common/apis/v1/resources.ts";
import { ConditionTypeReady } from "../common/k8s/condition.ts";
import {
  actionsOf,
  depsOf,
  findSet,
  lifecycleFailed,
  livePod,
  newCocoonSet,
  newTestEnv,
  newTestPass,
  seedSet,
  withFinalizer,
} from "./_test_support.ts";
import { reconcileFailedMain } from "./failed_main.ts";
import { ReasonPodLifecycleFailed } from "./pod_state.ts";
import { buildAgentPod } from "./pods.ts";

Deno.test("a failed main ends the pass in phase Failed: the step decides, it writes no status", async () => {
  const env = newTestEnv();
  const cs = newCocoonSet("demo", withFinalizer);
  const main = lifecycleFailed(livePod(buildAgentPod(cs, 0)), "boot failed");
  seedSet(env, cs, [main]);
  env.fake.actions.length = 0;
  const pass = newTestPass(depsOf(env), (await findSet(env.fake, "demo"))!, [main]);

  const end = await reconcileFailedMain(pass);

  assert.deepEqual(end, { result: {}, phase: "Failed" });
  assert.deepEqual(actionsOf(env, "patch", CocoonSets), [], "no status write by the step");
  assert.deepEqual(pass.problems.map((p) => [p.condition, p.reason]), [[
    ConditionTypeReady,
    ReasonPodLifecycleFailed,
  ]]);
  assert.equal(env.recorder.withReason(ReasonPodLifecycleFailed).length, 1, "its Warning");
});

Deno.test("a healthy main lets the pass go on", async () => {
  const env = newTestEnv();
  const cs = newCocoonSet("demo", withFinalizer);
  const main = livePod(buildAgentPod(cs, 0));
  seedSet(env, cs, [main]);
  const pass = newTestPass(depsOf(env), (await findSet(env.fake, "demo"))!, [main]);

  assert.equal(await reconcileFailedMain(pass), undefined);
  assert.deepEqual(pass.problems, []);
});
