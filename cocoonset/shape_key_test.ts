/**
 * Dry-run verdicts shared between sets (issue 23, item 3): sets with the same spec in one
 * namespace cost one check of each shape, and a shape that differs in anything the API server
 * validates (spec, namespace, name length) is checked on its own.
 */
import assert from "node:assert/strict";
import { Pods } from "../kube/mod.ts";
import type { CocoonSet } from "../common/apis/v1/cocoonset_types.ts";
import { newCocoonSet, newTestEnv, podSeed, reconcileSet, setSeed } from "./_test_support.ts";
import { buildAgentPod, buildToolboxPod } from "./pods.ts";
import { shapeKey } from "./shape_key.ts";
import { livePod } from "./_test_support.ts";

function liveSetOf(name: string, mod: (c: CocoonSet) => void = () => {}) {
  const cs = newCocoonSet(name, (c) => {
    c.metadata.uid = `uid-${name}`;
    c.metadata.generation = 1;
    c.spec.agent.replicas = 2;
    c.spec.toolboxes = [{ name: "tools", image: "img" }];
  }, mod);
  return { cs, pods: [livePod(buildAgentPod(cs, 0))] };
}

Deno.test("shapeKey: equal for sets whose names have the same length, different otherwise", () => {
  const a = newCocoonSet("set-a", (c) => c.spec.agent.replicas = 2);
  const b = newCocoonSet("set-b", (c) => c.spec.agent.replicas = 2);
  const longer = newCocoonSet("set-bb", (c) => c.spec.agent.replicas = 2);
  const other = newCocoonSet("set-c", (c) => {
    c.spec.agent.replicas = 2;
    c.spec.agent.image = "other:1";
  });
  const key = (cs: CocoonSet) => shapeKey(cs.metadata.name!, buildAgentPod(cs, 2, "vk", "node"));
  assert.equal(key(a), key(b));
  assert.notEqual(key(a), key(longer), "a longer name may break a label limit");
  assert.notEqual(key(a), key(other), "a different spec");
  const tb = (cs: CocoonSet, ns: string) => {
    cs.metadata.namespace = ns;
    return shapeKey(cs.metadata.name!, buildToolboxPod(cs, { name: "t", image: "i" }));
  };
  assert.notEqual(tb(structuredClone(a), "one"), tb(structuredClone(b), "two"), "namespace");
});

Deno.test("sets with the same spec share their dry-runs: the second costs none", async () => {
  const one = liveSetOf("set-a");
  const two = liveSetOf("set-b");
  const three = liveSetOf("set-c", (c) => c.spec.agent.image = "ghcr.io/cocoonstack/other:1");
  const env = newTestEnv([
    ...[one, two, three].flatMap(({ cs, pods }) => [setSeed(cs), ...pods.map(podSeed)]),
  ]);
  const dryRuns = () => env.fake.actions.filter((a) => a.dryRun && a.resource === Pods).length;

  assert.deepEqual(await reconcileSet(env, "set-a"), { requeue: true });
  assert.equal(dryRuns(), 2, "the sub-agent shape and the toolbox");
  assert.deepEqual(await reconcileSet(env, "set-b"), { requeue: true });
  assert.equal(dryRuns(), 2, "the same shapes: no request");
  assert.deepEqual(await reconcileSet(env, "set-c"), { requeue: true });
  assert.equal(dryRuns(), 3, "another image: its sub-agent shape is checked");
});

Deno.test("sets with the same spec checked at the same time share the dry-run in flight", async () => {
  const one = liveSetOf("set-a");
  const two = liveSetOf("set-b");
  const env = newTestEnv([
    ...[one, two].flatMap(({ cs, pods }) => [setSeed(cs), ...pods.map(podSeed)]),
  ]);
  const dryRunsOf = (set: string) =>
    env.fake.actions.filter((a) => a.dryRun && a.resource === Pods && a.name.startsWith(set));
  // Every dry-run waits at this gate until the test opens it (the action is recorded first).
  let open = () => {};
  const gate = new Promise<void>((resolve) => open = resolve);
  env.fake.addReactor(async (a) => {
    if (a.dryRun) await gate;
    return undefined;
  });
  const turns = async (n: number) => {
    for (let i = 0; i < n; i++) await new Promise((r) => setTimeout(r, 0));
  };

  const first = reconcileSet(env, "set-a");
  while (dryRunsOf("set-a").length < 2) await turns(1);
  const second = reconcileSet(env, "set-b");
  // set-b's pass lists its pods just before its check; let it run up to the check.
  while (!env.fake.actions.some((a) => a.verb === "list" && a.labelSelector?.includes("set-b"))) {
    await turns(1);
  }
  await turns(20);
  open();

  assert.deepEqual(await first, { requeue: true });
  assert.deepEqual(await second, { requeue: true });
  assert.equal(dryRunsOf("set-a").length, 2, "the sub-agent shape and the toolbox");
  assert.deepEqual(dryRunsOf("set-b"), [], "set-b waited for set-a's answers");
  assert.ok(await getPodNamed(env, "set-b-1"), "and went on to create its sub-agents");
});

async function getPodNamed(env: ReturnType<typeof newTestEnv>, name: string) {
  return (await env.fake.list(Pods, {})).items.find((p) => p.metadata.name === name);
}
