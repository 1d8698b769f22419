/**
 * Empty pools and the node watch: an Unschedulable main in a pool without any node gets a
 * NoNodesInPool Warning naming the pool (the Go operator said nothing, and the scheduler's
 * message does not say the pool is empty); node arrival, departure and relabelling wake exactly
 * the sets whose spec.nodeName names the node.
 */
import assert from "node:assert/strict";
import { type CoreEvent, Events, Manager, type Node, Nodes, type Pod, Pods } from "../kube/mod.ts";
import { FakeClient, waitFor } from "../kube/testing/mod.ts";
import { CocoonSets } from "../common/apis/v1/resources.ts";
import type { CocoonSet } from "../common/apis/v1/cocoonset_types.ts";
import {
  ANNOTATION_HIBERNATED_ON_NODE,
  markRestoreFromHibernate,
  readHibernateState,
} from "../common/meta/mod.ts";
import { FakeRegistry } from "../snapshot/testing/fake.ts";
import {
  depsOf,
  newCocoonSet,
  newTestEnv,
  newTestPass,
  poolNode,
  reconcileSet,
  runStep,
  type TestEnv,
  withFinalizer,
} from "./_test_support.ts";
import { mainPod, mainVMName, seatSet } from "./_seats_test_support.ts";
import {
  NODE_NAME_INDEX,
  nodeNameIndexValues,
  nodePlacementEvents,
  setsTargetingNode,
} from "./predicate.ts";
import { REASON_MIGRATION_TARGET_UNKNOWN, REASON_NO_NODES_IN_POOL } from "./nodes.ts";
import { buildAgentPod } from "./pods.ts";
import { setupCocoonSetController } from "./reconciler.ts";
import { REASON_WAKE_NO_CAPACITY, reconcileReleasedWake } from "./seat_release.ts";
import { HIBERNATE_SNAPSHOT_TAG } from "../snapshot/registry.ts";
import { goOriginalRules } from "../tests/fixtures/go_original_rbac.ts";

const UNSCHEDULABLE =
  "0/2 nodes are available: 2 node(s) didn't match Pod's node affinity/selector.";

function markUnschedulable(pod: Pod): Pod {
  pod.status = {
    phase: "Pending",
    conditions: [{
      type: "PodScheduled",
      status: "False",
      reason: "Unschedulable",
      message: UNSCHEDULABLE,
    }],
  };
  return pod;
}

function noNodesEvents(env: TestEnv) {
  return env.recorder.withReason(REASON_NO_NODES_IN_POOL);
}

Deno.test("an Unschedulable main in a pool without nodes: NoNodesInPool Warning naming the pool", async () => {
  const env = newTestEnv(); // node-a…node-c, all in pool "default"
  const cs = env.fake.seed(
    CocoonSets,
    newCocoonSet("demo", withFinalizer, (c) => c.spec.nodePool = "gpu"),
  );
  env.fake.seed(Pods, markUnschedulable(buildAgentPod(cs, 0)));

  assert.deepEqual(await reconcileSet(env, "demo"), { requeueAfter: 5_000 });

  const [event] = noNodesEvents(env);
  assert.equal(event?.type, "Warning");
  assert.equal(
    event.message,
    "no node carries cocoonstack.io/pool=gpu: pod ns/demo-0 stays Unschedulable until one " +
      "joins the pool",
  );
  assert.equal(event.object.metadata.name, "demo");
});

Deno.test("an Unschedulable main in a pool that has nodes gets no NoNodesInPool (a seat may free up)", async () => {
  const env = newTestEnv();
  const cs = env.fake.seed(CocoonSets, newCocoonSet("demo", withFinalizer));
  env.fake.seed(Pods, markUnschedulable(buildAgentPod(cs, 0)));

  await reconcileSet(env, "demo");

  assert.deepEqual(noNodesEvents(env), []);
});

Deno.test("a main merely pending in an empty pool gets no NoNodesInPool before the scheduler says so", async () => {
  const env = newTestEnv([], undefined, { nodes: [] });
  const cs = env.fake.seed(CocoonSets, newCocoonSet("demo", withFinalizer));
  env.fake.seed(Pods, buildAgentPod(cs, 0));

  await reconcileSet(env, "demo");

  assert.deepEqual(noNodesEvents(env), []);
});

Deno.test("a released wake into an empty pool reports NoNodesInPool next to WakeNoCapacity", async () => {
  const env = newTestEnv([], undefined, { nodes: [poolNode("node-a", "other")] });
  env.registry.put(mainVMName, HIBERNATE_SNAPSHOT_TAG);
  const cs = env.fake.seed(
    CocoonSets,
    seatSet((c) => {
      c.spec.hibernatePolicy = "release";
      c.status = { phase: "Waking" };
      c.metadata.annotations = { [ANNOTATION_HIBERNATED_ON_NODE]: "node-a" };
    }),
  );
  const pending = markUnschedulable(mainPod(cs));
  markRestoreFromHibernate(pending);
  const main = env.fake.seed(Pods, pending);

  await runStep(newTestPass(depsOf(env), cs, [main]), reconcileReleasedWake);

  assert.deepEqual(env.recorder.events.map((e) => e.reason), [
    REASON_WAKE_NO_CAPACITY,
    REASON_NO_NODES_IN_POOL,
  ]);
  assert.match(noNodesEvents(env)[0].message, /cocoonstack\.io\/pool=default/);
});

Deno.test("node events map to the sets pinned to that node through the spec.nodeName index", () => {
  const sets: CocoonSet[] = [
    newCocoonSet("a", (c) => c.spec.nodeName = "node-b"),
    newCocoonSet("b", (c) => c.spec.nodeName = "node-b"),
    newCocoonSet("c"),
  ];
  assert.deepEqual(nodeNameIndexValues(sets[0]), ["node-b"]);
  assert.deepEqual(nodeNameIndexValues(sets[2]), []);
  const lookup = (index: string, value: string) => {
    assert.equal(index, NODE_NAME_INDEX);
    return sets.filter((s) => nodeNameIndexValues(s).includes(value));
  };
  assert.deepEqual(setsTargetingNode(lookup, poolNode("node-b")), [
    { namespace: "ns", name: "a" },
    { namespace: "ns", name: "b" },
  ]);
  assert.deepEqual(setsTargetingNode(lookup, poolNode("node-c")), []);
});

Deno.test("node events: arrival, departure and relabelling pass; status heartbeats do not", () => {
  const p = nodePlacementEvents();
  const node = poolNode("node-b");
  const heartbeat: Node = { ...structuredClone(node), status: { conditions: [] } };
  const relabelled = poolNode("node-b", "gpu");
  assert.ok(p.create(node));
  assert.ok(p.delete(node));
  assert.ok(!p.update(node, heartbeat), "status-only change dropped");
  assert.ok(p.update(node, relabelled));
  assert.ok(!p.generic(node));
});

Deno.test("a node joining the pool wakes the set pinned to it, which then migrates (manager on the fake)", async () => {
  const fake = new FakeClient();
  fake.seed(Nodes, poolNode("node-a"));
  const mgr = new Manager({
    client: fake,
    metricsBindAddress: "0",
    healthProbeBindAddress: "127.0.0.1:0",
    leaderElection: false,
    leaderElectionId: "x",
  });
  setupCocoonSetController(mgr, { registry: new FakeRegistry(), concurrency: 1 });
  const cs = fake.seed(
    CocoonSets,
    seatSet(withFinalizer, (c) => {
      c.spec.nodeName = "node-b";
      c.status = { phase: "Running" };
    }),
  );
  const main = mainPod(cs, { node: "node-a", vmID: "vm-1", running: true });
  main.status!.conditions = [{ type: "Ready", status: "True" }];
  fake.seed(Pods, main);
  const stop = new AbortController();
  const run = mgr.start(stop.signal);
  try {
    await waitFor("the MigrationTargetUnknown Event", async () => {
      const events = await fake.list(Events, { namespace: "ns" });
      return events.items.some((e) => e.reason === REASON_MIGRATION_TARGET_UNKNOWN);
    }, 10_000);
    assert.ok(!readHibernateState(await fake.get(Pods, "ns", "demo-0")));

    // Nothing about the set or its pods changes: only the node's arrival can wake it.
    await fake.create(Nodes, poolNode("node-b"));
    await waitFor(
      "the migration to start",
      async () => readHibernateState(await fake.get(Pods, "ns", "demo-0")),
      10_000,
    );
  } finally {
    stop.abort();
    await run;
  }
});

Deno.test("node checks off (the Go original's role): no node is read, the pinned set migrates as in Go; on: the watch starts and the set is looked at again", async () => {
  const goRules = await goOriginalRules();
  // Every request the Go original's role does not allow is answered 403.
  const fake = new FakeClient({ access: { clusterRules: goRules } });
  const mgr = new Manager({
    client: fake,
    metricsBindAddress: "0",
    healthProbeBindAddress: "127.0.0.1:0",
    leaderElection: false,
    leaderElectionId: "x",
  });
  let on = false;
  const waiting: (() => void)[] = [];
  setupCocoonSetController(mgr, {
    registry: new FakeRegistry(),
    concurrency: 1,
    nodeChecks: { enabled: () => on, onEnabled: (fn) => waiting.push(fn) },
  });
  const cs = fake.seed(
    CocoonSets,
    seatSet(withFinalizer, (c) => {
      c.spec.nodeName = "node-b";
      c.status = { phase: "Running" };
    }),
  );
  const main = mainPod(cs, { node: "node-a", vmID: "vm-1", running: true });
  main.status!.conditions = [{ type: "Ready", status: "True" }];
  fake.seed(Pods, main);
  const stop = new AbortController();
  const run = mgr.start(stop.signal);
  const nodeRequests = () => fake.actions.filter((a) => a.resource.plural === "nodes");
  // The Events the operator created (the role allows it no list of them, nor does the test need one).
  const reasons = () =>
    fake.actions.filter((a) => a.resource.plural === "events" && a.verb === "create")
      .map((a) => (a.object as CoreEvent).reason);
  try {
    // The Go original moves the main toward spec.nodeName without asking whether it exists.
    await waitFor(
      "the migration toward node-b to start",
      async () => readHibernateState(await fake.get(Pods, "ns", "demo-0")),
      10_000,
    );
    assert.equal(mgr.cache.hasSynced(), true, "ready without a node informer");
    assert.deepEqual(nodeRequests(), []);
    assert.ok(!reasons().includes(REASON_MIGRATION_TARGET_UNKNOWN));

    // The role is fixed: the checks turn on without a restart.
    fake.seed(Nodes, poolNode("node-a"));
    fake.access = {
      clusterRules: [...goRules, {
        verbs: ["list", "watch"],
        apiGroups: [""],
        resources: ["nodes"],
      }],
    };
    on = true;
    for (const fn of waiting.splice(0)) fn();
    await waitFor(
      "the MigrationTargetUnknown Event",
      () => Promise.resolve(reasons().includes(REASON_MIGRATION_TARGET_UNKNOWN)),
      10_000,
    );
    assert.ok(nodeRequests().length > 0, "the node informer started");
    assert.ok(nodeRequests().every((a) => a.verb === "list" || a.verb === "watch"));
  } finally {
    stop.abort();
    await run;
  }
});
