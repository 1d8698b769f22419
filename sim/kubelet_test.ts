import assert from "node:assert/strict";
import { type Pod, Pods } from "../kube/core.ts";
import { newApiError } from "../kube/errors.ts";
import type { FakeAction } from "../kube/testing/fake.ts";
import { FakeClock } from "../kube/testing/fake_clock.ts";
import { waitFor } from "../kube/testing/wait.ts";
import {
  ANNOTATION_COCOON_SET_GENERATION,
  ANNOTATION_HIBERNATE,
  ANNOTATION_IP,
  ANNOTATION_KEEP_SNAPSHOT_ON_DELETE,
  ANNOTATION_LIFECYCLE_OBSERVED_GENERATION,
  ANNOTATION_LIFECYCLE_STATE,
  ANNOTATION_LIFECYCLE_STATE_MESSAGE,
  ANNOTATION_RESTORE_FROM_HIBERNATE,
  ANNOTATION_VMID,
  ANNOTATION_VNC_PORT,
} from "../common/meta/keys.ts";
import { isContainerRunning, isPodReady } from "../common/meta/pod.ts";
import { startFakeSim } from "./testing/fake_sim.ts";
import { operatorPod, vmNameOf } from "./testing/pods.ts";

const NS = "ns";

function ann(pod: Pod, key: string): string | undefined {
  return pod.metadata.annotations?.[key];
}

/** The lifecycle states written to a pod, in order, from the recorded patch bodies. */
function lifecycleWrites(actions: FakeAction[], name: string): string[] {
  return actions
    .filter((a) => a.verb === "patch" && a.name === name && !a.subresource)
    .map((a) => (a.patch as { metadata?: { annotations?: Record<string, unknown> } }).metadata)
    .map((m) => m?.annotations?.[ANNOTATION_LIFECYCLE_STATE])
    .filter((s): s is string => typeof s === "string");
}

/** Every patch that writes a lifecycle state also writes the observed generation. */
function assertStateAndGenerationTogether(actions: FakeAction[]): void {
  for (const a of actions) {
    if (a.verb !== "patch") continue;
    const annotations = (a.patch as { metadata?: { annotations?: Record<string, unknown> } })
      .metadata?.annotations ?? {};
    assert.equal(
      ANNOTATION_LIFECYCLE_STATE in annotations,
      ANNOTATION_LIFECYCLE_OBSERVED_GENERATION in annotations,
      `state and observed generation travel together: ${JSON.stringify(annotations)}`,
    );
  }
}

async function podWhen(
  get: () => Promise<Pod>,
  what: string,
  ok: (p: Pod) => boolean,
): Promise<Pod> {
  return await waitFor(what, async () => {
    const p = await get();
    return ok(p) ? p : undefined;
  });
}

Deno.test("kubelet: boot writes id, ip, ready + generation together, then a Running Ready status", async () => {
  const t = await startFakeSim();
  try {
    await t.fake.create(
      Pods,
      operatorPod({ namespace: NS, cocoonSet: "demo", slot: 0, generation: 3 }),
    );
    const pod = await podWhen(() => t.fake.get(Pods, NS, "demo-0"), "demo-0 ready", isPodReady);
    assert.match(ann(pod, ANNOTATION_VMID) ?? "", /^sim-[0-9a-f]{16}$/);
    assert.match(ann(pod, ANNOTATION_IP) ?? "", /^10\.\d+\.\d+\.\d+$/);
    assert.equal(ann(pod, ANNOTATION_LIFECYCLE_STATE), "ready");
    assert.equal(ann(pod, ANNOTATION_LIFECYCLE_OBSERVED_GENERATION), "3");
    assert.equal(ann(pod, ANNOTATION_LIFECYCLE_STATE_MESSAGE), undefined);
    assert.equal(ann(pod, ANNOTATION_VNC_PORT), undefined, "no VNC for an ssh VM");
    assert.equal(pod.status?.phase, "Running");
    assert.equal(pod.status?.podIP, ann(pod, ANNOTATION_IP));
    const conditions = Object.fromEntries(
      (pod.status?.conditions ?? []).map((c) => [c.type, c.status]),
    );
    assert.deepEqual(conditions, {
      PodScheduled: "True",
      Initialized: "True",
      ContainersReady: "True",
      Ready: "True",
    });
    assert.equal(pod.status?.containerStatuses?.length, 1);
    assert.equal(pod.status?.containerStatuses?.[0].name, "agent");
    assert.ok(pod.status?.containerStatuses?.[0].state?.running);
    assert.deepEqual(lifecycleWrites(t.fake.actions, "demo-0"), ["creating", "ready"]);
    const statusWrites = t.fake.actions.filter((a) =>
      a.name === "demo-0" && a.subresource === "status"
    );
    assert.equal(statusWrites.length, 1, "status goes through the status subresource");
    assertStateAndGenerationTogether(t.fake.actions);
    assert.equal(t.sim.counters.booted, 1);
    assert.equal(t.sim.vm(NS, "demo-0")?.node, "vk-a");
  } finally {
    await t.close();
  }
});

Deno.test("kubelet: no generation stamp echoes 0; a VNC VM gets a port", async () => {
  const t = await startFakeSim();
  try {
    await t.fake.create(
      Pods,
      operatorPod({
        namespace: NS,
        cocoonSet: "vnc",
        slot: 0,
        annotations: { "vm.cocoonstack.io/conn-type": "vnc" },
      }),
    );
    const pod = await podWhen(() => t.fake.get(Pods, NS, "vnc-0"), "vnc-0 ready", isPodReady);
    assert.equal(ann(pod, ANNOTATION_LIFECYCLE_OBSERVED_GENERATION), "0");
    assert.match(ann(pod, ANNOTATION_VNC_PORT) ?? "", /^59\d\d$/);
  } finally {
    await t.close();
  }
});

Deno.test("kubelet: static toolboxes keep their id and ip; without them the VM fails", async () => {
  const t = await startFakeSim();
  try {
    await t.fake.create(
      Pods,
      operatorPod({
        namespace: NS,
        cocoonSet: "demo",
        slot: "tb",
        staticToolbox: true,
        annotations: { [ANNOTATION_VMID]: "qemu-1", [ANNOTATION_IP]: "10.0.0.1" },
      }),
    );
    await t.fake.create(
      Pods,
      operatorPod({ namespace: NS, cocoonSet: "demo", slot: "bare", staticToolbox: true }),
    );
    const tb = await podWhen(() => t.fake.get(Pods, NS, "demo-tb"), "toolbox ready", isPodReady);
    assert.equal(ann(tb, ANNOTATION_VMID), "qemu-1");
    assert.equal(ann(tb, ANNOTATION_IP), "10.0.0.1");
    assert.equal(tb.status?.podIP, "10.0.0.1");
    const bare = await podWhen(
      () => t.fake.get(Pods, NS, "demo-bare"),
      "bare toolbox failed",
      (p) => ann(p, ANNOTATION_LIFECYCLE_STATE) === "failed",
    );
    assert.match(
      ann(bare, ANNOTATION_LIFECYCLE_STATE_MESSAGE) ?? "",
      /missing pre-assigned IP\/VMID/,
    );
    assert.equal(bare.status?.reason, "ProviderFailed");
    assert.ok(!isPodReady(bare));

    // A hibernate request leaves the static VM alone.
    await t.fake.patch(Pods, NS, "demo-tb", "merge", {
      metadata: {
        annotations: { [ANNOTATION_HIBERNATE]: "true", [ANNOTATION_COCOON_SET_GENERATION]: "2" },
      },
    });
    const echoed = await podWhen(
      () => t.fake.get(Pods, NS, "demo-tb"),
      "generation echoed",
      (p) => ann(p, ANNOTATION_LIFECYCLE_OBSERVED_GENERATION) === "2",
    );
    assert.equal(ann(echoed, ANNOTATION_LIFECYCLE_STATE), "ready");
    assert.equal(ann(echoed, ANNOTATION_VMID), "qemu-1");
    assert.deepEqual(t.stub.tagsOf(t.repo(vmNameOf(NS, "demo", "tb"))), []);
  } finally {
    await t.close();
  }
});

Deno.test("kubelet: hibernate pushes :hibernate, clears id and ip, reports hibernated; wake boots a fresh VM", async () => {
  const t = await startFakeSim();
  const vm = vmNameOf(NS, "demo", 0);
  try {
    await t.fake.create(
      Pods,
      operatorPod({ namespace: NS, cocoonSet: "demo", slot: 0, generation: 1 }),
    );
    const first = await podWhen(() => t.fake.get(Pods, NS, "demo-0"), "demo-0 ready", isPodReady);
    const firstId = ann(first, ANNOTATION_VMID);

    await t.fake.patch(Pods, NS, "demo-0", "merge", {
      metadata: {
        annotations: { [ANNOTATION_COCOON_SET_GENERATION]: "2", [ANNOTATION_HIBERNATE]: "true" },
      },
    });
    const hibernated = await podWhen(
      () => t.fake.get(Pods, NS, "demo-0"),
      "demo-0 hibernated",
      (p) => ann(p, ANNOTATION_LIFECYCLE_STATE) === "hibernated",
    );
    assert.equal(ann(hibernated, ANNOTATION_LIFECYCLE_OBSERVED_GENERATION), "2");
    assert.equal(ann(hibernated, ANNOTATION_VMID), undefined);
    assert.equal(ann(hibernated, ANNOTATION_IP), undefined);
    assert.deepEqual(t.stub.tagsOf(t.repo(vm)), ["hibernate"]);
    const snapshot = JSON.parse(t.stub.contentOf(t.repo(vm), "hibernate")!);
    assert.equal(snapshot.tag, "hibernate");
    assert.equal(snapshot.vmID, firstId);
    const gone = await podWhen(
      () => t.fake.get(Pods, NS, "demo-0"),
      "demo-0 not running",
      (p) => !isContainerRunning(p),
    );
    assert.equal(gone.status?.phase, "Pending");
    assert.ok(!isPodReady(gone));
    assert.equal(gone.status?.podIP, undefined);
    assert.deepEqual(lifecycleWrites(t.fake.actions, "demo-0"), [
      "creating",
      "ready",
      "hibernating",
      "hibernated",
    ]);

    // A new stamp while hibernated is echoed with the same state.
    await t.fake.patch(Pods, NS, "demo-0", "merge", {
      metadata: { annotations: { [ANNOTATION_COCOON_SET_GENERATION]: "3" } },
    });
    await podWhen(
      () => t.fake.get(Pods, NS, "demo-0"),
      "generation 3 echoed",
      (p) =>
        ann(p, ANNOTATION_LIFECYCLE_OBSERVED_GENERATION) === "3" &&
        ann(p, ANNOTATION_LIFECYCLE_STATE) === "hibernated",
    );

    // Wake.
    await t.fake.patch(Pods, NS, "demo-0", "merge", {
      metadata: { annotations: { [ANNOTATION_HIBERNATE]: null } },
    });
    const woken = await podWhen(
      () => t.fake.get(Pods, NS, "demo-0"),
      "demo-0 woken",
      (p) => isPodReady(p) && isContainerRunning(p) && !!ann(p, ANNOTATION_VMID),
    );
    assert.notEqual(ann(woken, ANNOTATION_VMID), firstId, "a woken VM has a fresh id");
    assert.equal(t.sim.vm(NS, "demo-0")?.restoredFrom, t.stub.digestOf(t.repo(vm), "hibernate"));
    assert.equal(ann(woken, ANNOTATION_LIFECYCLE_STATE), "ready");
    assert.equal(ann(woken, ANNOTATION_LIFECYCLE_OBSERVED_GENERATION), "3");
    assert.deepEqual(lifecycleWrites(t.fake.actions, "demo-0").slice(-3), [
      "hibernated",
      "creating",
      "ready",
    ]);
    assert.equal(t.sim.counters.hibernated, 1);
    assert.equal(t.sim.counters.woken, 1);
    assertStateAndGenerationTogether(t.fake.actions);

    // A second hibernation pushes different content (a new digest) to the same tag.
    const firstDigest = t.stub.digestOf(t.repo(vm), "hibernate");
    await t.fake.patch(Pods, NS, "demo-0", "merge", {
      metadata: { annotations: { [ANNOTATION_HIBERNATE]: "true" } },
    });
    await waitFor("second hibernation", () => t.sim.counters.hibernated === 2);
    assert.notEqual(t.stub.digestOf(t.repo(vm), "hibernate"), firstDigest);
  } finally {
    await t.close();
  }
});

Deno.test("kubelet: restore-from-hibernate needs the :hibernate snapshot", async () => {
  const t = await startFakeSim();
  try {
    const restore = { [ANNOTATION_RESTORE_FROM_HIBERNATE]: "true" };
    await t.stub.put(t.repo(vmNameOf(NS, "has", 0)), "hibernate", '{"seed":1}');
    await t.fake.create(
      Pods,
      operatorPod({ namespace: NS, cocoonSet: "has", slot: 0, annotations: restore }),
    );
    await t.fake.create(
      Pods,
      operatorPod({ namespace: NS, cocoonSet: "none", slot: 0, annotations: restore }),
    );
    await podWhen(() => t.fake.get(Pods, NS, "has-0"), "restored", isPodReady);
    assert.equal(
      t.sim.vm(NS, "has-0")?.restoredFrom,
      t.stub.digestOf(t.repo(vmNameOf(NS, "has", 0)), "hibernate"),
      "the VM names the manifest it was restored from",
    );
    const failed = await podWhen(
      () => t.fake.get(Pods, NS, "none-0"),
      "restore without snapshot failed",
      (p) => ann(p, ANNOTATION_LIFECYCLE_STATE) === "failed",
    );
    assert.match(
      ann(failed, ANNOTATION_LIFECYCLE_STATE_MESSAGE) ?? "",
      /vk-ns-none-0:hibernate: not found/,
    );
    assert.equal(ann(failed, ANNOTATION_VMID), undefined);
    assert.ok(
      t.stub.requests.some((r) =>
        r.method === "GET" && r.path === "/v2/sim/vk-ns-has-0/manifests/hibernate"
      ),
      "the snapshot is pulled",
    );
  } finally {
    await t.close();
  }
});

Deno.test("kubelet: fork-from needs the source VM running on the same node", async () => {
  const t = await startFakeSim({ nodes: [{ name: "vk-a", seats: 4 }, { name: "vk-b", seats: 4 }] });
  try {
    await t.fake.create(
      Pods,
      operatorPod({ namespace: NS, cocoonSet: "demo", slot: 0, pinnedNode: "vk-a" }),
    );
    await podWhen(() => t.fake.get(Pods, NS, "demo-0"), "main ready", isPodReady);
    await t.fake.create(
      Pods,
      operatorPod({ namespace: NS, cocoonSet: "demo", slot: 1, nodeName: "vk-a" }),
    );
    await t.fake.create(
      Pods,
      operatorPod({ namespace: NS, cocoonSet: "demo", slot: 2, nodeName: "vk-b" }),
    );
    await t.fake.create(
      Pods,
      operatorPod({ namespace: NS, cocoonSet: "orphan", slot: 1, nodeName: "vk-a" }),
    );
    const forked = await podWhen(() => t.fake.get(Pods, NS, "demo-1"), "fork ready", isPodReady);
    assert.equal(forked.spec?.nodeName, "vk-a");
    for (const name of ["demo-2", "orphan-1"]) {
      const p = await podWhen(
        () => t.fake.get(Pods, NS, name),
        `${name} failed`,
        (p) => ann(p, ANNOTATION_LIFECYCLE_STATE) === "failed",
      );
      assert.match(
        ann(p, ANNOTATION_LIFECYCLE_STATE_MESSAGE) ?? "",
        /fork source vm .* not running/,
      );
    }
  } finally {
    await t.close();
  }
});

Deno.test("kubelet: delete pushes :latest by snapshot policy and role, then finalizes", async () => {
  const t = await startFakeSim({ nodes: [{ name: "vk-a", seats: 8 }] });
  try {
    const pods = [
      operatorPod({ namespace: NS, cocoonSet: "all", slot: 0 }),
      operatorPod({ namespace: NS, cocoonSet: "mo", slot: 0, snapshotPolicy: "main-only" }),
      operatorPod({
        namespace: NS,
        cocoonSet: "mo",
        slot: 1,
        snapshotPolicy: "main-only",
        nodeName: "vk-a",
      }),
      operatorPod({ namespace: NS, cocoonSet: "nev", slot: 0, snapshotPolicy: "never" }),
      operatorPod({
        namespace: NS,
        cocoonSet: "keep",
        slot: 0,
        annotations: { [ANNOTATION_KEEP_SNAPSHOT_ON_DELETE]: "true" },
      }),
    ];
    for (const p of pods) {
      await t.fake.create(Pods, p);
      await podWhen(
        () => t.fake.get(Pods, NS, p.metadata.name!),
        `${p.metadata.name} ready`,
        isPodReady,
      );
    }
    for (const p of pods) await t.fake.delete(Pods, NS, p.metadata.name!);
    await waitFor(
      "all finalized",
      async () => (await t.fake.list(Pods, { namespace: NS })).items.length === 0,
    );
    const tags = (set: string, slot: number) => t.stub.tagsOf(t.repo(vmNameOf(NS, set, slot)));
    assert.deepEqual(tags("all", 0), ["latest"]);
    assert.deepEqual(tags("mo", 0), ["latest"]);
    assert.deepEqual(tags("mo", 1), [], "main-only does not snapshot a sub-agent");
    assert.deepEqual(tags("nev", 0), []);
    assert.deepEqual(tags("keep", 0), [], "a seat release keeps no :latest");
    const latest = JSON.parse(t.stub.contentOf(t.repo(vmNameOf(NS, "all", 0)), "latest")!);
    assert.equal(latest.tag, "latest");
    const finalDeletes = t.fake.actions.filter((a) =>
      a.verb === "delete" && a.deleteOptions?.gracePeriodSeconds === 0
    );
    assert.equal(finalDeletes.length, pods.length);
    assert.equal(t.sim.counters.finalized, pods.length);
    assert.equal(t.sim.vm(NS, "all-0"), undefined);
  } finally {
    await t.close();
  }
});

Deno.test("kubelet: a hibernated VM is not snapshotted again on delete", async () => {
  const t = await startFakeSim();
  const vm = vmNameOf(NS, "demo", 0);
  try {
    await t.fake.create(
      Pods,
      operatorPod({
        namespace: NS,
        cocoonSet: "demo",
        slot: 0,
        annotations: { [ANNOTATION_HIBERNATE]: "true" },
      }),
    );
    await waitFor("hibernated", () => t.sim.vm(NS, "demo-0")?.phase === "hibernated");
    await t.fake.delete(Pods, NS, "demo-0");
    await waitFor("finalized", () => t.sim.counters.finalized === 1);
    assert.deepEqual(t.stub.tagsOf(t.repo(vm)), ["hibernate"]);
  } finally {
    await t.close();
  }
});

Deno.test("knobs: lifecycle and pod-failed failures, at boot and on a running VM", async () => {
  const t = await startFakeSim({
    knobsFor: (pod) =>
      pod.metadata.labels?.["cocoonset.cocoonstack.io/name"] === "hooked"
        ? { fail: "pod-failed", failMessage: "hook says no" }
        : undefined,
  });
  try {
    await t.fake.create(
      Pods,
      operatorPod({
        namespace: NS,
        cocoonSet: "lf",
        slot: 0,
        generation: 4,
        annotations: {
          "sim.cocoonstack.io/fail": "lifecycle",
          "sim.cocoonstack.io/fail-message": "disk on fire",
        },
      }),
    );
    await t.fake.create(Pods, operatorPod({ namespace: NS, cocoonSet: "hooked", slot: 0 }));
    await t.fake.create(Pods, operatorPod({ namespace: NS, cocoonSet: "later", slot: 0 }));

    const lf = await podWhen(
      () => t.fake.get(Pods, NS, "lf-0"),
      "lf-0 failed",
      (p) => ann(p, ANNOTATION_LIFECYCLE_STATE) === "failed",
    );
    assert.equal(ann(lf, ANNOTATION_LIFECYCLE_STATE_MESSAGE), "disk on fire");
    assert.equal(ann(lf, ANNOTATION_LIFECYCLE_OBSERVED_GENERATION), "4");
    const hooked = await podWhen(
      () => t.fake.get(Pods, NS, "hooked-0"),
      "hooked-0 Failed",
      (p) => p.status?.phase === "Failed",
    );
    assert.equal(hooked.status?.message, "hook says no");
    assert.ok(hooked.status?.containerStatuses?.[0].state?.terminated);

    await podWhen(() => t.fake.get(Pods, NS, "later-0"), "later-0 ready", isPodReady);
    await t.fake.patch(Pods, NS, "later-0", "merge", {
      metadata: { annotations: { "sim.cocoonstack.io/fail": "lifecycle" } },
    });
    const later = await podWhen(
      () => t.fake.get(Pods, NS, "later-0"),
      "later-0 failed",
      (p) => ann(p, ANNOTATION_LIFECYCLE_STATE) === "failed",
    );
    assert.equal(later.status?.phase, "Running", "a lifecycle failure leaves the phase alone");
    assert.equal(ann(later, ANNOTATION_LIFECYCLE_STATE_MESSAGE), "simulated VM failure");
    assert.equal(t.sim.counters.lifecycleFailures, 2);
    assert.equal(t.sim.counters.podFailures, 1);

    // A Failed pod is deleted at once by the API server: nothing to finalize.
    await t.fake.delete(Pods, NS, "hooked-0");
    await waitFor(
      "hooked-0 gone",
      async () =>
        !(await t.fake.list(Pods, { namespace: NS })).items.some((p) =>
          p.metadata.name === "hooked-0"
        ),
    );
  } finally {
    await t.close();
  }
});

Deno.test("knobs: a slow hibernate stays hibernating until its delay passes", async () => {
  const clock = new FakeClock(Date.parse("2026-01-01T00:00:00Z"));
  const t = await startFakeSim({ clock, latencies: { hibernateMs: 10 } });
  try {
    await t.fake.create(
      Pods,
      operatorPod({
        namespace: NS,
        cocoonSet: "slow",
        slot: 0,
        annotations: { "sim.cocoonstack.io/hibernate-delay-ms": "60000" },
      }),
    );
    await podWhen(() => t.fake.get(Pods, NS, "slow-0"), "ready", isPodReady);
    await t.fake.patch(Pods, NS, "slow-0", "merge", {
      metadata: { annotations: { [ANNOTATION_HIBERNATE]: "true" } },
    });
    await podWhen(
      () => t.fake.get(Pods, NS, "slow-0"),
      "hibernating",
      (p) => ann(p, ANNOTATION_LIFECYCLE_STATE) === "hibernating",
    );
    clock.advance(59_000);
    // A later pod proves the simulator kept working meanwhile.
    await t.fake.create(Pods, operatorPod({ namespace: NS, cocoonSet: "marker", slot: 0 }));
    await podWhen(() => t.fake.get(Pods, NS, "marker-0"), "marker ready", isPodReady);
    assert.equal(
      ann(await t.fake.get(Pods, NS, "slow-0"), ANNOTATION_LIFECYCLE_STATE),
      "hibernating",
    );
    clock.advance(1_000);
    await podWhen(
      () => t.fake.get(Pods, NS, "slow-0"),
      "hibernated",
      (p) => ann(p, ANNOTATION_LIFECYCLE_STATE) === "hibernated",
    );
  } finally {
    await t.close();
  }
});

Deno.test("knobs: push-fail holds the hibernation until the knob is lifted", async () => {
  const t = await startFakeSim();
  const vm = vmNameOf(NS, "pf", 0);
  try {
    await t.fake.create(
      Pods,
      operatorPod({
        namespace: NS,
        cocoonSet: "pf",
        slot: 0,
        annotations: { "sim.cocoonstack.io/push-fail": "true" },
      }),
    );
    await podWhen(() => t.fake.get(Pods, NS, "pf-0"), "ready", isPodReady);
    await t.fake.patch(Pods, NS, "pf-0", "merge", {
      metadata: { annotations: { [ANNOTATION_HIBERNATE]: "true" } },
    });
    await waitFor("two refused pushes", () => t.sim.counters.pushFailures >= 2);
    const holding = await t.fake.get(Pods, NS, "pf-0");
    assert.equal(ann(holding, ANNOTATION_LIFECYCLE_STATE), "hibernating");
    assert.ok(ann(holding, ANNOTATION_VMID), "the VM still runs");
    assert.deepEqual(t.stub.tagsOf(t.repo(vm)), []);
    await t.fake.patch(Pods, NS, "pf-0", "merge", {
      metadata: { annotations: { "sim.cocoonstack.io/push-fail": null } },
    });
    await podWhen(
      () => t.fake.get(Pods, NS, "pf-0"),
      "hibernated",
      (p) => ann(p, ANNOTATION_LIFECYCLE_STATE) === "hibernated",
    );
    assert.deepEqual(t.stub.tagsOf(t.repo(vm)), ["hibernate"]);
  } finally {
    await t.close();
  }
});

Deno.test("knobs: a registry outage on delete does not hold the pod; globals apply to all", async () => {
  const t = await startFakeSim({ knobs: { pushFail: true } });
  try {
    await t.fake.create(Pods, operatorPod({ namespace: NS, cocoonSet: "g", slot: 0 }));
    await podWhen(() => t.fake.get(Pods, NS, "g-0"), "ready", isPodReady);
    await t.fake.delete(Pods, NS, "g-0");
    await waitFor("finalized", () => t.sim.counters.finalized === 1);
    assert.equal(t.sim.counters.pushFailures, 1);
    assert.deepEqual(t.stub.tagsOf(t.repo(vmNameOf(NS, "g", 0))), []);
  } finally {
    await t.close();
  }
});

Deno.test("kubelet: API errors are retried with backoff and never block other pods", async () => {
  const t = await startFakeSim();
  try {
    let failures = 0;
    t.fake.addReactor((a) => {
      if (a.name === "flaky-0" && a.subresource === "status" && failures < 3) {
        failures++;
        return newApiError(500, "InternalError", { resource: "pods", name: a.name }, "etcd hiccup");
      }
      return undefined;
    });
    await t.fake.create(Pods, operatorPod({ namespace: NS, cocoonSet: "flaky", slot: 0 }));
    await t.fake.create(Pods, operatorPod({ namespace: NS, cocoonSet: "fine", slot: 0 }));
    await podWhen(() => t.fake.get(Pods, NS, "fine-0"), "fine ready", isPodReady);
    const flaky = await podWhen(() => t.fake.get(Pods, NS, "flaky-0"), "flaky ready", isPodReady);
    assert.equal(failures, 3);
    assert.ok(t.sim.counters.retries >= 3);
    assert.equal(t.sim.counters.booted, 2, "the failed status write did not boot the VM twice");
    assert.equal(
      lifecycleWrites(t.fake.actions, "flaky-0").filter((s) => s === "ready").length,
      1,
    );
    assert.ok(ann(flaky, ANNOTATION_VMID));
  } finally {
    await t.close();
  }
});

Deno.test("knobs: lifecycle=silent plays vk-cocoon HEAD: no lifecycle annotations, save → push → remove", async () => {
  const clock = new FakeClock(Date.parse("2026-01-01T00:00:00Z"));
  const t = await startFakeSim({ clock });
  const vm = vmNameOf(NS, "quiet", 0);
  try {
    await t.fake.create(
      Pods,
      operatorPod({
        namespace: NS,
        cocoonSet: "quiet",
        slot: 0,
        annotations: {
          "sim.cocoonstack.io/lifecycle": "silent",
          "sim.cocoonstack.io/remove-delay-ms": "60000",
        },
      }),
    );
    const booted = await podWhen(() => t.fake.get(Pods, NS, "quiet-0"), "ready", isPodReady);
    assert.ok(ann(booted, ANNOTATION_VMID), "the VM id is written");
    await t.fake.patch(Pods, NS, "quiet-0", "merge", {
      metadata: { annotations: { [ANNOTATION_HIBERNATE]: "true" } },
    });
    // Pushed, not yet removed: the tag exists while the pod still shows the VM.
    await waitFor(
      "hibernate pushed",
      () => t.stub.tagsOf(t.repo(vm)).includes("hibernate"),
      30_000,
    );
    assert.ok(ann(await t.fake.get(Pods, NS, "quiet-0"), ANNOTATION_VMID));
    clock.advance(60_000);
    await podWhen(
      () => t.fake.get(Pods, NS, "quiet-0"),
      "VM id cleared after the removal",
      (p) => ann(p, ANNOTATION_VMID) === undefined,
    );
    const pod = await t.fake.get(Pods, NS, "quiet-0");
    assert.equal(ann(pod, ANNOTATION_LIFECYCLE_STATE), undefined);
    assert.deepEqual(lifecycleWrites(t.fake.actions, "quiet-0"), []);
  } finally {
    await t.close();
  }
});
