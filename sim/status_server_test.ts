import assert from "node:assert/strict";
import { Nodes, Pods } from "../kube/core.ts";
import { waitFor } from "../kube/testing/wait.ts";
import { isPodReady } from "../common/meta/pod.ts";
import { ANNOTATION_HIBERNATE } from "../common/meta/keys.ts";
import { SimEventLog } from "./events.ts";
import { handleStatusRequest, serveSimStatus } from "./status_server.ts";
import { startFakeSim } from "./testing/fake_sim.ts";
import { operatorPod, vmNameOf } from "./testing/pods.ts";

const NS = "ns";

Deno.test("event log: numbered, read after a sequence number, bounded to the newest", () => {
  const log = new SimEventLog(2);
  for (const type of ["bound", "booting", "ready"] as const) {
    log.record({ type, namespace: NS, name: "a", at: 1 });
  }
  const all = log.since(0);
  assert.deepEqual(all.events.map((e) => [e.seq, e.type]), [[2, "booting"], [3, "ready"]]);
  assert.equal(all.next, 4);
  assert.deepEqual(log.since(2).events.map((e) => e.seq), [3]);
  assert.deepEqual(log.since(3).events, []);
});

Deno.test("status endpoint: seats, a VM with the digest it was woken from, events, seat changes", async () => {
  const events = new SimEventLog();
  const t = await startFakeSim({
    nodes: [{ name: "vk-a", seats: 2 }, { name: "vk-b", seats: 1 }],
    onEvent: (ev) => events.record(ev),
  });
  const server = serveSimStatus({ sim: t.sim, events, hostname: "127.0.0.1", port: 0 });
  const base = `http://127.0.0.1:${server.addr.port}`;
  const get = async (path: string) => {
    const res = await fetch(`${base}${path}`);
    return { status: res.status, body: await res.json() };
  };
  try {
    await t.fake.create(Pods, operatorPod({ namespace: NS, cocoonSet: "demo", slot: 0 }));
    await waitFor("demo-0 ready", async () => isPodReady(await t.fake.get(Pods, NS, "demo-0")));

    const status = await get("/status");
    assert.equal(status.status, 200);
    assert.deepEqual(status.body.nodes, [
      { name: "vk-a", pool: "default", cpuClass: "", seats: 2, used: 1 },
      { name: "vk-b", pool: "default", cpuClass: "", seats: 1, used: 0 },
    ]);
    assert.equal(status.body.counters.booted, 1);

    // Hibernate and wake: the woken VM names the manifest of the push it came from.
    await t.fake.patch(Pods, NS, "demo-0", "merge", {
      metadata: { annotations: { [ANNOTATION_HIBERNATE]: "true" } },
    });
    await waitFor("hibernated", () => t.sim.vm(NS, "demo-0")?.phase === "hibernated");
    await t.fake.patch(Pods, NS, "demo-0", "merge", {
      metadata: { annotations: { [ANNOTATION_HIBERNATE]: null } },
    });
    await waitFor("woken", () => t.sim.counters.woken === 1);
    const vm = await get(`/vms/${NS}/demo-0`);
    assert.equal(vm.status, 200);
    assert.equal(vm.body.phase, "running");
    const pushedDigest = t.stub.digestOf(t.repo(vmNameOf(NS, "demo", 0)), "hibernate");
    assert.ok(pushedDigest);
    assert.equal(vm.body.restoredFrom, pushedDigest);
    assert.equal((await get(`/vms/${NS}/nope`)).status, 404);

    const first = await get("/events");
    const types = first.body.events.map((e: { type: string }) => e.type);
    assert.deepEqual(types.filter((x: string) => x === "pushed" || x === "ready"), [
      "ready",
      "pushed",
      "ready",
    ]);
    const pushed = first.body.events.find((e: { type: string }) => e.type === "pushed");
    assert.equal(pushed.digest, pushedDigest, "a push event carries the registry's digest");
    const woke = first.body.events.findLast((e: { type: string }) => e.type === "ready");
    assert.equal(woke.digest, pushedDigest, "a wake's ready event names its snapshot");
    assert.deepEqual((await get(`/events?since=${first.body.next - 1}`)).body.events, []);
    assert.equal((await get("/events?since=x")).status, 400);

    const put = await fetch(`${base}/nodes/vk-b/seats`, {
      method: "PUT",
      body: JSON.stringify({ seats: 3 }),
    });
    assert.equal(put.status, 204);
    await put.body?.cancel();
    const node = await t.fake.get(Nodes, "", "vk-b");
    assert.equal(node.status?.capacity?.pods, "3");
    assert.equal((await get("/status")).body.nodes[1].seats, 3);
    const bad = await handleStatusRequest(
      new Request(`${base}/nodes/vk-b/seats`, { method: "PUT", body: '{"seats":-1}' }),
      t.sim,
      events,
    );
    assert.equal(bad.status, 400);
    await bad.body?.cancel();
    const unknown = await handleStatusRequest(
      new Request(`${base}/nodes/vk-z/seats`, { method: "PUT", body: '{"seats":1}' }),
      t.sim,
      events,
    );
    assert.equal(unknown.status, 400);
    assert.match((await unknown.json()).error, /not a simulator node/);
  } finally {
    await server.shutdown();
    await t.close();
  }
});
