import assert from "node:assert/strict";
import { Manager, Pods } from "../kube/mod.ts";
import { FakeClient, waitFor } from "../kube/testing/mod.ts";
import { CocoonHibernations, CocoonSets } from "../common/apis/v1/resources.ts";
import { readRestoreFromHibernate } from "../common/meta/mod.ts";
import { FakeRegistry } from "../snapshot/testing/fake.ts";
import {
  actionsOf,
  findSet,
  getPod,
  hibernationLists,
  newCocoonSet,
  newHibernation,
  newTestEnv,
  readyPod,
  reconcileSet,
  seedSet,
  TEST_NAMESPACE,
  withFinalizer,
} from "./_test_support.ts";
import { buildAgentPod, buildToolboxPod } from "./pods.ts";
import { setupCocoonSetController } from "./reconciler.ts";
import { HIBERNATE_SNAPSHOT_TAG } from "../snapshot/registry.ts";

// ---------------------------------------------------------------------------------------------
// Ports of the Go original's cocoonset/restore_intent_test.go.
// ---------------------------------------------------------------------------------------------

Deno.test("a steady pass with every pod present never lists CocoonHibernations", async () => {
  const env = newTestEnv();
  const cs = newCocoonSet("demo", (c) => {
    withFinalizer(c);
    c.spec.agent.replicas = 1;
    c.spec.toolboxes = [{ name: "tb", image: "img", mode: "run" }];
  });
  const main = readyPod(buildAgentPod(cs, 0));
  main.spec!.nodeName = "node-a";
  seedSet(env, cs, [
    main,
    readyPod(buildAgentPod(cs, 1, "vk-ns-demo-0", "node-a")),
    readyPod(buildToolboxPod(cs, cs.spec.toolboxes![0])),
  ]);

  assert.deepEqual(await reconcileSet(env, "demo"), {});

  // The pass really ran to its end: nothing was deleted and the set reads Running.
  assert.equal(actionsOf(env, "delete", Pods).length, 0);
  assert.equal((await findSet(env.fake, "demo"))?.status?.phase, "Running");
  assert.equal(hibernationLists(env), 0);
});

Deno.test("a pass creating several missing pods lists CocoonHibernations exactly once", async () => {
  const env = newTestEnv();
  const cs = newCocoonSet("demo", (c) => {
    withFinalizer(c);
    c.spec.agent.replicas = 2;
    c.spec.toolboxes = [{ name: "tb", image: "img", mode: "run" }];
  });
  const main = readyPod(buildAgentPod(cs, 0));
  main.spec!.nodeName = "node-a";
  seedSet(env, cs, [main]);

  assert.deepEqual(await reconcileSet(env, "demo"), { requeue: true });

  assert.equal(hibernationLists(env), 1);
  for (const name of ["demo-1", "demo-2", "demo-tb"]) {
    assert.ok(await getPod(env.fake, name), `${name} created`);
  }
});

Deno.test("a CocoonSet whose registry probe hangs does not hold up an unrelated one (concurrency 2)", async () => {
  const fake = new FakeClient();
  const registry = new FakeRegistry();
  let release = () => {};
  const gate = new Promise<void>((resolve) => release = resolve);
  registry.setLatency((call) => call.name === "vk-ns-blocked-0" ? gate : Promise.resolve());
  // Each set must create its main, and a Hibernated CR names it: the create probes the registry.
  const seedRestorableSet = (name: string) => {
    fake.seed(
      CocoonSets,
      newCocoonSet(name, withFinalizer, (c) => {
        c.metadata.uid = `uid-${name}`;
      }),
    );
    fake.seed(CocoonHibernations, newHibernation(`${name}-0`, "Hibernate", "Hibernated"));
  };
  seedRestorableSet("blocked");
  const mgr = new Manager({
    client: fake,
    metricsBindAddress: "0",
    healthProbeBindAddress: "127.0.0.1:0",
    leaderElection: false,
    leaderElectionId: "x",
  });
  setupCocoonSetController(mgr, { registry, concurrency: 2 });
  const stop = new AbortController();
  const run = mgr.start(stop.signal);
  try {
    // Only once the probe is really wedged can the other set prove it was not serialised.
    await waitFor(
      "the blocked set's probe to hang",
      () => registry.inFlight("vk-ns-blocked-0") === 1,
    );
    seedRestorableSet("free");

    await waitFor(
      "the free set's main",
      async () =>
        (await fake.list(Pods, { namespace: TEST_NAMESPACE })).items
          .some((p) => p.metadata.name === "free-0"),
    );

    assert.equal(registry.inFlight("vk-ns-blocked-0"), 1, "still hanging");
    const names = (await fake.list(Pods, { namespace: TEST_NAMESPACE })).items.map((p) =>
      p.metadata.name
    );
    assert.deepEqual(names, ["free-0"]);

    release();
    await waitFor(
      "the blocked set's main once released",
      async () =>
        (await fake.list(Pods, { namespace: TEST_NAMESPACE })).items
          .some((p) => p.metadata.name === "blocked-0"),
    );
  } finally {
    release();
    stop.abort();
    await run;
  }
});

// ---------------------------------------------------------------------------------------------
// Restore intent in the normal flow, end to end through a pass.
// ---------------------------------------------------------------------------------------------

Deno.test("a missing main whose CR is Hibernated is recreated restoring from its snapshot", async () => {
  const env = newTestEnv();
  seedSet(env, newCocoonSet("demo", withFinalizer));
  env.fake.seed(CocoonHibernations, newHibernation("demo-0", "Hibernate", "Hibernated"));
  env.registry.put("vk-ns-demo-0", HIBERNATE_SNAPSHOT_TAG);

  assert.deepEqual(await reconcileSet(env, "demo"), { requeue: true });

  assert.equal(readRestoreFromHibernate((await getPod(env.fake, "demo-0"))!), true);
});

Deno.test("a missing sub-agent whose CR is Waking is recreated restoring, whatever its desire", async () => {
  const env = newTestEnv();
  const cs = newCocoonSet("demo", (c) => {
    withFinalizer(c);
    c.spec.agent.replicas = 2;
  });
  const main = readyPod(buildAgentPod(cs, 0));
  main.spec!.nodeName = "node-a";
  seedSet(env, cs, [main]);
  env.fake.seed(CocoonHibernations, newHibernation("demo-1", "Wake", "Waking"));
  env.registry.put("vk-ns-demo-1", HIBERNATE_SNAPSHOT_TAG);
  env.registry.put("vk-ns-demo-2", HIBERNATE_SNAPSHOT_TAG); // no CR names demo-2

  await reconcileSet(env, "demo");

  assert.equal(readRestoreFromHibernate((await getPod(env.fake, "demo-1"))!), true);
  assert.equal(readRestoreFromHibernate((await getPod(env.fake, "demo-2"))!), false);
  assert.equal(env.registry.callsOf("hasManifest", "vk-ns-demo-2").length, 0);
});

Deno.test("a snapshot tag without a Hibernated or Waking CR is ignored: the main boots fresh", async () => {
  const env = newTestEnv();
  seedSet(env, newCocoonSet("demo", withFinalizer));
  env.fake.seed(CocoonHibernations, newHibernation("demo-0", "Hibernate", "Active"));
  env.registry.put("vk-ns-demo-0", HIBERNATE_SNAPSHOT_TAG);

  await reconcileSet(env, "demo");

  assert.equal(readRestoreFromHibernate((await getPod(env.fake, "demo-0"))!), false);
  assert.equal(env.registry.calls.length, 0);
});

Deno.test("a registry probe error blocks the create instead of booting fresh", async () => {
  const env = newTestEnv();
  seedSet(env, newCocoonSet("demo", withFinalizer));
  env.fake.seed(CocoonHibernations, newHibernation("demo-0", "Hibernate", "Hibernated"));
  env.registry.failNext("hasManifest", new Error("registry unreachable"));

  await assert.rejects(reconcileSet(env, "demo"), /registry unreachable/);

  assert.equal(actionsOf(env, "create", Pods).length, 0);
  assert.equal(await getPod(env.fake, "demo-0"), undefined);
});
