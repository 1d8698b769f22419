/**
 * What holds a create back: a VM name another namespace holds (`team` / `x-prod-0` and `team-x` /
 * `prod-0` both make `vk-team-x-prod-0`), a ResourceQuota, a pod name a foreign pod holds.
 */
import assert from "node:assert/strict";
import type { CocoonSet } from "../common/apis/v1/cocoonset_types.ts";
import { CocoonSets } from "../common/apis/v1/resources.ts";
import { CONDITION_TYPE_READY } from "../common/k8s/condition.ts";
import { parseVMSpec } from "../common/meta/mod.ts";
import { isNotFound, newApiError, type Pod, Pods } from "../kube/mod.ts";
import {
  actionsOf,
  conditionOf,
  depsOf,
  findSet,
  getPod,
  livePod,
  newCocoonSet,
  newTestEnv,
  newTestPass,
  podSeed,
  readyPod,
  reconcileSet,
  seedSet,
  setSeed,
  TEST_NAMESPACE,
  type TestEnv,
  withFinalizer,
} from "./_test_support.ts";
import {
  createMainPod,
  NameConflictError,
  QuotaExceededError,
  quotaRefusal,
  REASON_NAME_CONFLICT,
  REASON_QUOTA_EXCEEDED,
  REASON_VM_NAME_CONFLICT,
} from "./create.ts";
import { buildAgentPod } from "./pods.ts";
import { confirmDeletes, liveSet, refuseCreates } from "./_hardening_test_support.ts";
import { REASON_INVALID_SPEC } from "./validate.ts";

function setIn(
  ns: string,
  name: string,
  created: string,
  ...mods: ((cs: CocoonSet) => void)[]
): CocoonSet {
  return newCocoonSet(name, withFinalizer, (cs) => {
    cs.metadata.namespace = ns;
    cs.metadata.uid = `uid-${ns}-${name}`;
    cs.metadata.creationTimestamp = created;
  }, ...mods);
}

async function podIn(env: TestEnv, ns: string, name: string): Promise<Pod | undefined> {
  try {
    return await env.fake.get(Pods, ns, name);
  } catch (err) {
    if (isNotFound(err)) return undefined;
    throw err;
  }
}

async function pass(env: TestEnv, ns: string, name: string): Promise<void> {
  await env.reconciler.reconcile({ namespace: ns, name }, new AbortController().signal);
}

Deno.test("vm name collision: the second comer's main is not created; Ready=False and a Warning name both", async () => {
  const env = newTestEnv();
  env.fake.seed(CocoonSets, setIn("team", "x-prod", "2026-05-14T00:00:00Z"));
  env.fake.seed(CocoonSets, setIn("team-x", "prod", "2026-05-14T00:01:00Z"));
  // The second comer's pass first, before the first comer has any pod: the set alone holds it.
  for (let i = 0; i < 3; i++) await pass(env, "team-x", "prod");
  for (let i = 0; i < 3; i++) await pass(env, "team", "x-prod");
  const first = await podIn(env, "team", "x-prod-0");
  assert.equal(first !== undefined && parseVMSpec(first).vmName, "vk-team-x-prod-0");
  assert.equal(await podIn(env, "team-x", "prod-0"), undefined, "no second VM under the name");
  const loser = await env.fake.get(CocoonSets, "team-x", "prod");
  const ready = conditionOf(loser, CONDITION_TYPE_READY);
  assert.equal(ready?.status, "False");
  assert.equal(ready?.reason, REASON_VM_NAME_CONFLICT);
  const warnings = env.recorder.withReason(REASON_VM_NAME_CONFLICT);
  assert.ok(warnings.length > 0);
  assert.equal(warnings[0].type, "Warning");
  assert.match(warnings[0].message, /vk-team-x-prod-0/);
  assert.match(warnings[0].message, /CocoonSet team\/x-prod/);
  assert.match(warnings[0].message, /team-x\/prod/);
});

Deno.test("vm name collision: only the colliding toolbox is refused, the rest of the set converges", async () => {
  const env = newTestEnv();
  // team-x/prod came first and runs vk-team-x-prod-0; team/x's toolbox prod-0 derives it too.
  env.fake.seed(CocoonSets, setIn("team-x", "prod", "2026-05-14T00:00:00Z"));
  for (let i = 0; i < 3; i++) await pass(env, "team-x", "prod");
  assert.ok(await podIn(env, "team-x", "prod-0"));
  env.fake.seed(
    CocoonSets,
    setIn("team", "x", "2026-05-14T00:01:00Z", (cs) => {
      cs.spec.toolboxes = [{ name: "prod-0", image: "img" }, { name: "db", image: "img" }];
    }),
  );
  await pass(env, "team", "x");
  const main = await podIn(env, "team", "x-0");
  assert.ok(main, "the main of the second comer is created");
  // vk-cocoon runs it (seed keeps the status, as vk-cocoon's status write would).
  env.fake.seed(Pods, livePod(main));
  for (let i = 0; i < 4; i++) await pass(env, "team", "x");
  assert.ok(await podIn(env, "team", "x-db"), "its other toolbox too");
  assert.equal(await podIn(env, "team", "x-prod-0"), undefined);
  const warnings = env.recorder.withReason(REASON_VM_NAME_CONFLICT);
  assert.ok(
    warnings.some((w) => /toolbox prod-0/.test(w.message) && /pod team-x\/prod-0/.test(w.message)),
  );
});

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

  const opts = { phase: "Waking", context: "create main" } as const;
  const stopped = await createMainPod(pass, buildAgentPod(pass.cs, 0), opts);

  assert.ok(stopped.stop && "error" in stopped, "a stop with an error, not a thrown one");
  assert.equal(stopped.phase, "Waking");
  assert.ok(stopped.error instanceof NameConflictError);
  assert.deepEqual(pass.problems.map((p) => p.reason), [REASON_NAME_CONFLICT]);
  assert.equal(env.recorder.withReason(REASON_NAME_CONFLICT).length, 1, "its Warning");
  assert.deepEqual(actionsOf(env, "patch", CocoonSets), [], "the step wrote no status");
});

Deno.test("quotaRefusal reads the quota names from the server's message, and only from a 403", () => {
  const target = { resource: "pods", namespace: "ns", name: "p" };
  const msg = 'pods "p" is forbidden: exceeded quota: q1, requested: pods=1, used: pods=3, ' +
    "limited: pods=3";
  assert.deepEqual(quotaRefusal(newApiError(403, "Forbidden", target, msg))?.quotas, ["q1"]);
  assert.equal(quotaRefusal(newApiError(403, "Forbidden", target, "RBAC says no")), undefined);
  assert.equal(quotaRefusal(newApiError(422, "Invalid", target, msg)), undefined);
});

Deno.test("a drifted toolbox in a namespace at its quota: replaced delete-then-create, the refused create is QuotaExceeded naming the quota", async () => {
  const { cs, pods } = liveSet("q", { toolboxes: ["tb"], liveToolboxes: ["tb"] });
  const env = newTestEnv([setSeed(cs), ...pods.map(podSeed)]);
  assert.deepEqual(await reconcileSet(env, "q"), {});

  await env.fake.patch(CocoonSets, TEST_NAMESPACE, "q", "merge", {
    spec: { toolboxes: [{ name: "tb", image: "img:2" }] },
  });
  refuseCreates(env, "q-tb", "quota");

  // The dry-run's 403 is no verdict on the shape: the old toolbox goes, freeing its quota.
  assert.deepEqual(await reconcileSet(env, "q"), { requeue: true });
  assert.equal(actionsOf(env, "delete", Pods, "q-tb").length, 1);
  assert.equal(env.recorder.withReason(REASON_INVALID_SPEC).length, 0, "not an invalid spec");
  await confirmDeletes(env);

  // Still full (something else took the place): the create is refused and said so.
  await assert.rejects(reconcileSet(env, "q"), QuotaExceededError);
  const ready = conditionOf(await findSet(env.fake, "q"), "Ready");
  assert.deepEqual([ready?.status, ready?.reason], ["False", REASON_QUOTA_EXCEEDED]);
  assert.match(ready?.message ?? "", /^toolbox tb: ResourceQuota q1 of namespace ns: .*exceeded/);
  const warnings = env.recorder.withReason(REASON_QUOTA_EXCEEDED);
  assert.deepEqual(warnings.map((w) => w.type), ["Warning"]);
  assert.match(warnings[0].message, /ResourceQuota q1/);
});

Deno.test("a main the quota refuses: QuotaExceeded on the status, retried with backoff", async () => {
  const { cs } = liveSet("qm", {});
  const env = newTestEnv([setSeed(cs)]);
  refuseCreates(env, "qm-0", "quota", { realOnly: true });

  await assert.rejects(reconcileSet(env, "qm"), QuotaExceededError);
  const ready = conditionOf(await findSet(env.fake, "qm"), "Ready");
  assert.equal(ready?.reason, REASON_QUOTA_EXCEEDED);
  assert.match(ready?.message ?? "", /^the main agent: ResourceQuota q1/);
});

Deno.test("sub-agents the quota refuses: the ones it admits are created, one Warning per quota and pass", async () => {
  const { cs, pods } = liveSet("qs", { replicas: 3 });
  const env = newTestEnv([setSeed(cs), ...pods.map(podSeed)]);
  refuseCreates(env, "qs-2", "quota", { realOnly: true });
  refuseCreates(env, "qs-3", "quota", { realOnly: true });

  assert.deepEqual(await reconcileSet(env, "qs"), { requeue: true }, "slot 1 was created");
  assert.ok(await env.fake.get(Pods, TEST_NAMESPACE, "qs-1"));
  assert.equal(env.recorder.withReason(REASON_QUOTA_EXCEEDED).length, 1);
});
