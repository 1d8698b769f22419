/** The failed-main step on its own (failed_main.ts); the pass around it is in reconciler_test.ts. */
import assert from "node:assert/strict";
import { CocoonSets } from "../common/apis/v1/resources.ts";
import { CONDITION_TYPE_READY } from "../common/k8s/condition.ts";
import {
  actionsOf,
  conditionOf,
  counterValue,
  depsOf,
  findSet,
  getPod,
  lifecycleFailed,
  livePod,
  newCocoonSet,
  newTestEnv,
  newTestPass,
  readyPod,
  reconcileSet,
  seedSet,
  withFinalizer,
} from "./_test_support.ts";
import {
  podFailedReason,
  REASON_MAIN_AGENT_FAILED,
  REASON_POD_LIFECYCLE_FAILED,
  REASON_RECOVERED_FROM_FAILURE,
  reconcileFailedMain,
} from "./failed_main.ts";
import { buildAgentPod } from "./pods.ts";
import { type Pod, Pods } from "../kube/mod.ts";
import { ANNOTATION_LIFECYCLE_STATE, readHibernateState } from "../common/meta/mod.ts";

Deno.test("a failed main ends the pass in phase Failed: the step decides, it writes no status", async () => {
  const env = newTestEnv();
  const cs = newCocoonSet("demo", withFinalizer);
  const main = lifecycleFailed(livePod(buildAgentPod(cs, 0)), "boot failed");
  seedSet(env, cs, [main]);
  env.fake.actions.length = 0;
  const pass = newTestPass(depsOf(env), (await findSet(env.fake, "demo"))!, [main]);

  const end = await reconcileFailedMain(pass);

  assert.ok(end.stop && !("effect" in end));
  assert.deepEqual([end.result, end.phase, end.error], [{}, "Failed", undefined]);
  assert.deepEqual(actionsOf(env, "patch", CocoonSets), [], "no status write by the step");
  assert.deepEqual(pass.problems.map((p) => [p.condition, p.reason]), [[
    CONDITION_TYPE_READY,
    REASON_POD_LIFECYCLE_FAILED,
  ]]);
  assert.equal(env.recorder.withReason(REASON_POD_LIFECYCLE_FAILED).length, 1, "its Warning");
});

Deno.test("a healthy main lets the pass go on", async () => {
  const env = newTestEnv();
  const cs = newCocoonSet("demo", withFinalizer);
  const main = livePod(buildAgentPod(cs, 0));
  seedSet(env, cs, [main]);
  const pass = newTestPass(depsOf(env), (await findSet(env.fake, "demo"))!, [main]);

  assert.equal((await reconcileFailedMain(pass)).stop, false);
  assert.deepEqual(pass.problems, []);
});

const FAILED_METRIC = "cocoon_operator_lifecycle_state_failed_observed_total";

Deno.test("the failed-main reason: lifecycle failed wins over the pod phase", () => {
  const pod = (annotations: Record<string, string>, phase?: "Failed"): Pod => ({
    metadata: { annotations },
    ...(phase ? { status: { phase } } : {}),
  });
  const failed = { [ANNOTATION_LIFECYCLE_STATE]: "failed" };
  assert.equal(podFailedReason(pod({})), "");
  assert.equal(podFailedReason(pod(failed)), REASON_POD_LIFECYCLE_FAILED);
  assert.equal(podFailedReason(pod({}, "Failed")), REASON_MAIN_AGENT_FAILED);
  assert.equal(podFailedReason(pod(failed, "Failed")), REASON_POD_LIFECYCLE_FAILED);
  // Lifecycle values are lower case; "Failed" is not the failure signal.
  assert.equal(podFailedReason(pod({ [ANNOTATION_LIFECYCLE_STATE]: "Failed" })), "");
});

Deno.test("a main reported failed by vk turns the set Failed while its pod still runs", async () => {
  const env = newTestEnv();
  const cs = newCocoonSet("demo", withFinalizer);
  const main = lifecycleFailed(buildAgentPod(cs, 0), "hibernate push failed");
  main.status = { phase: "Running" };
  seedSet(env, cs, [main]);

  assert.deepEqual(await reconcileSet(env, "demo"), {});

  const out = await findSet(env.fake, "demo");
  assert.equal(out?.status?.phase, "Failed");
  assert.ok(await getPod(env.fake, "demo-0"), "the failed main is kept");
});

Deno.test("a failed main that drifted from the spec is deleted for recreate instead of Failed", async () => {
  const env = newTestEnv();
  const cs = newCocoonSet("demo", withFinalizer);
  const main = lifecycleFailed(buildAgentPod(cs, 0));
  main.status = { phase: "Running" };
  cs.spec.agent.image = "ghcr.io/cocoonstack/cocoon/ubuntu:26.04";
  seedSet(env, cs, [main]);

  assert.deepEqual(await reconcileSet(env, "demo"), { requeue: true });

  assert.equal(await getPod(env.fake, "demo-0"), undefined);
  assert.equal(
    (await findSet(env.fake, "demo"))?.status?.phase,
    undefined,
    "no Failed status written",
  );
  assert.equal(env.recorder.events.length, 0);
});

Deno.test("a failed main: Warning each pass, metric labelled with the phase before the pass, Ready=False, subs untouched", async () => {
  const env = newTestEnv();
  const cs = newCocoonSet("demo", (c) => {
    withFinalizer(c);
    c.spec.agent.replicas = 1;
    c.status = { phase: "Running" };
  });
  const main = lifecycleFailed(readyPod(buildAgentPod(cs, 0)), "hibernate push failed");
  main.spec!.nodeName = "node-a";
  seedSet(env, cs, [main]);
  const running = await counterValue(FAILED_METRIC, { phase: "Running" });
  const failed = await counterValue(FAILED_METRIC, { phase: "Failed" });

  assert.deepEqual(await reconcileSet(env, "demo"), {});

  let out = await findSet(env.fake, "demo");
  assert.equal(out?.status?.phase, "Failed");
  assert.deepEqual(env.recorder.events.map((e) => [e.type, e.reason, e.message]), [
    ["Warning", REASON_POD_LIFECYCLE_FAILED, "main pod ns/demo-0: hibernate push failed"],
  ]);
  assert.equal(await counterValue(FAILED_METRIC, { phase: "Running" }), running + 1);
  // Our difference: Ready follows the phase even though the pod still reports Ready.
  assert.deepEqual(
    [conditionOf(out, "Ready")?.status, conditionOf(out, "Ready")?.reason],
    ["False", REASON_POD_LIFECYCLE_FAILED],
  );
  assert.deepEqual(
    [conditionOf(out, "Progressing")?.status, conditionOf(out, "Progressing")?.reason],
    ["False", "Failed"],
  );
  assert.equal(actionsOf(env, "create", Pods).length, 0, "sub-agents are not reconciled");

  // Every pass that sees the failure repeats the Warning; the metric now counts under Failed.
  assert.deepEqual(await reconcileSet(env, "demo"), {});
  assert.equal(env.recorder.withReason(REASON_POD_LIFECYCLE_FAILED).length, 2);
  assert.equal(await counterValue(FAILED_METRIC, { phase: "Failed" }), failed + 1);
  out = await findSet(env.fake, "demo");
  assert.equal(out?.status?.phase, "Failed");
});

Deno.test("a failed main on a set with no status counts under Pending", async () => {
  const env = newTestEnv();
  const cs = newCocoonSet("demo", withFinalizer);
  seedSet(env, cs, [lifecycleFailed(buildAgentPod(cs, 0))]);
  const pending = await counterValue(FAILED_METRIC, { phase: "Pending" });

  await reconcileSet(env, "demo");

  assert.equal(await counterValue(FAILED_METRIC, { phase: "Pending" }), pending + 1);
});

Deno.test("a main in pod phase Failed is MainAgentFailed with the phase as text and no metric", async () => {
  const env = newTestEnv();
  const cs = newCocoonSet("demo", withFinalizer);
  const main = buildAgentPod(cs, 0);
  main.status = { phase: "Failed" };
  seedSet(env, cs, [main]);
  const before = await Promise.all(
    ["Pending", "Running", "Failed"].map((phase) => counterValue(FAILED_METRIC, { phase })),
  );

  assert.deepEqual(await reconcileSet(env, "demo"), {});

  assert.deepEqual(env.recorder.events.map((e) => [e.type, e.reason, e.message]), [
    ["Warning", REASON_MAIN_AGENT_FAILED, "main pod ns/demo-0: Failed"],
  ]);
  assert.equal((await findSet(env.fake, "demo"))?.status?.phase, "Failed");
  const after = await Promise.all(
    ["Pending", "Running", "Failed"].map((phase) => counterValue(FAILED_METRIC, { phase })),
  );
  assert.deepEqual(after, before);
});

Deno.test("a failed main blocks suspend: the set reads Failed and no pod is asked to hibernate", async () => {
  const env = newTestEnv();
  const cs = newCocoonSet("demo", (c) => {
    withFinalizer(c);
    c.spec.suspend = true;
  });
  seedSet(env, cs, [lifecycleFailed(buildAgentPod(cs, 0))]);

  await reconcileSet(env, "demo");

  assert.equal((await findSet(env.fake, "demo"))?.status?.phase, "Failed");
  assert.equal(readHibernateState((await getPod(env.fake, "demo-0"))!), false);
});

Deno.test("a Failed set whose main is Ready again records RecoveredFromFailure and reads Running in the same pass", async () => {
  const env = newTestEnv();
  const cs = newCocoonSet("demo", (c) => {
    withFinalizer(c);
    c.status = { phase: "Failed" };
  });
  const main = readyPod(buildAgentPod(cs, 0));
  main.metadata.annotations![ANNOTATION_LIFECYCLE_STATE] = "ready";
  seedSet(env, cs, [main]);

  assert.deepEqual(await reconcileSet(env, "demo"), {});

  assert.deepEqual(env.recorder.events.map((e) => [e.type, e.reason, e.message]), [
    ["Normal", REASON_RECOVERED_FROM_FAILURE, "main pod ns/demo-0 is Ready again"],
  ]);
  const out = await findSet(env.fake, "demo");
  assert.equal(out?.status?.phase, "Running");
  assert.equal(conditionOf(out, "Ready")?.status, "True");
});
