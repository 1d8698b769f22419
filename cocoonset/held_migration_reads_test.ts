/**
 * A migration waiting for its old main's VM polls every 5 s, and so does a Hibernate request on
 * that main, which yields to the migration. Wired as in the operator (one manager, its informer
 * cache with pods scoped to CocoonSet pods, both controllers' setup), each such poll reads from
 * the cache: the fake API records no request at all.
 */
import assert from "node:assert/strict";
import { CocoonHibernations, CocoonSets } from "../common/apis/v1/resources.ts";
import type { CocoonSet } from "../common/apis/v1/cocoonset_types.ts";
import {
  ANNOTATION_LIFECYCLE_STATE,
  ANNOTATION_VMID,
  applyHibernateState,
  LABEL_COCOON_SET,
  LABEL_NODE_POOL,
} from "../common/meta/mod.ts";
import { byObject, Manager, Nodes, Pods, Recorder } from "../kube/mod.ts";
import type { KubeObject, Pod, ResourceType } from "../kube/mod.ts";
import { FakeClient, FakeClock, waitFor } from "../kube/testing/mod.ts";
import { FakeRegistry } from "../snapshot/testing/fake.ts";
import { HIBERNATE_SNAPSHOT_TAG } from "../snapshot/registry.ts";
import { HIBERNATION_FINALIZER } from "../hibernation/finalizer.ts";
import { setupHibernationController } from "../hibernation/setup.ts";
import { FINALIZER_NAME } from "./finalizer.ts";
import { buildAgentPod } from "./pods.ts";
import { setupCocoonSetController } from "./reconciler.ts";
import { poolNode } from "./_test_support.ts";

/** A namespace whose VM names split three ways (`vk-team-a-mover-0`: team, team-a, team-a-mover). */
const NS = "team-a";
const VM = `vk-${NS}-mover-0`;

/** The set migrating its main from node-a to node-b (Migrating persisted). */
function mover(): CocoonSet {
  return {
    apiVersion: "cocoonset.cocoonstack.io/v1",
    kind: "CocoonSet",
    metadata: {
      name: "mover",
      namespace: NS,
      uid: "uid-mover",
      generation: 1,
      finalizers: [FINALIZER_NAME],
    },
    spec: { agent: { image: "img" }, nodeName: "node-b" },
    status: { phase: "Migrating", observedGeneration: 1 },
  };
}

/** The old main on node-a, asked to hibernate, its VM still up and hibernating. */
function oldMain(cs: CocoonSet): Pod {
  const pod = buildAgentPod(cs, 0);
  pod.spec!.nodeName = "node-a";
  pod.metadata.annotations = {
    ...pod.metadata.annotations,
    [ANNOTATION_VMID]: "vmid-1",
    [ANNOTATION_LIFECYCLE_STATE]: "hibernating",
  };
  applyHibernateState(true, pod);
  pod.status = {
    phase: "Running",
    containerStatuses: [{
      name: "agent",
      ready: true,
      restartCount: 0,
      image: "img",
      imageID: "",
      state: { running: {} },
    }],
  };
  return pod;
}

/** Both reconcilers as the operator wires them, their cache started over the fake API. */
async function operatorOn(api: FakeClient, clock: FakeClock, registry: FakeRegistry) {
  const mgr = new Manager({
    client: api,
    metricsBindAddress: "0",
    healthProbeBindAddress: "127.0.0.1:0",
    leaderElection: false,
    leaderElectionId: "unused",
    byObject: [
      byObject(Pods, { labelSelector: LABEL_COCOON_SET }),
      byObject(Nodes, { labelSelector: LABEL_NODE_POOL }),
    ],
  });
  const sets = setupCocoonSetController(mgr, { registry, concurrency: 1, clock });
  const requests = setupHibernationController(mgr, { registry, clock }, 1);
  const stop = new AbortController();
  mgr.cache.start(stop.signal);
  await mgr.cache.waitForSync(stop.signal);
  const recorder = mgr.recorder as Recorder;
  /** Waits until the cache shows every write so far (the next poll's view). */
  const settled = () =>
    waitFor("the cache caught up", async () => {
      const same = async (rt: ResourceType<KubeObject>, name: string) =>
        (await api.get(rt, NS, name)).metadata.resourceVersion ===
          (await mgr.client.get(rt, NS, name)).metadata.resourceVersion;
      if (!await same(CocoonSets as ResourceType<KubeObject>, "mover")) return false;
      if (!await same(CocoonHibernations as ResourceType<KubeObject>, "ride")) return false;
      return true;
    });
  return {
    /** One poll of each flow: the set's pass, then the request's; their results. */
    async poll() {
      const set = await sets.reconcile({ namespace: NS, name: "mover" }, stop.signal);
      const request = await requests.reconcile({ namespace: NS, name: "ride" }, stop.signal);
      await recorder.flush();
      return { set, request };
    },
    settled,
    async close() {
      await recorder.close(1_000);
      stop.abort();
      await mgr.cache.stopped();
    },
  };
}

async function heldPolls(registry: FakeRegistry): Promise<string[][]> {
  const clock = new FakeClock(Date.UTC(2026, 4, 14));
  const api = new FakeClient({ clock });
  for (const node of ["node-a", "node-b"]) api.seed(Nodes, poolNode(node));
  const cs = api.seed(CocoonSets, mover());
  api.seed(Pods, oldMain(cs));
  api.seed(CocoonHibernations, {
    apiVersion: "cocoonset.cocoonstack.io/v1",
    kind: "CocoonHibernation",
    metadata: { name: "ride", namespace: NS, finalizers: [HIBERNATION_FINALIZER] },
    spec: { podRef: { name: "mover-0" }, desire: "Hibernate" },
  });
  const op = await operatorOn(api, clock, registry);
  try {
    // The first polls settle what a restarted operator writes once (the spec check, Blocked).
    await op.poll();
    const polls: string[][] = [];
    for (let i = 0; i < 3; i++) {
      await op.settled();
      clock.advance(5_000);
      const from = api.actions.length;
      const { set, request } = await op.poll();
      assert.deepEqual(set, { requeueAfter: 5_000 }, "the migration still waits");
      assert.deepEqual(request, { requeueAfter: 5_000 }, "the request still yields");
      polls.push(
        api.actions.slice(from).filter((a) => a.verb !== "watch").map((a) =>
          `${a.verb} ${a.resource.plural} ${a.namespace}/${a.name}`
        ),
      );
    }
    assert.equal((await api.get(CocoonSets, NS, "mover")).status?.phase, "Migrating");
    assert.equal((await api.get(Pods, NS, "mover-0")).metadata.deletionTimestamp, undefined);
    const ride = await api.get(CocoonHibernations, NS, "ride");
    assert.equal(
      ride.status?.conditions?.find((c) => c.type === "Blocked")?.status,
      "True",
      "the request yields to the migration",
    );
    return polls;
  } finally {
    await op.close();
  }
}

Deno.test("a migration waiting for its VM's snapshot, and a request yielding to it, poll without an API request", async () => {
  assert.deepEqual(await heldPolls(new FakeRegistry()), [[], [], []]);
});

Deno.test("a migration whose snapshot is pushed but whose VM has not confirmed polls without an API request", async () => {
  // vk-cocoon pushes the tag before it removes the VM: the old main stays until then.
  const registry = new FakeRegistry();
  registry.put(VM, HIBERNATE_SNAPSHOT_TAG);
  assert.deepEqual(await heldPolls(registry), [[], [], []]);
});
