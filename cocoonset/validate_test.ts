import assert from "node:assert/strict";
import { newApiError, Pods } from "../kube/mod.ts";
import type { FakeAction } from "../kube/testing/mod.ts";
import { CocoonSets } from "../common/apis/v1/resources.ts";
import {
  actionsOf,
  conditionOf,
  depsOf,
  findSet,
  getPod,
  lifecycleFailed,
  livePod,
  newCocoonSet,
  newTestEnv,
  newTestPass,
  podSeed,
  reconcilerWith,
  reconcileSet,
  seedSet,
  setSeed,
  TEST_NAMESPACE,
  type TestEnv,
  withFinalizer,
} from "./_test_support.ts";
import { readHibernateState } from "../common/meta/mod.ts";
import { confirmDeletes, livePodNames, liveSet, makeAllLive } from "./_hardening_test_support.ts";
import { ANNOTATION_REBUILD_HISTORY } from "./rebuild.ts";
import { buildAgentPod, buildToolboxPod } from "./pods.ts";
import {
  ensureSpecBuildable,
  InvalidSpecError,
  REASON_INVALID_SPEC,
  shapeKey,
} from "./validate.ts";
import type { CocoonSet } from "../common/apis/v1/cocoonset_types.ts";

const REFUSAL = 'Pod "demo-0" is invalid: spec.containers[0].resources.limits: Invalid value';

/** Makes the fake refuse every (dry-run or real) create of pod `name` as invalid. */
function refuseCreatesOf(env: TestEnv, name: string): () => void {
  return env.fake.addReactor((a: FakeAction) =>
    a.verb === "create" && a.resource === Pods && a.name === name
      ? newApiError(422, "Invalid", { resource: "pods", namespace: a.namespace, name }, REFUSAL)
      : undefined
  );
}

function dryRuns(env: TestEnv): FakeAction[] {
  return env.fake.actions.filter((a) => a.verb === "create" && a.dryRun);
}

Deno.test("a spec whose main the server refuses: Ready=False InvalidSpec with the server's message, a Warning, nothing stored, retried", async () => {
  const env = newTestEnv();
  seedSet(
    env,
    newCocoonSet("demo", withFinalizer, (c) => {
      c.status = { phase: "Running", readyAgents: 0, desiredAgents: 1 };
    }),
  );
  refuseCreatesOf(env, "demo-0");

  await assert.rejects(reconcileSet(env, "demo"), InvalidSpecError);

  // A main-only set: the main's real create is its check, so no dry run precedes it.
  assert.equal(dryRuns(env).length, 0);
  assert.equal(await getPod(env.fake, "demo-0"), undefined, "nothing was stored");
  const stored = await findSet(env.fake, "demo");
  const ready = conditionOf(stored, "Ready");
  assert.deepEqual([ready?.status, ready?.reason], ["False", REASON_INVALID_SPEC]);
  assert.equal(ready?.message, `main agent: ${REFUSAL}`);
  assert.equal(stored?.status?.phase, "Running", "the stored phase is kept");
  const warnings = env.recorder.withReason(REASON_INVALID_SPEC);
  assert.deepEqual(warnings.map((w) => [w.type, w.message]), [["Warning", ready?.message]]);

  await assert.rejects(reconcileSet(env, "demo"), InvalidSpecError, "retried, refused again");
});

Deno.test("a sub-agent shape the server refuses blocks only the sub-agents: the main is created", async () => {
  const env = newTestEnv();
  seedSet(
    env,
    newCocoonSet("demo", withFinalizer, (c) => {
      c.spec.agent.replicas = 2;
    }),
  );
  refuseCreatesOf(env, "demo-2");

  await assert.rejects(reconcileSet(env, "demo"), InvalidSpecError);

  assert.deepEqual(dryRuns(env).map((a) => a.name), ["demo-2"], "the highest slot is checked");
  // A refused part blocks only the pods built from it: the main is created.
  assert.deepEqual(
    actionsOf(env, "create", Pods).filter((a) => !a.dryRun).map((a) => a.name),
    ["demo-0"],
    "the main is created, no sub-agent",
  );
  const ready = conditionOf(await findSet(env.fake, "demo"), "Ready");
  assert.deepEqual([ready?.status, ready?.reason], ["False", REASON_INVALID_SPEC]);
  assert.match(ready?.message ?? "", /^sub-agent slot 2: /);
});

Deno.test("a generation is dry-run checked once; a spec edit is checked again and then created", async () => {
  const env = newTestEnv();
  seedSet(
    env,
    newCocoonSet("demo", withFinalizer, (c) => {
      c.spec.agent.replicas = 1;
    }),
  );
  const allow = refuseCreatesOf(env, "demo-1");
  await assert.rejects(reconcileSet(env, "demo"), InvalidSpecError);
  // The refused sub-agent shape does not hold the main back; start from no main.
  await env.fake.delete(Pods, TEST_NAMESPACE, "demo-0");

  // The person fixes the spec: a new generation.
  allow();
  const cs = await findSet(env.fake, "demo");
  cs!.spec.agent.image = "ghcr.io/cocoonstack/cocoon/ubuntu:26.04";
  await env.fake.update(CocoonSets, cs!);
  const before = dryRuns(env).length;

  assert.deepEqual(await reconcileSet(env, "demo"), { requeue: true });
  assert.ok(await getPod(env.fake, "demo-0"), "the main is created once the spec is valid");
  assert.equal(dryRuns(env).length, before + 1, "the sub-agent shape is dry-run first");

  // The main's create checked its own shape: the generation is checked, nothing is dry-run again.
  await env.fake.delete(Pods, TEST_NAMESPACE, "demo-0");
  assert.deepEqual(await reconcileSet(env, "demo"), { requeue: true });
  assert.equal(dryRuns(env).length, before + 1);
});

Deno.test("a dry run that meets an existing pod of that name counts as valid", async () => {
  const env = newTestEnv();
  const cs = newCocoonSet("demo", withFinalizer, (c) => {
    c.spec.toolboxes = [{ name: "tb", image: "img" }];
  });
  // Something else already holds the toolbox name; the shape itself is fine.
  seedSet(env, cs, [{
    metadata: { name: "demo-tb", namespace: TEST_NAMESPACE },
    spec: { containers: [{ name: "c", image: "x" }] },
  }]);

  assert.deepEqual(await reconcileSet(env, "demo"), { requeue: true });
  assert.ok(await getPod(env.fake, "demo-0"));
  assert.equal(env.recorder.withReason(REASON_INVALID_SPEC).length, 0);
});

Deno.test("an edit no pod can be built from leaves the running main in place: InvalidSpec, no drift delete", async () => {
  const env = newTestEnv();
  const cs = newCocoonSet("demo", withFinalizer, (c) => c.metadata.generation = 1);
  seedSet(env, cs, [livePod(buildAgentPod(cs, 0))]);
  assert.deepEqual(await reconcileSet(env, "demo"), {});
  assert.equal((await findSet(env.fake, "demo"))?.status?.phase, "Running");

  // The edit drifts the main, and the server refuses its new shape.
  await env.fake.patch(CocoonSets, TEST_NAMESPACE, "demo", "merge", {
    spec: { agent: { image: "ghcr.io/cocoonstack/cocoon/ubuntu:26.04" } },
  });
  refuseCreatesOf(env, "demo-0");
  env.fake.actions.length = 0;

  await assert.rejects(reconcileSet(env, "demo"), InvalidSpecError);

  assert.equal(actionsOf(env, "delete", Pods).length, 0, "the running main is not deleted");
  assert.equal((await getPod(env.fake, "demo-0"))?.metadata.deletionTimestamp, undefined);
  const ready = conditionOf(await findSet(env.fake, "demo"), "Ready");
  assert.deepEqual([ready?.status, ready?.reason], ["False", REASON_INVALID_SPEC]);
  assert.equal(ready?.message, `main agent: ${REFUSAL}`);
});

Deno.test("an edit that drifts a toolbox into a shape the server refuses keeps the toolbox", async () => {
  const env = newTestEnv();
  const cs = newCocoonSet("demo", withFinalizer, (c) => {
    c.metadata.generation = 1;
    c.spec.toolboxes = [{ name: "tb", image: "img:1" }];
  });
  seedSet(env, cs, [
    livePod(buildAgentPod(cs, 0)),
    livePod(buildToolboxPod(cs, cs.spec.toolboxes![0])),
  ]);
  assert.deepEqual(await reconcileSet(env, "demo"), {});

  await env.fake.patch(CocoonSets, TEST_NAMESPACE, "demo", "merge", {
    spec: { toolboxes: [{ name: "tb", image: "img:2" }] },
  });
  refuseCreatesOf(env, "demo-tb");
  env.fake.actions.length = 0;

  await assert.rejects(reconcileSet(env, "demo"), InvalidSpecError);

  assert.equal(actionsOf(env, "delete", Pods).length, 0, "the toolbox is not deleted");
  const ready = conditionOf(await findSet(env.fake, "demo"), "Ready");
  assert.deepEqual([ready?.status, ready?.reason], ["False", REASON_INVALID_SPEC]);
  assert.match(ready?.message ?? "", /^toolbox tb: /);
});

Deno.test("a migration does not start toward a spec no pod can be built from", async () => {
  const env = newTestEnv();
  const cs = newCocoonSet("demo", withFinalizer, (c) => c.metadata.generation = 1);
  seedSet(env, cs, [livePod(buildAgentPod(cs, 0), "node-a")]);
  assert.deepEqual(await reconcileSet(env, "demo"), {});

  // Pinned elsewhere, with resources the server refuses: the main would be quiesced, deleted and
  // then never recreated.
  await env.fake.patch(CocoonSets, TEST_NAMESPACE, "demo", "merge", {
    spec: { nodeName: "node-b", agent: { image: "ghcr.io/cocoonstack/cocoon/ubuntu:26.04" } },
  });
  refuseCreatesOf(env, "demo-0");
  env.fake.actions.length = 0;

  await assert.rejects(reconcileSet(env, "demo"), InvalidSpecError);

  const main = await getPod(env.fake, "demo-0");
  assert.equal(readHibernateState(main!), false, "the main is not asked to hibernate");
  const stored = await findSet(env.fake, "demo");
  assert.equal(stored?.status?.phase, "Running", "no Migrating");
  assert.equal(conditionOf(stored, "Ready")?.reason, REASON_INVALID_SPEC);
});

Deno.test("a toolbox the server refuses blocks only itself: main, sub-agents and the valid toolbox are created, the status names it", async () => {
  const env = newTestEnv();
  seedSet(
    env,
    newCocoonSet("demo", withFinalizer, (c) => {
      c.spec.agent.replicas = 2;
      c.spec.toolboxes = [{ name: "good", image: "img" }, { name: "bad", image: "img" }];
    }),
  );
  refuseCreatesOf(env, "demo-bad");

  // The main comes up although a toolbox is refused; the pass is retried with backoff.
  await assert.rejects(reconcileSet(env, "demo"), InvalidSpecError);
  assert.ok(await getPod(env.fake, "demo-0"), "the main is created");
  await makeAllLive(env);
  assert.deepEqual(await reconcileSet(env, "demo"), { requeue: true });
  await makeAllLive(env);
  await assert.rejects(reconcileSet(env, "demo"), InvalidSpecError);

  assert.deepEqual(await livePodNames(env), ["demo-0", "demo-1", "demo-2", "demo-good"]);
  const stored = await findSet(env.fake, "demo");
  const ready = conditionOf(stored, "Ready");
  assert.deepEqual([ready?.status, ready?.reason], ["False", REASON_INVALID_SPEC]);
  assert.equal(ready?.message, `toolbox bad: ${REFUSAL}`);
  assert.deepEqual(
    [stored?.status?.readyAgents, stored?.status?.readyToolboxes],
    [3, 1],
    "the status is current",
  );
  const warnings = env.recorder.withReason(REASON_INVALID_SPEC);
  assert.ok(warnings.length > 0 && warnings.every((w) => w.message === `toolbox bad: ${REFUSAL}`));

  // A main that is lost (kubectl delete pod) is recreated while the toolbox stays refused.
  await env.fake.delete(Pods, TEST_NAMESPACE, "demo-0", { gracePeriodSeconds: 0 });
  await assert.rejects(reconcileSet(env, "demo"), InvalidSpecError);
  assert.ok(await getPod(env.fake, "demo-0"), "the lost main is recreated");
});

Deno.test("a failed sub-agent is rebuilt and recreated while a toolbox is refused", async () => {
  const { cs, pods } = liveSet("rb", { replicas: 1, liveSlots: [1], toolboxes: ["bad"] });
  lifecycleFailed(pods[1]);
  const env = newTestEnv([setSeed(cs), ...pods.map(podSeed)]);
  refuseCreatesOf(env, "rb-bad");

  assert.deepEqual(await reconcileSet(env, "rb"), { requeue: true }, "deleted for its rebuild");
  await confirmDeletes(env);
  assert.deepEqual(await reconcileSet(env, "rb"), { requeue: true }, "and recreated");
  assert.deepEqual(await livePodNames(env), ["rb-0", "rb-1"]);
});

Deno.test("a rebuild never deletes a pod it cannot recreate: a failed sub-agent whose shape is refused stays", async () => {
  const { cs, pods } = liveSet("keep", { replicas: 1, liveSlots: [1] });
  lifecycleFailed(pods[1]);
  const env = newTestEnv([setSeed(cs), ...pods.map(podSeed)]);
  refuseCreatesOf(env, "keep-1");

  await assert.rejects(reconcileSet(env, "keep"), InvalidSpecError);
  assert.equal(actionsOf(env, "delete", Pods).length, 0, "no delete");
  const stored = await findSet(env.fake, "keep");
  assert.equal(
    stored?.metadata.annotations?.[ANNOTATION_REBUILD_HISTORY],
    undefined,
    "budget kept",
  );
  const ready = conditionOf(stored, "Ready");
  assert.equal(ready?.reason, REASON_INVALID_SPEC);
  assert.match(ready?.message ?? "", /^sub-agent slot 1: /);
});

Deno.test("the spec check reports an unbuildable main and writes nothing: the pass writes the status", async () => {
  const env = newTestEnv();
  const cs = newCocoonSet("demo", withFinalizer, (c) => {
    c.status = { phase: "Migrating" };
  });
  seedSet(env, cs);
  refuseCreatesOf(env, "demo-0");
  env.fake.actions.length = 0;
  const pass = newTestPass(depsOf(env), (await findSet(env.fake, "demo"))!);

  const stopped = await ensureSpecBuildable(pass);

  assert.ok(stopped.stop && "error" in stopped, "a stop with an error, not a thrown one");
  assert.equal(stopped.phase, "Migrating", "the phase the status keeps");
  assert.ok(stopped.error instanceof InvalidSpecError);
  assert.equal(stopped.error.message, `main agent: ${REFUSAL}`);
  assert.deepEqual(pass.problems.map((p) => p.reason), [REASON_INVALID_SPEC]);
  assert.equal(env.recorder.withReason(REASON_INVALID_SPEC).length, 1, "its Warning");
  assert.deepEqual(actionsOf(env, "patch", CocoonSets), [], "the check wrote no status");
});

/**
 * Five sets of one spec (main, two sub-agents, a toolbox; a UID each), converged by the first
 * reconciler of env: created, made live and reconciled until Running.
 */
async function convergeFiveSets(env: TestEnv): Promise<string[]> {
  const names = ["s1", "s2", "s3", "s4", "s5"];
  for (const name of names) {
    seedSet(
      env,
      newCocoonSet(name, withFinalizer, (c) => {
        c.metadata.uid = `uid-${name}`;
        c.spec.agent.replicas = 2;
        c.spec.toolboxes = [{ name: "tb", image: "img" }];
      }),
    );
  }
  for (let round = 0; round < 4; round++) {
    for (const name of names) await reconcileSet(env, name);
    await makeAllLive(env);
  }
  for (const name of names) {
    assert.equal((await findSet(env.fake, name))?.status?.phase, "Running", name);
  }
  return names;
}

Deno.test("a restarted operator dry-runs nothing for converged sets whose spec did not change", async () => {
  const env = newTestEnv();
  const names = await convergeFiveSets(env);
  assert.ok(dryRuns(env).length > 0, "the first process checked the shapes");

  // A fresh process: a reconciler with none of the first one's memory, on the same server.
  env.fake.actions.length = 0;
  const restarted = reconcilerWith(env, env.fake);
  for (const name of names) {
    await restarted.reconcile({ namespace: TEST_NAMESPACE, name }, new AbortController().signal);
  }
  assert.deepEqual(dryRuns(env), [], "nothing about to be created or replaced: no check");
  assert.deepEqual(
    env.fake.actions.filter((a) => a.verb !== "get" && a.verb !== "list"),
    [],
    "and no write at all",
  );

  // An edit after the restart is checked before its pods are made.
  await env.fake.patch(CocoonSets, TEST_NAMESPACE, "s1", "merge", {
    spec: { agent: { replicas: 3 } },
  });
  await restarted.reconcile(
    { namespace: TEST_NAMESPACE, name: "s1" },
    new AbortController().signal,
  );
  // The new generation's shapes are checked (the edited sub-agent shape among them).
  assert.ok(dryRuns(env).some((a) => a.name === "s1-3"), "the new shape is dry-run");
  assert.ok(await getPod(env.fake, "s1-3"), "then created");
});

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
