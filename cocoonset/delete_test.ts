import assert from "node:assert/strict";
import { CocoonSets } from "../common/apis/v1/resources.ts";
import { HibernateSnapshotTag } from "../common/meta/mod.ts";
import {
  findSet,
  getPod,
  newCocoonSet,
  newTestEnv,
  reconcileSet,
  seedSet,
  testNamespace,
} from "./_test_support.ts";
import { AnnotationDeleteVMNames } from "./delete.ts";
import { buildAgentPod } from "./pods.ts";

Deno.test("a deleting set that no longer holds our finalizer is left alone (another finalizer keeps it)", async () => {
  const env = newTestEnv();
  const cs = newCocoonSet("demo", (c) => {
    c.metadata.finalizers = ["example.com/backup"];
    c.status = { agents: [{ slot: 0, role: "main", podName: "demo-0", vmName: "vk-ns-demo-0" }] };
  });
  seedSet(env, cs, [buildAgentPod(cs, 0)]);
  await env.fake.delete(CocoonSets, testNamespace, "demo");
  env.registry.put("vk-ns-demo-0", HibernateSnapshotTag);
  env.fake.actions.length = 0;

  // The original ran its teardown again here: a second stash, pod deletes and registry DELETEs.
  assert.deepEqual(await reconcileSet(env, "demo"), {});

  assert.deepEqual(env.fake.actions.map((a) => a.verb), ["get"], "only the set was read");
  assert.equal(env.registry.calls.length, 0);
  assert.equal(
    (await findSet(env.fake, "demo"))?.metadata.annotations?.[AnnotationDeleteVMNames],
    undefined,
  );
  assert.equal((await getPod(env.fake, "demo-0"))?.metadata.deletionTimestamp, undefined);
});
