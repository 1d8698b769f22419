/**
 * Suspend with the release policy, and the wakes that follow, on two simulator nodes. A released
 * set gives its seat back (pods deleted after their snapshot is verified, the node remembered as
 * a hint, the snapshot kept); the wake recreates the main from the snapshot preferring the hint
 * node and drops the snapshot only once the restored VM runs. With the hint node full the wake
 * waits Unschedulable (WakeNoCapacity, counted) until a seat frees elsewhere, then lands there.
 */
import assert from "node:assert/strict";
import type { CocoonSet } from "../../common/apis/v1/cocoonset_types.ts";
import { CocoonSets } from "../../common/apis/v1/resources.ts";
import {
  ANNOTATION_HIBERNATED_ON_NODE,
  ANNOTATION_KEEP_SNAPSHOT_ON_DELETE,
  ANNOTATION_RESTORE_FROM_HIBERNATE,
} from "../../common/meta/keys.ts";
import { type Pod, Pods } from "../../kube/core.ts";
import type { Stack } from "../harness/stack.ts";
import { recordTimeline, type Timeline } from "../harness/timeline.ts";
import { waitUntil } from "../harness/wait.ts";
import {
  createSet,
  eventsWith,
  inPhase,
  livePodsOf,
  patchSpec,
  vmOf,
  waitEvent,
  waitMetric,
  waitPod,
  waitSet,
} from "../harness/stack_objects.ts";
import { e2eSuite } from "./_support.ts";

const NS = "e2e-release";
const VM = vmOf(NS, "rel", 0);
const DELETE_VM_NAMES = "cocoonset.cocoonstack.io/delete-vm-names";
const LABELS = { namespace: NS, cocoonset: "rel" };
const NODES = ["vk-a", "vk-b"];

/** Suspends a running release set and checks the seat is given back with the snapshot kept. */
async function release(
  stack: Stack,
  cs: CocoonSet,
  pods: Timeline<Pod>,
  round: number,
): Promise<{ cs: CocoonSet; node: string; digest: string }> {
  const main = await waitPod(stack, NS, "rel-0", "running", (p) => !!p.spec?.nodeName);
  const node = main.spec!.nodeName!;
  cs = await patchSpec(stack, cs, { suspend: true });
  cs = await waitSet(
    stack,
    cs,
    "Suspended without pods",
    (c) => inPhase("Suspended")(c) && (c.status?.agents ?? []).length === 0,
  );
  assert.equal((await livePodsOf(stack, cs)).size, 0, "no live pod left");
  // The simulator finalizes the terminating pod after its delete latency.
  await waitUntil(
    async () => (await stack.admin.list(Pods, { namespace: NS })).items.length === 0,
    { what: "the released pod gone", timeoutMs: 10_000 },
  );
  await waitUntil(async () => (await stack.sim.seatsUsed(node)) === 0, {
    what: `the seat on ${node} freed`,
    timeoutMs: 10_000,
  });
  assert.equal(cs.metadata.annotations?.[ANNOTATION_HIBERNATED_ON_NODE], node);
  assert.equal(cs.metadata.annotations?.[DELETE_VM_NAMES], VM);
  assert.equal(cs.status?.desiredAgents, 1);
  assert.equal(cs.status?.readyAgents, 0);
  assert.deepEqual(await stack.tagsOf(VM), ["hibernate"], "the snapshot is kept");
  assert.equal(
    await stack.metric("cocoon_operator_slot_release_pods_deleted_total", LABELS),
    round,
  );
  // The pod was marked keep-snapshot-on-delete before its delete was issued.
  const marked = pods.first((s) =>
    s.object.metadata.uid === main.metadata.uid &&
    s.object.metadata.annotations?.[ANNOTATION_KEEP_SNAPSHOT_ON_DELETE] === "true"
  );
  const deleting = pods.first((s) =>
    s.object.metadata.uid === main.metadata.uid && !!s.object.metadata.deletionTimestamp
  );
  assert.ok(marked && deleting && marked.rv < deleting.rv, "marked, then deleted");
  const digest = await stack.registry.digestOf(`${stack.prefix}/${VM}`, "hibernate");
  assert.ok(digest);
  return { cs, node, digest };
}

/**
 * The woken main: restored from that snapshot, the tag dropped only after the VM was live (the
 * simulator reports the VM ready before its pod can read live; the operator deletes after).
 */
async function assertRestoredThenDropped(
  stack: Stack,
  pod: Pod,
  digest: string,
  eventsBefore: number,
  wokenAt: number,
): Promise<void> {
  const vm = await stack.sim.vm(NS, "rel-0");
  assert.equal(vm?.restoredFrom, digest, "the VM was restored from the released snapshot");
  await waitUntil(async () => (await stack.tagsOf(VM)).length === 0, {
    what: `${VM}:hibernate dropped`,
    timeoutMs: 30_000,
  });
  const ready = (await stack.sim.events(eventsBefore)).events.find((e) =>
    e.type === "ready" && e.namespace === NS && e.name === "rel-0"
  );
  assert.ok(ready, "the simulator reported the restored VM ready");
  assert.equal(ready.digest, digest);
  const deletes = stack.proxy.requestsFor(`${stack.prefix}/${VM}`, "DELETE")
    .filter((d) => d.at >= wokenAt);
  assert.ok(deletes.length > 0, "the operator deleted the snapshot");
  for (const d of deletes) {
    assert.ok(d.at >= ready.at, `snapshot DELETE at ${d.at} before the VM ran at ${ready.at}`);
  }
  assert.equal(pod.metadata.annotations?.[ANNOTATION_RESTORE_FROM_HIBERNATE], "true");
}

/** The restore pod's affinity: only a preference (weight 100) for the hint node. */
function assertPrefersHint(pod: Pod, hint: string): void {
  const affinity = pod.spec?.affinity?.nodeAffinity;
  assert.equal(affinity?.requiredDuringSchedulingIgnoredDuringExecution, undefined);
  assert.deepEqual(affinity?.preferredDuringSchedulingIgnoredDuringExecution, [{
    weight: 100,
    preference: {
      matchExpressions: [{ key: "kubernetes.io/hostname", operator: "In", values: [hint] }],
    },
  }]);
}

e2eSuite(
  "release suspend: seat given back, wake on the hint node, or elsewhere once a seat frees",
  { nodes: NODES.map((name) => ({ name, pool: "default", seats: 4 })) },
  async (stack, step) => {
    await stack.namespace(NS);
    const sets = await recordTimeline(stack.admin, CocoonSets, NS);
    const pods = await recordTimeline(stack.admin, Pods, NS);
    let cs = await createSet(stack, NS, "rel", { hibernatePolicy: "release" });
    try {
      await step("a running release-policy set", async () => {
        cs = await waitSet(stack, cs, "Running", inPhase("Running"));
      });

      let released = { node: "", digest: "" };
      let wokenAt = 0;
      let eventsBefore = 0;
      await step("suspend: pod deleted, seat freed, snapshot and node hint kept", async () => {
        const r = await release(stack, cs, pods, 1);
        cs = r.cs;
        released = r;
      });

      await step("wake: restored on the hint node, snapshot dropped once live", async () => {
        const before = (await stack.sim.events()).next - 1;
        const wokenAt = Date.now();
        cs = await patchSpec(stack, cs, { suspend: false });
        const pod = await waitPod(stack, NS, "rel-0", "live on a node", (p) => !!p.spec?.nodeName);
        assertPrefersHint(pod, released.node);
        assert.equal(pod.spec?.nodeName, released.node, "back on the node it left");
        // Waking was written before the restore pod was created.
        const waking = sets.first((s) => s.object.status?.phase === "Waking");
        const created = pods.first((s) => s.object.metadata.uid === pod.metadata.uid);
        assert.ok(waking && created && waking.rv < created.rv, "Waking is durable first");
        cs = await waitSet(
          stack,
          cs,
          "Running",
          (c) => inPhase("Running")(c) && !c.metadata.annotations?.[ANNOTATION_HIBERNATED_ON_NODE],
        );
        await assertRestoredThenDropped(stack, pod, released.digest, before, wokenAt);
        assert.equal(
          await stack.metric("cocoon_operator_slot_release_wake_total", {
            ...LABELS,
            placement: "hint-node",
          }),
          1,
        );
        assert.equal(
          await stack.metric("cocoon_operator_slot_release_wake_total", {
            ...LABELS,
            placement: "pool",
          }),
          0,
        );
        assert.deepEqual(await eventsWith(stack, cs, "WakeNoCapacity"), []);
      });

      await step("hint node full: Unschedulable, WakeNoCapacity while no seat", async () => {
        const r = await release(stack, cs, pods, 2);
        cs = r.cs;
        released = r;
        for (const node of NODES) await stack.sim.setSeats(node, 0);
        eventsBefore = (await stack.sim.events()).next - 1;
        wokenAt = Date.now();
        cs = await patchSpec(stack, cs, { suspend: false });
        const ev = await waitEvent(stack, cs, "WakeNoCapacity");
        assert.equal(ev.type, "Warning");
        assert.match(
          ev.message ?? "",
          /^main pod rel-0 unschedulable: 0\/2 nodes are available: 2 Too many pods\./,
        );
        await waitMetric(
          stack,
          "cocoon_operator_slot_release_wake_unschedulable_total",
          LABELS,
          (v) => v >= 1,
        );
        const waiting = await waitSet(stack, cs, "Waking", inPhase("Waking"));
        assert.deepEqual(await stack.tagsOf(VM), ["hibernate"], "the snapshot waits too");
        assert.equal(waiting.metadata.annotations?.[ANNOTATION_HIBERNATED_ON_NODE], released.node);
        const pod = await stack.admin.get(Pods, NS, "rel-0");
        assert.equal(pod.spec?.nodeName, undefined);
        assertPrefersHint(pod, released.node);
      });

      await step(
        "a seat frees on the other node: the wake lands there (placement pool)",
        async () => {
          const other = NODES.find((n) => n !== released.node)!;
          await stack.sim.setSeats(other, 4);
          const pod = await waitPod(stack, NS, "rel-0", "bound", (p) => !!p.spec?.nodeName);
          assert.equal(pod.spec?.nodeName, other);
          cs = await waitSet(
            stack,
            cs,
            "Running",
            (c) =>
              inPhase("Running")(c) && !c.metadata.annotations?.[ANNOTATION_HIBERNATED_ON_NODE],
          );
          await assertRestoredThenDropped(stack, pod, released.digest, eventsBefore, wokenAt);
          assert.equal(
            await stack.metric("cocoon_operator_slot_release_wake_total", {
              ...LABELS,
              placement: "pool",
            }),
            1,
          );
          assert.equal(
            await stack.metric("cocoon_operator_slot_release_wake_total", {
              ...LABELS,
              placement: "hint-node",
            }),
            1,
          );
          assert.equal(await stack.sim.seatsUsed(other), 1);
          await stack.sim.setSeats(released.node, 4);
        },
      );
    } finally {
      await sets.stop();
      await pods.stop();
    }
  },
);
