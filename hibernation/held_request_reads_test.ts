/**
 * A Hibernate request whose VM has not confirmed yet polls every 5 s. Wired as in the operator
 * (the manager's informer cache, pods scoped to CocoonSet pods, the controller's setup), each such
 * poll reads from the cache: the fake API records no request at all, or, for a target pod outside
 * the pod cache, the one GET of that pod.
 */
import assert from "node:assert/strict";
import {
  COCOON_HIBERNATION_PHASE_HIBERNATING,
  CocoonHibernations,
  CocoonSets,
} from "../common/apis/v1/mod.ts";
import type { CocoonSet } from "../common/apis/v1/cocoonset_types.ts";
import {
  ANNOTATION_LIFECYCLE_STATE,
  ANNOTATION_VM_NAME,
  ANNOTATION_VMID,
  LABEL_COCOON_SET,
} from "../common/meta/keys.ts";
import { applyHibernateState } from "../common/meta/hibernate.ts";
import { byObject, Manager, Pods, Recorder } from "../kube/mod.ts";
import type { Pod, Result } from "../kube/mod.ts";
import { FakeClient, FakeClock, waitFor } from "../kube/testing/mod.ts";
import { FakeRegistry } from "../snapshot/testing/fake.ts";
import { HIBERNATION_FINALIZER } from "./finalizer.ts";
import { setupHibernationController } from "./setup.ts";
import { T0 } from "./_fixtures.ts";

/** A namespace whose VM names split three ways (`vk-team-a-held-0`: team, team-a, team-a-held). */
const NS = "team-a";

function set(name: string): CocoonSet {
  return {
    apiVersion: "cocoonset.cocoonstack.io/v1",
    kind: "CocoonSet",
    metadata: { name, namespace: NS, uid: `uid-${name}` },
    spec: { agent: { image: "img" } },
    status: { phase: "Running" },
  };
}

/** A pod whose VM vk-cocoon is hibernating for a while: asked, still up, lifecycle hibernating. */
function hibernatingVM(pod: Pod): Pod {
  pod.spec!.nodeName = "node-a";
  pod.metadata.annotations = {
    ...pod.metadata.annotations,
    [ANNOTATION_VM_NAME]: `vk-${NS}-${pod.metadata.name}`,
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

/** The main of cs, as the CocoonSet reconciler labels and owns it (inside the pod cache). */
function mainOf(cs: CocoonSet): Pod {
  const name = `${cs.metadata.name}-0`;
  return hibernatingVM({
    apiVersion: "v1",
    kind: "Pod",
    metadata: {
      name,
      namespace: NS,
      labels: { [LABEL_COCOON_SET]: cs.metadata.name ?? "" },
      ownerReferences: [{
        apiVersion: "cocoonset.cocoonstack.io/v1",
        kind: "CocoonSet",
        name: cs.metadata.name ?? "",
        uid: cs.metadata.uid ?? "",
        controller: true,
      }],
    },
    spec: { containers: [{ name: "agent", image: "img" }] },
  });
}

/** A pod no CocoonSet owns (outside the operator's pod cache). */
function plainPod(name: string): Pod {
  return hibernatingVM({
    apiVersion: "v1",
    kind: "Pod",
    metadata: { name, namespace: NS },
    spec: { containers: [{ name: "agent", image: "img" }] },
  });
}

/** The reconciler as the operator wires it, its cache started over the fake API. */
async function operatorOn(api: FakeClient, clock: FakeClock) {
  const mgr = new Manager({
    client: api,
    metricsBindAddress: "0",
    healthProbeBindAddress: "127.0.0.1:0",
    leaderElection: false,
    leaderElectionId: "unused",
    byObject: [byObject(Pods, { labelSelector: LABEL_COCOON_SET })],
  });
  const recorder = new Recorder({ client: api, component: "cocoon-operator" });
  const reconciler = setupHibernationController(
    mgr,
    { registry: new FakeRegistry(), clock, recorder },
    1,
  );
  const stop = new AbortController();
  mgr.cache.start(stop.signal);
  await mgr.cache.waitForSync(stop.signal);
  return {
    poll: (name: string): Promise<Result> =>
      reconciler.reconcile({ namespace: NS, name }, stop.signal),
    /** Waits until the cache shows every write so far (the next poll's view). */
    settled: () =>
      waitFor("the cache caught up", async () => {
        const stored = await api.get(CocoonHibernations, NS, "hold");
        const cached = await mgr.client.get(CocoonHibernations, NS, "hold");
        return stored.metadata.resourceVersion === cached.metadata.resourceVersion;
      }),
    async close() {
      await recorder.close(1_000);
      stop.abort();
      await mgr.cache.stopped();
    },
    recorder,
  };
}

/** The requests the fake API answered since `from`, but the informers' open watches. */
function requestsSince(api: FakeClient, from: number): string[] {
  return api.actions.slice(from).filter((a) => a.verb !== "watch").map((a) =>
    `${a.verb} ${a.resource.plural} ${a.namespace}/${a.name}${a.subresource ? "/" : ""}${
      a.subresource ?? ""
    }`
  );
}

async function heldPolls(target: Pod, owner?: CocoonSet): Promise<string[][]> {
  const clock = new FakeClock(T0);
  const api = new FakeClient({ clock });
  if (owner) api.seed(CocoonSets, owner);
  api.seed(Pods, target);
  api.seed(CocoonHibernations, {
    apiVersion: "cocoonset.cocoonstack.io/v1",
    kind: "CocoonHibernation",
    metadata: { name: "hold", namespace: NS, finalizers: [HIBERNATION_FINALIZER] },
    spec: { podRef: { name: target.metadata.name ?? "" }, desire: "Hibernate" },
  });
  const op = await operatorOn(api, clock);
  try {
    // The first pass enters Hibernating (a status write and an Event); the request is held.
    assert.deepEqual(await op.poll("hold"), { requeueAfter: 5_000 });
    assert.equal(
      (await api.get(CocoonHibernations, NS, "hold")).status?.phase,
      COCOON_HIBERNATION_PHASE_HIBERNATING,
    );
    await op.recorder.flush();
    const polls: string[][] = [];
    for (let i = 0; i < 3; i++) {
      await op.settled();
      clock.advance(5_000);
      const from = api.actions.length;
      assert.deepEqual(await op.poll("hold"), { requeueAfter: 5_000 }, "still held");
      await op.recorder.flush();
      polls.push(requestsSince(api, from));
    }
    return polls;
  } finally {
    await op.close();
  }
}

Deno.test("a held Hibernate on a CocoonSet's pod polls without a single API request", async () => {
  const owner = set("held");
  const polls = await heldPolls(mainOf(owner), owner);
  assert.deepEqual(polls, [[], [], []]);
});

Deno.test("a held Hibernate on a pod outside the pod cache reads that pod, and only it, per poll", async () => {
  const polls = await heldPolls(plainPod("plain"));
  const pod = `get pods ${NS}/plain`;
  assert.deepEqual(polls, [[pod], [pod], [pod]]);
});
