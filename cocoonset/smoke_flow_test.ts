import assert from "node:assert/strict";
import { FakeClient } from "../kube/testing/fake.ts";
import { Manager } from "../kube/manager.ts";
import { type Pod, Pods } from "../kube/core.ts";
import { waitFor } from "../kube/testing/wait.ts";
import { CocoonSets } from "../common/apis/v1/resources.ts";
import { FakeRegistry } from "../snapshot/fake.ts";
import { setupCocoonSetController } from "./reconciler.ts";

/** Marks every unbound pod bound to node-a, Running and Ready with a VM id. */
async function playKubelet(fake: FakeClient): Promise<void> {
  const pods = await fake.list(Pods, { namespace: "ns" });
  for (const pod of pods.items) {
    if (pod.metadata.deletionTimestamp) {
      await fake.delete(Pods, "ns", pod.metadata.name!, { gracePeriodSeconds: 0 });
      continue;
    }
    if (pod.status?.phase === "Running") continue;
    if (!pod.spec?.nodeName) {
      await fake.patch(Pods, "ns", pod.metadata.name!, "merge", { spec: { nodeName: "node-a" } });
    }
    await fake.patch(Pods, "ns", pod.metadata.name!, "merge", {
      metadata: { annotations: { "vm.cocoonstack.io/id": `id-${pod.metadata.name}` } },
    });
    await fake.patch(Pods, "ns", pod.metadata.name!, "merge", {
      status: {
        phase: "Running",
        conditions: [{ type: "Ready", status: "True" }],
        containerStatuses: [{
          name: "agent",
          ready: true,
          restartCount: 0,
          image: "x",
          imageID: "x",
          state: { running: {} },
        }],
      },
    }, { subresource: "status" });
  }
}

Deno.test("smoke: a CocoonSet with subs and a toolbox converges to Running on the fake", async () => {
  const fake = new FakeClient();
  const mgr = new Manager({
    client: fake,
    metricsBindAddress: "0",
    healthProbeBindAddress: "127.0.0.1:0",
    leaderElection: false,
    leaderElectionId: "x",
  });
  setupCocoonSetController(mgr, { registry: new FakeRegistry(), concurrency: 2 });
  const stop = new AbortController();
  const run = mgr.start(stop.signal);
  try {
    await fake.create(CocoonSets, {
      metadata: { name: "demo", namespace: "ns" },
      spec: { agent: { image: "img", replicas: 2 }, toolboxes: [{ name: "tb", image: "t" }] },
    });
    const cs = await waitFor(
      "Running",
      async () => {
        await playKubelet(fake);
        const cs = await fake.get(CocoonSets, "ns", "demo");
        return cs.status?.phase === "Running" ? cs : undefined;
      },
      20_000,
      50,
    );
    assert.equal(cs.status?.readyAgents, 3);
    assert.equal(cs.status?.readyToolboxes, 1);
    const pods = (await fake.list(Pods, { namespace: "ns" })).items as Pod[];
    assert.deepEqual(pods.map((p) => p.metadata.name).sort(), [
      "demo-0",
      "demo-1",
      "demo-2",
      "demo-tb",
    ]);
    assert.equal(
      pods.find((p) => p.metadata.name === "demo-1")?.metadata.annotations?.[
        "vm.cocoonstack.io/fork-from"
      ],
      "vk-ns-demo-0",
    );
    assert.deepEqual(cs.metadata.finalizers, ["cocoonset.cocoonstack.io/finalizer"]);
    assert.equal(cs.metadata.generation, 1);
  } finally {
    stop.abort();
    await run;
  }
});
