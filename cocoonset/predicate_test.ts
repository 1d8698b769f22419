import assert from "node:assert/strict";
import { controllerManagedBy, generationChanged, Manager, Pods } from "../kube/mod.ts";
import type { Pod, PodCondition, Request } from "../kube/mod.ts";
import { FakeClient, waitFor } from "../kube/testing/mod.ts";
import { CocoonSets } from "../common/apis/v1/resources.ts";
import { isPodReady } from "../common/meta/mod.ts";
import { newCocoonSet, readyPod, TEST_NAMESPACE } from "./_test_support.ts";
import { buildAgentPod } from "./pods.ts";
import { isUnschedulable, podRelevantChange, unschedulableMessage } from "./predicate.ts";

const p = podRelevantChange();

/** A Running, Ready main with a heartbeat-style status, as vk-cocoon keeps rewriting it. */
function basePod(): Pod {
  const pod = readyPod(buildAgentPod(newCocoonSet("demo"), 0));
  pod.metadata.resourceVersion = "10";
  pod.status!.conditions!.push({ type: "PodScheduled", status: "True" });
  pod.status!.containerStatuses = [{
    name: "agent",
    ready: true,
    restartCount: 0,
    image: "x",
    imageID: "x",
    state: { running: {} },
  }];
  return pod;
}

function changed(mutate: (pod: Pod) => void): [Pod, Pod] {
  const before = basePod();
  const after = structuredClone(before);
  after.metadata.resourceVersion = "11";
  mutate(after);
  return [before, after];
}

const UNSCHEDULABLE: PodCondition = {
  type: "PodScheduled",
  status: "False",
  reason: "Unschedulable",
  message: "0/3 nodes are available: 3 Insufficient memory.",
};

Deno.test("pod creates pass", () => {
  assert.equal(p.create(basePod()), true);
});

Deno.test("pod deletes pass", () => {
  assert.equal(p.delete(basePod()), true);
});

Deno.test("generic pod events are dropped", () => {
  assert.equal(p.generic(basePod()), false);
});

Deno.test("an update that starts the pod's deletion passes", () => {
  const [o, n] = changed((pod) => {
    pod.metadata.deletionTimestamp = "2026-05-14T00:00:00Z";
  });
  assert.equal(p.update(o, n), true);
  // Further updates of a pod already being deleted are not a new start.
  const [o2, n2] = changed((pod) => {
    pod.metadata.deletionTimestamp = "2026-05-14T00:00:00Z";
  });
  o2.metadata.deletionTimestamp = "2026-05-14T00:00:00Z";
  n2.metadata.deletionGracePeriodSeconds = 0;
  assert.equal(p.update(o2, n2), false);
});

Deno.test("a phase change passes", () => {
  const [o, n] = changed((pod) => {
    pod.status!.phase = "Failed";
  });
  assert.equal(p.update(o, n), true);
});

Deno.test("a readiness flip passes", () => {
  const [o, n] = changed((pod) => {
    pod.status!.conditions = pod.status!.conditions!.map((c) =>
      c.type === "Ready" ? { ...c, status: "False" } : c
    );
  });
  assert.equal(p.update(o, n), true);
});

Deno.test("a label change passes", () => {
  const [o, n] = changed((pod) => {
    pod.metadata.labels = { ...pod.metadata.labels, extra: "x" };
  });
  assert.equal(p.update(o, n), true);
});

Deno.test("an annotation change passes", () => {
  const [o, n] = changed((pod) => {
    pod.metadata.annotations = { ...pod.metadata.annotations, "vm.cocoonstack.io/id": "qemu-1" };
  });
  assert.equal(p.update(o, n), true);
  const [o2, n2] = changed((pod) => {
    delete pod.metadata.annotations!["cocoonset.cocoonstack.io/generation"];
  });
  assert.equal(p.update(o2, n2), true, "a removed annotation counts too");
});

Deno.test("a flip to and from Unschedulable passes (not looked at by the Go operator)", () => {
  const [o, n] = changed((pod) => {
    pod.status!.conditions = pod.status!.conditions!.map((c) =>
      c.type === "PodScheduled" ? UNSCHEDULABLE : c
    );
  });
  assert.equal(o.status?.phase, n.status?.phase, "same phase");
  assert.equal(isPodReady(o), isPodReady(n), "same readiness");
  assert.equal(p.update(o, n), true, "becomes Unschedulable");
  assert.equal(p.update(n, o), true, "no longer Unschedulable");
  assert.ok(isUnschedulable(n));
  assert.equal(unschedulableMessage(n), UNSCHEDULABLE.message);
  assert.equal(unschedulableMessage(o), "");
  // A new scheduler message on a pod that stays Unschedulable is only status churn.
  const again = structuredClone(n);
  again.status!.conditions = n.status!.conditions!.map((c) =>
    c.type === "PodScheduled" ? { ...c, message: "0/4 nodes are available." } : c
  );
  assert.equal(p.update(n, again), false);
});

Deno.test("a status-only change (heartbeats, container statuses) is dropped", () => {
  const [o, n] = changed((pod) => {
    pod.status!.conditions = pod.status!.conditions!.map((c) => ({
      ...c,
      lastProbeTime: "2026-05-14T00:01:00Z",
      lastTransitionTime: "2026-05-14T00:01:00Z",
    }));
    pod.status!.containerStatuses![0].restartCount = 3;
    pod.status!.podIP = "10.0.0.9";
  });
  assert.equal(p.update(o, n), false);
  // A spec-side change the reconciler does not act on is dropped as well.
  const [o2, n2] = changed((pod) => {
    pod.spec!.nodeName = "node-a";
  });
  assert.equal(p.update(o2, n2), false);
});

Deno.test("wired as the Owns filter, status churn wakes no reconcile while a marker does", async () => {
  const fake = new FakeClient();
  const a = await fake.create(CocoonSets, newCocoonSet("a", (c) => delete c.metadata.uid));
  const b = await fake.create(CocoonSets, newCocoonSet("b", (c) => delete c.metadata.uid));
  for (const cs of [a, b]) {
    const pod = buildAgentPod(cs, 0);
    await fake.create(Pods, pod);
  }
  const seen: Request[] = [];
  const count = (name: string) => seen.filter((r) => r.name === name).length;
  const mgr = new Manager({
    client: fake,
    metricsBindAddress: "0",
    healthProbeBindAddress: "127.0.0.1:0",
    leaderElection: false,
    leaderElectionId: "x",
  });
  controllerManagedBy(mgr)
    .named("predicate-probe")
    .for(CocoonSets, { predicates: [generationChanged()] })
    .owns(Pods, { predicates: [podRelevantChange()] })
    // One worker and a FIFO queue: a request enqueued before the marker is served before it.
    .withOptions({ maxConcurrentReconciles: 1 })
    .complete({
      reconcile: (req) => {
        seen.push(req);
        return Promise.resolve({});
      },
    });
  const stop = new AbortController();
  const run = mgr.start(stop.signal);
  const marker = async (n: number) => {
    const before = count("b");
    await fake.patch(Pods, TEST_NAMESPACE, "b-0", "merge", {
      metadata: { annotations: { "test/marker": String(n) } },
    });
    await waitFor(`marker ${n} reconciled`, () => count("b") > before);
  };
  try {
    await waitFor("both sets reconciled", () => count("a") > 0 && count("b") > 0);
    await marker(1);
    const settled = count("a");

    await fake.patch(Pods, TEST_NAMESPACE, "a-0", "merge", {
      status: {
        conditions: [{
          type: "PodScheduled",
          status: "True",
          lastProbeTime: "2026-05-14T00:01:00Z",
        }],
        podIP: "10.0.0.9",
      },
    }, { subresource: "status" });
    await marker(2);
    assert.equal(count("a"), settled, "the status-only change was dropped");

    await fake.patch(Pods, TEST_NAMESPACE, "a-0", "merge", {
      status: { conditions: [UNSCHEDULABLE] },
    }, { subresource: "status" });
    await waitFor("the Unschedulable flip reconciled", () => count("a") > settled);
  } finally {
    stop.abort();
    await run;
  }
});
