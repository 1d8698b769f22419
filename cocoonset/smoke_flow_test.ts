/**
 * The whole operator in one process, fast: the manager with both controllers on the in-memory
 * API, the VM simulator playing vk-cocoon on the same API, and the real OCI client against the
 * simulator's in-process registry. One CocoonSet goes through create, retain suspend, resume and
 * teardown; every step is what a user would see (phase, pods, registry tags).
 */
import assert from "node:assert/strict";
import { byObject, isNotFound, Manager, Pods } from "../kube/mod.ts";
import type { Pod } from "../kube/mod.ts";
import { waitFor } from "../kube/testing/mod.ts";
import type { CocoonSet } from "../common/apis/v1/cocoonset_types.ts";
import { CocoonSets } from "../common/apis/v1/resources.ts";
import { LABEL_COCOON_SET } from "../common/meta/keys.ts";
import { newOciRegistry } from "../snapshot/oci.ts";
import { startFakeSim } from "../sim/testing/fake_sim.ts";
import { setupHibernationController } from "../hibernation/mod.ts";
import { setupCocoonSetController } from "./reconciler.ts";

Deno.test("smoke: create, retain suspend, resume and teardown with the simulator on the fake API", async () => {
  const env = await startFakeSim({ nodes: [{ name: "vk-a", seats: 8 }] });
  const mgr = new Manager({
    client: env.fake,
    metricsBindAddress: "0",
    healthProbeBindAddress: "127.0.0.1:0",
    leaderElection: false,
    leaderElectionId: "smoke",
    byObject: [byObject(Pods, { labelSelector: LABEL_COCOON_SET })],
  });
  const registry = newOciRegistry(`${env.stub.host}/sim`);
  setupCocoonSetController(mgr, { registry, concurrency: 2 });
  setupHibernationController(mgr, { registry }, 2);
  const stop = new AbortController();
  const run = mgr.start(stop.signal);
  const set = () => env.fake.get(CocoonSets, "ns", "demo");
  const phase = async (want: string) =>
    await waitFor(
      `phase ${want}`,
      async () => {
        const cs = await set();
        return cs.status?.phase === want && cs.status.observedGeneration === cs.metadata.generation
          ? cs
          : undefined;
      },
      20_000,
      20,
    );
  try {
    await env.fake.create<CocoonSet>(CocoonSets, {
      metadata: { name: "demo", namespace: "ns" },
      spec: { agent: { image: "img", replicas: 2 }, toolboxes: [{ name: "tb", image: "t" }] },
    });
    const running = await phase("Running");
    assert.equal(running.status?.readyAgents, 3);
    assert.equal(running.status?.readyToolboxes, 1);
    const pods = (await env.fake.list(Pods, { namespace: "ns" })).items as Pod[];
    assert.deepEqual(pods.map((p) => p.metadata.name).sort(), [
      "demo-0",
      "demo-1",
      "demo-2",
      "demo-tb",
    ]);
    assert.ok(pods.every((p) => p.spec?.nodeName === "vk-a"));

    await env.fake.patch(CocoonSets, "ns", "demo", "merge", { spec: { suspend: true } });
    await phase("Suspended");
    for (const vm of ["vk-ns-demo-0", "vk-ns-demo-1", "vk-ns-demo-2", "vk-ns-demo-tb"]) {
      assert.deepEqual(env.stub.tagsOf(env.repo(vm)), ["hibernate"], vm);
    }

    await env.fake.patch(CocoonSets, "ns", "demo", "merge", { spec: { suspend: false } });
    await phase("Running");

    await env.fake.delete(CocoonSets, "ns", "demo");
    await waitFor(
      "teardown",
      async () => {
        try {
          await set();
          return false;
        } catch (err) {
          return isNotFound(err);
        }
      },
      20_000,
      20,
    );
    // The default policy keeps every :latest the deletes pushed and drops every :hibernate.
    for (const vm of ["vk-ns-demo-0", "vk-ns-demo-1", "vk-ns-demo-2", "vk-ns-demo-tb"]) {
      assert.deepEqual(env.stub.tagsOf(env.repo(vm)), ["latest"], vm);
    }
  } finally {
    stop.abort();
    await run;
    await env.close();
  }
});
