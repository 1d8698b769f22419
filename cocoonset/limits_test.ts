/**
 * Per-set bounds: a part of the spec above its limit builds nothing, says so
 * on Ready and in a Warning naming the limit, and the other parts still reconcile; no pass does
 * work in proportion to replicas.
 */
import assert from "node:assert/strict";
import { Pods } from "../kube/mod.ts";
import { CocoonSets } from "../common/apis/v1/resources.ts";
import {
  actionsOf,
  conditionOf,
  findSet,
  newTestEnv,
  podSeed,
  reconcileSet,
  setSeed,
} from "./_test_support.ts";
import { livePodNames, liveSet, makeAllLive } from "./_hardening_test_support.ts";
import { DEFAULT_SET_LIMITS, overLimit, REASON_INVALID_SPEC } from "./validate.ts";

Deno.test("overLimit names each part above its bound and nothing at or below it", () => {
  const limits = { maxReplicas: 3, maxToolboxes: 1 };
  const spec = (replicas: number, toolboxes: number) => ({
    agent: { image: "img", replicas },
    toolboxes: Array.from({ length: toolboxes }, (_, i) => ({ name: `t${i}`, image: "img" })),
  });
  assert.deepEqual(overLimit(spec(3, 1), limits), {});
  const over = overLimit(spec(4, 2), limits);
  assert.match(over.agents ?? "", /replicas 4 is above the limit of 3 .*--max-replicas-per-set/);
  assert.match(over.toolboxes ?? "", /2 toolboxes, above the limit of 1 .*MAX_TOOLBOXES_PER_SET/);
  assert.deepEqual(DEFAULT_SET_LIMITS, { maxReplicas: 1000, maxToolboxes: 100 });
});

Deno.test("replicas above the limit: InvalidSpec naming the limit, no sub-agent, the toolboxes still reconcile", async () => {
  const { cs, pods } = liveSet("big", { replicas: 4, toolboxes: ["tb"] });
  const env = newTestEnv([setSeed(cs), ...pods.map(podSeed)]);
  env.reconciler.deps.limits = { maxReplicas: 3, maxToolboxes: 10 };

  assert.deepEqual(await reconcileSet(env, "big"), { requeue: true }, "the toolbox is created");
  await makeAllLive(env);
  assert.deepEqual(await reconcileSet(env, "big"), {}, "a spec edit, not a retry, fixes it");

  assert.deepEqual(await livePodNames(env), ["big-0", "big-tb"], "no sub-agent pod");
  const stored = await findSet(env.fake, "big");
  const ready = conditionOf(stored, "Ready");
  assert.deepEqual([ready?.status, ready?.reason], ["False", REASON_INVALID_SPEC]);
  assert.match(ready?.message ?? "", /replicas 4 is above the limit of 3 sub-agents per set/);
  assert.equal(stored?.status?.desiredAgents, 5);
  const warnings = env.recorder.withReason(REASON_INVALID_SPEC);
  assert.ok(warnings.length > 0 && warnings.every((w) => w.type === "Warning"));
  assert.match(warnings[0].message, /limit of 3/);

  // Back within the limit: the sub-agents come.
  const edited = (await findSet(env.fake, "big"))!;
  edited.spec.agent.replicas = 3;
  edited.metadata.generation = 2;
  env.fake.seed(CocoonSets, edited);
  assert.deepEqual(await reconcileSet(env, "big"), { requeue: true });
  assert.deepEqual(await livePodNames(env), ["big-0", "big-1", "big-2", "big-3", "big-tb"]);
});

Deno.test("toolboxes above the limit: no toolbox is created or deleted, sub-agents are", async () => {
  const { cs, pods } = liveSet("tbs", { replicas: 1, toolboxes: ["a", "b"], liveToolboxes: ["a"] });
  const env = newTestEnv([setSeed(cs), ...pods.map(podSeed)]);
  env.reconciler.deps.limits = { maxReplicas: 10, maxToolboxes: 1 };

  assert.deepEqual(await reconcileSet(env, "tbs"), { requeue: true });
  assert.deepEqual(await livePodNames(env), ["tbs-0", "tbs-1", "tbs-a"]);
  await makeAllLive(env);
  assert.deepEqual(await reconcileSet(env, "tbs"), {});
  const ready = conditionOf(await findSet(env.fake, "tbs"), "Ready");
  assert.equal(ready?.reason, REASON_INVALID_SPEC);
  assert.match(ready?.message ?? "", /2 toolboxes, above the limit of 1/);
  // No toolbox dry-run either: a part above its limit builds nothing.
  assert.equal(env.fake.actions.filter((a) => a.dryRun && a.name?.startsWith("tbs-a")).length, 0);
});

Deno.test("replicas 2147483647: one pass makes a handful of requests and returns", async () => {
  const { cs, pods } = liveSet("huge", { replicas: 2_147_483_647 });
  const env = newTestEnv([setSeed(cs), ...pods.map(podSeed)]);

  assert.deepEqual(await reconcileSet(env, "huge"), {});
  assert.equal(actionsOf(env, "create", Pods).length, 0);
  assert.ok(env.fake.actions.length < 20, `${env.fake.actions.length} requests`);
  const stored = await findSet(env.fake, "huge");
  assert.equal(stored?.status?.desiredAgents, 2_147_483_647, "clamped to the int32 field");
  assert.match(conditionOf(stored, "Ready")?.message ?? "", /above the limit of 1000/);
});
