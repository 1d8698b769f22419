import assert from "node:assert/strict";
import { CocoonSets } from "../common/apis/v1/resources.ts";
import { Pods } from "../kube/mod.ts";
import type { Pod } from "../kube/mod.ts";
import {
  actionsOf,
  conditionOf,
  findSet,
  getPod,
  newCocoonSet,
  newTestEnv,
  readyPod,
  reconcileSet,
  seedSet,
  TEST_NAMESPACE,
  type TestEnv,
  withFinalizer,
} from "./_test_support.ts";
import { NameConflictError, REASON_NAME_CONFLICT, settleMainCreateClash } from "./name_clash.ts";
import { depsOf, newTestPass } from "./_test_support.ts";
import { buildAgentPod } from "./pods.ts";

/** A pod named `name` that no CocoonSet controls. */
function foreignPod(name: string): Pod {
  return {
    metadata: { name, namespace: TEST_NAMESPACE, labels: { app: "someone-else" } },
    spec: { containers: [{ name: "c", image: "x" }] },
  };
}

async function assertUntouched(env: TestEnv, name: string): Promise<void> {
  assert.equal(actionsOf(env, "patch", Pods, name).length, 0, `${name} patched`);
  assert.equal(actionsOf(env, "delete", Pods, name).length, 0, `${name} deleted`);
  assert.deepEqual((await getPod(env.fake, name))?.metadata.labels, { app: "someone-else" });
}

Deno.test("a main name taken by a foreign pod: NameConflict on Ready, a Warning naming it, the pass fails", async () => {
  const env = newTestEnv();
  seedSet(env, newCocoonSet("demo", withFinalizer), [foreignPod("demo-0")]);

  await assert.rejects(reconcileSet(env, "demo"), NameConflictError);

  const stored = await findSet(env.fake, "demo");
  const ready = conditionOf(stored, "Ready");
  assert.deepEqual([ready?.status, ready?.reason], ["False", REASON_NAME_CONFLICT]);
  assert.match(ready?.message ?? "", /demo-0.*not controlled by any CocoonSet/);
  assert.equal(stored?.status?.phase, "Pending");
  const warnings = env.recorder.withReason(REASON_NAME_CONFLICT);
  assert.deepEqual(warnings.map((w) => [w.type, w.message]), [["Warning", ready?.message]]);
  await assertUntouched(env, "demo-0");
});

Deno.test("a sub-agent slot taken by a foreign pod: the other slots are made, then the pass fails with NameConflict", async () => {
  const env = newTestEnv();
  const cs = newCocoonSet("demo", withFinalizer, (c) => {
    c.spec.agent.replicas = 2;
  });
  const main = readyPod(buildAgentPod(cs, 0));
  main.spec!.nodeName = "node-a";
  seedSet(env, cs, [main, foreignPod("demo-1")]);

  assert.deepEqual(await reconcileSet(env, "demo"), { requeue: true });
  assert.ok(await getPod(env.fake, "demo-2"), "the free slot is created");
  assert.equal(env.recorder.withReason(REASON_NAME_CONFLICT).length, 1);

  await assert.rejects(reconcileSet(env, "demo"), /sub-agent slot 1 needs pod demo-1/);
  const ready = conditionOf(await findSet(env.fake, "demo"), "Ready");
  assert.deepEqual([ready?.status, ready?.reason], ["False", REASON_NAME_CONFLICT]);
  await assertUntouched(env, "demo-1");
});

Deno.test("a released-seat wake whose main name is taken: NameConflict, phase stays Waking, the pass fails", async () => {
  const env = newTestEnv();
  const cs = newCocoonSet("demo", withFinalizer, (c) => {
    c.metadata.annotations = { "cocoonset.cocoonstack.io/hibernated-on-node": "node-a" };
    c.status = { phase: "Suspended" };
  });
  seedSet(env, cs, []);
  env.registry.put("vk-ns-demo-0", "hibernate");
  // The foreign pod appears after classification (it is not ours, so it is never listed).
  env.fake.seed(Pods, foreignPod("demo-0"));

  await assert.rejects(reconcileSet(env, "demo"), NameConflictError);

  const stored = await findSet(env.fake, "demo");
  assert.equal(stored?.status?.phase, "Waking");
  assert.equal(conditionOf(stored, "Ready")?.reason, REASON_NAME_CONFLICT);
  assert.equal(env.registry.contains("vk-ns-demo-0", "hibernate"), true, "snapshot kept");
  await assertUntouched(env, "demo-0");
});

Deno.test("a migration whose main name is taken: NameConflict, phase stays Migrating, the snapshot is kept", async () => {
  const env = newTestEnv();
  const cs = newCocoonSet("demo", withFinalizer, (c) => {
    c.spec.nodeName = "node-b";
    c.status = { phase: "Migrating" };
  });
  seedSet(env, cs, [foreignPod("demo-0")]);
  env.registry.put("vk-ns-demo-0", "hibernate");

  await assert.rejects(reconcileSet(env, "demo"), NameConflictError);

  const stored = await findSet(env.fake, "demo");
  assert.equal(stored?.status?.phase, "Migrating");
  assert.equal(conditionOf(stored, "Ready")?.reason, REASON_NAME_CONFLICT);
  assert.equal(env.registry.contains("vk-ns-demo-0", "hibernate"), true, "snapshot kept");
  await assertUntouched(env, "demo-0");
});

Deno.test("a main create clash with a foreign pod is reported, not written: the pass writes the status", async () => {
  const env = newTestEnv();
  seedSet(env, newCocoonSet("demo", withFinalizer), [foreignPod("demo-0")]);
  env.fake.actions.length = 0;
  const pass = newTestPass(depsOf(env), (await findSet(env.fake, "demo"))!);

  const stopped = await settleMainCreateClash(pass, "Waking", 5_000);

  assert.ok(stopped.stop && "error" in stopped, "a stop with an error, not a thrown one");
  assert.equal(stopped.phase, "Waking");
  assert.ok(stopped.error instanceof NameConflictError);
  assert.deepEqual(pass.problems.map((p) => p.reason), [REASON_NAME_CONFLICT]);
  assert.equal(env.recorder.withReason(REASON_NAME_CONFLICT).length, 1, "its Warning");
  assert.deepEqual(actionsOf(env, "patch", CocoonSets), [], "the check wrote no status");
});
