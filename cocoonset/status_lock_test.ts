import assert from "node:assert/strict";
import { CocoonSets } from "../common/apis/v1/resources.ts";
import { Pods } from "../kube/mod.ts";
import { buildAgentPod } from "./pods.ts";
import {
  conditionOf,
  editPod,
  getSet,
  laggingCache,
  livePod,
  newCocoonSet,
  newTestEnv,
  reconcilerWith,
  reconcileSet,
  seedSet,
  TEST_NAMESPACE,
  type TestEnv,
  withFinalizer,
} from "./_test_support.ts";

/** Phase and the Progressing condition's message, which names the phase it was built for. */
async function phaseAndProgressing(env: TestEnv): Promise<[string, string]> {
  const cs = await getSet(env.fake, "demo");
  return [cs.status?.phase ?? "", conditionOf(cs, "Progressing")?.message ?? ""];
}

Deno.test("a status computed against a stale copy of the set is refused, not merged into the newer one", async () => {
  const env = newTestEnv();
  const cs = newCocoonSet("demo", withFinalizer, (c) => (c.spec.agent.replicas = 1));
  const main = livePod(buildAgentPod(cs, 0));
  const vm = main.metadata.annotations?.["vm.cocoonstack.io/name"] ?? "";
  seedSet(env, cs, [main, livePod(buildAgentPod(cs, 1, vm, "node-a"))]);
  await reconcileSet(env, "demo");
  assert.deepEqual(await phaseAndProgressing(env), ["Running", "Running"]);

  // Scaled to 2: a lagging cache holds this copy (new spec, the old Running status) while the
  // passes below write Scaling, a write it never sees.
  await env.fake.patch(CocoonSets, TEST_NAMESPACE, "demo", "merge", {
    spec: { agent: { replicas: 2 } },
  });
  const stale = await getSet(env.fake, "demo");
  await reconcileSet(env, "demo"); // creates slot 2
  await reconcileSet(env, "demo"); // slot 2 not ready yet: Scaling
  assert.deepEqual(await phaseAndProgressing(env), ["Scaling", "Scaling"]);
  await editPod(env, "demo-2", (p) => livePod(p, "node-a"));

  // A pass reading the stale copy computes Running 3/3. A merge patch against that copy leaves
  // out the phase (Running there already) and would leave phase Scaling next to Running
  // conditions, a status that no later pass would look at again.
  const behind = reconcilerWith(env, laggingCache(env.fake, { set: stale }));
  assert.deepEqual(
    await behind.reconcile(
      { namespace: TEST_NAMESPACE, name: "demo" },
      new AbortController().signal,
    ),
    { requeue: true },
    "refused as a conflict and looked at again",
  );
  assert.deepEqual(await phaseAndProgressing(env), ["Scaling", "Scaling"], "nothing was merged");

  // The retry, with the cache caught up, writes the whole status.
  await reconcileSet(env, "demo");
  assert.deepEqual(await phaseAndProgressing(env), ["Running", "Running"]);
  assert.equal((await getSet(env.fake, "demo")).status?.readyAgents, 3);
  assert.equal((await env.fake.list(Pods, { namespace: TEST_NAMESPACE })).items.length, 3);
});

// The other half of the lock: a status equal to a stale copy sends nothing, so the lock never
// sees that copy. After this process wrote Scaling, a cache still showing the Running before it
// made a pass that computes Running again skip the write: Scaling stayed stored next to three
// ready agents, and with status writes waking no pass, nothing put it right.
Deno.test("a status equal to a stale copy, but not to what this process last wrote, is checked against the server", async () => {
  const env = newTestEnv();
  const cs = newCocoonSet("demo", withFinalizer, (c) => (c.spec.agent.replicas = 1));
  const main = livePod(buildAgentPod(cs, 0));
  const vm = main.metadata.annotations?.["vm.cocoonstack.io/name"] ?? "";
  seedSet(env, cs, [main, livePod(buildAgentPod(cs, 1, vm, "node-a"))]);
  await reconcileSet(env, "demo");
  assert.deepEqual(await phaseAndProgressing(env), ["Running", "Running"]);
  const running = await getSet(env.fake, "demo");

  await editPod(
    env,
    "demo-1",
    (p) => (p.status!.conditions = [{ type: "Ready", status: "False" }]),
  );
  await reconcileSet(env, "demo");
  assert.deepEqual(await phaseAndProgressing(env), ["Scaling", "Scaling"]);

  // Ready again, seen by a pass of this process whose cache still holds the Running copy.
  await editPod(env, "demo-1", (p) => livePod(p, "node-a"));
  const deps = env.reconciler.deps;
  const cache = deps.client;
  deps.client = laggingCache(env.fake, { set: running });
  try {
    assert.deepEqual(
      await reconcileSet(env, "demo"),
      { requeue: true },
      "refused as a conflict and looked at again",
    );
  } finally {
    deps.client = cache;
  }

  await reconcileSet(env, "demo");
  assert.deepEqual(await phaseAndProgressing(env), ["Running", "Running"]);
  // Caught up: the same observation sends nothing at all.
  env.fake.actions.length = 0;
  await reconcileSet(env, "demo");
  assert.deepEqual(env.fake.actions.filter((a) => a.verb === "patch"), []);
});

// A copy that fell behind any change of the set, its metadata alone included, costs one pass: the
// next pass reads the set again and writes the status.
Deno.test("a status write refused because the set moved on retries the pass, which writes the status", async () => {
  const env = newTestEnv();
  const cs = newCocoonSet("demo", withFinalizer, (c) => (c.spec.agent.replicas = 1));
  const main = livePod(buildAgentPod(cs, 0));
  const vm = main.metadata.annotations?.["vm.cocoonstack.io/name"] ?? "";
  seedSet(env, cs, [main, livePod(buildAgentPod(cs, 1, vm, "node-a"))]);
  await reconcileSet(env, "demo");
  assert.deepEqual(await phaseAndProgressing(env), ["Running", "Running"]);

  // The cache holds this copy; the stored one then gains an annotation.
  const stale = await getSet(env.fake, "demo");
  await env.fake.patch(CocoonSets, TEST_NAMESPACE, "demo", "merge", {
    metadata: { annotations: { "example.com/note": "moved" } },
  });
  await editPod(
    env,
    "demo-1",
    (p) => (p.status!.conditions = [{ type: "Ready", status: "False" }]),
  );

  const behind = reconcilerWith(env, laggingCache(env.fake, { set: stale }));
  const result = await behind.reconcile(
    { namespace: TEST_NAMESPACE, name: "demo" },
    new AbortController().signal,
  );
  assert.deepEqual(result, { requeue: true }, "refused as a conflict and looked at again");
  assert.deepEqual(await phaseAndProgressing(env), ["Running", "Running"], "nothing merged");

  await reconcileSet(env, "demo");
  assert.deepEqual(await phaseAndProgressing(env), ["Scaling", "Scaling"]);
  const stored = await getSet(env.fake, "demo");
  assert.equal(stored.metadata.annotations?.["example.com/note"], "moved");
  assert.equal(stored.status?.readyAgents, 1);
});
