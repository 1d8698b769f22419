import assert from "node:assert/strict";
import { Pods } from "../kube/mod.ts";
import type { Pod } from "../kube/mod.ts";
import { ANNOTATION_COCOON_SET_GENERATION } from "../common/meta/mod.ts";
import {
  depsOf,
  getPod,
  newCocoonSet,
  newTestEnv,
  newTestPass,
  podSeed,
  TEST_NAMESPACE,
} from "./_test_support.ts";
import { syncCocoonSetGeneration } from "./generation_stamp.ts";

function bare(name: string, generation?: string): Pod {
  return {
    metadata: {
      name,
      namespace: TEST_NAMESPACE,
      ...(generation ? { annotations: { [ANNOTATION_COCOON_SET_GENERATION]: generation } } : {}),
    },
  };
}

Deno.test("the generation is stamped on every owned pod that lacks it or carries an older one", async () => {
  const cs = newCocoonSet("demo", (c) => {
    c.metadata.generation = 7;
  });
  const env = newTestEnv([podSeed(bare("demo-0")), podSeed(bare("demo-1", "5"))]);
  const pods = (await env.fake.list(Pods, { namespace: TEST_NAMESPACE })).items;
  await syncCocoonSetGeneration(newTestPass(depsOf(env), cs, pods));
  for (const name of ["demo-0", "demo-1"]) {
    const pod = await getPod(env.fake, name);
    assert.equal(pod?.metadata.annotations?.[ANNOTATION_COCOON_SET_GENERATION], "7", name);
  }
  const patches = env.fake.actions.filter((a) => a.verb === "patch");
  assert.deepEqual(patches.map((a) => a.name), ["demo-0", "demo-1"], "one patch per pod, by name");
  assert.deepEqual(patches[0].patch, {
    metadata: { annotations: { [ANNOTATION_COCOON_SET_GENERATION]: "7" } },
  });
});

Deno.test("a pod already stamped with the current generation is not patched", async () => {
  const cs = newCocoonSet("demo", (c) => {
    c.metadata.generation = 3;
  });
  const env = newTestEnv([podSeed(bare("demo-0", "3"))]);
  const pods = (await env.fake.list(Pods, { namespace: TEST_NAMESPACE })).items;
  await syncCocoonSetGeneration(newTestPass(depsOf(env), cs, pods));
  assert.equal(env.fake.actions.filter((a) => a.verb === "patch").length, 0);
  const pod = await getPod(env.fake, "demo-0");
  assert.equal(pod?.metadata.annotations?.[ANNOTATION_COCOON_SET_GENERATION], "3");
});

Deno.test("a terminating pod is not stamped", async () => {
  const cs = newCocoonSet("demo", (c) => {
    c.metadata.generation = 2;
  });
  const going = bare("demo-1", "1");
  going.metadata.finalizers = ["test/hold"];
  const env = newTestEnv([podSeed(bare("demo-0", "1")), podSeed(going)]);
  await env.fake.delete(Pods, TEST_NAMESPACE, "demo-1");
  const pods = (await env.fake.list(Pods, { namespace: TEST_NAMESPACE })).items;
  assert.ok(pods.find((p) => p.metadata.name === "demo-1")?.metadata.deletionTimestamp);
  await syncCocoonSetGeneration(newTestPass(depsOf(env), cs, pods));
  assert.deepEqual(
    env.fake.actions.filter((a) => a.verb === "patch").map((a) => a.name),
    ["demo-0"],
  );
  const stale = await getPod(env.fake, "demo-1");
  assert.equal(stale?.metadata.annotations?.[ANNOTATION_COCOON_SET_GENERATION], "1");
});
