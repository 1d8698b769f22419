import assert from "node:assert/strict";
import { type Pod, Pods } from "../kube/core.ts";
import { FakeClock } from "../kube/testing/fake_clock.ts";
import { waitFor } from "../kube/testing/wait.ts";
import { startFakeSim } from "./testing/fake_sim.ts";
import { operatorPod } from "./testing/pods.ts";

const NS = "ns";

function podScheduled(pod: Pod | undefined) {
  return pod?.status?.conditions?.find((c) => c.type === "PodScheduled");
}

Deno.test("scheduler: binds an operator pod through pods/binding to a node of its pool", async () => {
  const t = await startFakeSim({
    nodes: [
      { name: "vk-gpu", pool: "gpu", seats: 4 },
      { name: "vk-a", pool: "default", cpuClass: "zen4", seats: 4 },
    ],
  });
  try {
    await t.fake.create(Pods, operatorPod({ namespace: NS, cocoonSet: "demo", slot: 0 }));
    const bound = await waitFor("demo-0 bound", async () => {
      const p = await t.fake.get(Pods, NS, "demo-0");
      return p.spec?.nodeName ? p : undefined;
    });
    assert.equal(bound.spec?.nodeName, "vk-a");
    assert.equal(podScheduled(bound)?.status, "True");
    const bindings = t.fake.actions.filter((a) => a.subresource === "binding");
    assert.equal(bindings.length, 1);
    assert.equal(bindings[0].verb, "create");
    assert.deepEqual((bindings[0].object as { target?: unknown }).target, {
      apiVersion: "v1",
      kind: "Node",
      name: "vk-a",
    });
    assert.equal(t.sim.counters.bound, 1);
  } finally {
    await t.close();
  }
});

Deno.test("scheduler: required affinity pins, a preferred hint wins, the CPU class narrows", async () => {
  const t = await startFakeSim({
    nodes: [
      { name: "vk-a", seats: 4 },
      { name: "vk-b", seats: 4 },
      { name: "vk-c", cpuClass: "zen4", seats: 4 },
    ],
  });
  try {
    await t.fake.create(
      Pods,
      operatorPod({ namespace: NS, cocoonSet: "pin", slot: 0, pinnedNode: "vk-b" }),
    );
    await t.fake.create(
      Pods,
      operatorPod({ namespace: NS, cocoonSet: "hint", slot: 0, hintNode: "vk-c" }),
    );
    await t.fake.create(
      Pods,
      operatorPod({ namespace: NS, cocoonSet: "cls", slot: 0, cpuClass: "zen4" }),
    );
    const nodeOf = (name: string) =>
      waitFor(`${name} bound`, async () => (await t.fake.get(Pods, NS, name)).spec?.nodeName);
    assert.equal(await nodeOf("pin-0"), "vk-b");
    assert.equal(await nodeOf("hint-0"), "vk-c");
    assert.equal(await nodeOf("cls-0"), "vk-c");
  } finally {
    await t.close();
  }
});

Deno.test("scheduler: no seat → Unschedulable with the scheduler's message; a seat frees only when the terminating pod is finalized", async () => {
  const clock = new FakeClock(Date.parse("2026-01-01T00:00:00Z"));
  const t = await startFakeSim({
    clock,
    nodes: [{ name: "vk-a", seats: 1 }, { name: "vk-gpu", pool: "gpu", seats: 1 }],
    latencies: { deleteMs: 1_000 },
  });
  try {
    await t.fake.create(Pods, operatorPod({ namespace: NS, cocoonSet: "one", slot: 0 }));
    await waitFor("one-0 running", () => t.sim.vm(NS, "one-0")?.phase === "running");
    await t.fake.create(Pods, operatorPod({ namespace: NS, cocoonSet: "two", slot: 0 }));
    const waiting = await waitFor("two-0 unschedulable", async () => {
      const p = await t.fake.get(Pods, NS, "two-0");
      return podScheduled(p)?.reason === "Unschedulable" ? p : undefined;
    });
    const cond = podScheduled(waiting)!;
    assert.equal(cond.status, "False");
    assert.equal(
      cond.message,
      "0/2 nodes are available: 1 Too many pods, 1 node(s) didn't match Pod's node " +
        "affinity/selector. preemption: 0/2 nodes are available: 1 No preemption victims found " +
        "for incoming pod, 1 Preemption is not helpful for scheduling.",
    );
    assert.equal(waiting.spec?.nodeName, undefined);
    assert.equal(t.sim.counters.unschedulable, 1);

    // The first pod is deleted: it is Terminating until the simulated kubelet finalizes it
    // (delete latency on the fake clock), and holds its seat until then.
    await t.fake.delete(Pods, NS, "one-0");
    await waitFor("one-0 deleting", () => t.sim.vm(NS, "one-0")?.phase === "deleting");
    const marker = await t.fake.create(
      Pods,
      operatorPod({ namespace: NS, cocoonSet: "gpu", slot: 0, pool: "gpu" }),
    );
    await waitFor(
      "marker bound",
      async () => (await t.fake.get(Pods, NS, marker.metadata.name!)).spec?.nodeName === "vk-gpu",
    );
    assert.equal((await t.fake.get(Pods, NS, "two-0")).spec?.nodeName, undefined);
    assert.ok((await t.fake.get(Pods, NS, "one-0")).metadata.deletionTimestamp);
    assert.equal(t.sim.seatsUsed("vk-a"), 1);

    clock.advance(1_000);
    await waitFor(
      "two-0 bound after one-0 is finalized",
      async () => (await t.fake.get(Pods, NS, "two-0")).spec?.nodeName === "vk-a",
    );
    assert.equal(podScheduled(await t.fake.get(Pods, NS, "two-0"))?.status, "True");
  } finally {
    await t.close();
  }
});

Deno.test("scheduler: more seats on a node retry the waiting pods", async () => {
  const t = await startFakeSim({ nodes: [{ name: "vk-a", seats: 0 }] });
  try {
    await t.fake.create(Pods, operatorPod({ namespace: NS, cocoonSet: "w", slot: 0 }));
    await waitFor(
      "w-0 unschedulable",
      async () => podScheduled(await t.fake.get(Pods, NS, "w-0"))?.reason === "Unschedulable",
    );
    await t.sim.setSeats("vk-a", 1);
    await waitFor(
      "w-0 bound",
      async () => (await t.fake.get(Pods, NS, "w-0")).spec?.nodeName === "vk-a",
    );
  } finally {
    await t.close();
  }
});

Deno.test("scheduler: pods that do not tolerate the taint, or are pre-bound, are not bound", async () => {
  const t = await startFakeSim();
  try {
    const intolerant = operatorPod({ namespace: NS, cocoonSet: "plain", slot: 0 });
    intolerant.spec!.tolerations = [];
    await t.fake.create(Pods, intolerant);
    await t.fake.create(
      Pods,
      operatorPod({ namespace: NS, cocoonSet: "demo", slot: 1, nodeName: "vk-a" }),
    );
    // A pod created after both proves the scheduler has seen them.
    await t.fake.create(Pods, operatorPod({ namespace: NS, cocoonSet: "marker", slot: 0 }));
    await waitFor(
      "marker bound",
      async () => (await t.fake.get(Pods, NS, "marker-0")).spec?.nodeName === "vk-a",
    );
    const plain = await t.fake.get(Pods, NS, "plain-0");
    assert.equal(plain.spec?.nodeName, undefined);
    assert.equal(plain.status?.conditions, undefined, "no Unschedulable written on a foreign pod");
    const bindings = t.fake.actions.filter((a) => a.subresource === "binding").map((a) => a.name);
    assert.deepEqual(bindings, ["marker-0"]);
  } finally {
    await t.close();
  }
});

Deno.test("scheduler: a node added later takes the pods waiting for its pool", async () => {
  const t = await startFakeSim();
  try {
    await t.fake.create(
      Pods,
      operatorPod({ namespace: NS, cocoonSet: "g", slot: 0, pool: "gpu", cpuClass: "zen4" }),
    );
    await waitFor(
      "g-0 unschedulable",
      async () => podScheduled(await t.fake.get(Pods, NS, "g-0"))?.reason === "Unschedulable",
    );
    await t.sim.addNode({ name: "vk-gpu", pool: "gpu", cpuClass: "zen4", seats: 1 });
    await waitFor(
      "g-0 bound to the new node",
      async () => (await t.fake.get(Pods, NS, "g-0")).spec?.nodeName === "vk-gpu",
    );
    await waitFor("g-0 booted there", () => t.sim.vm(NS, "g-0")?.phase === "running");
    assert.deepEqual(t.sim.nodes.map((n) => n.name), ["vk-a", "vk-gpu"]);
  } finally {
    await t.close();
  }
});
