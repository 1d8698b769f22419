/**
 * The wake step on the fake API (wake.ts): the counterparts of the Go operator's wake tests
 * (named after them in tests/PARITY.md) and what this port adds.
 */
import assert from "node:assert/strict";
import { configure, type LogRecord, reset } from "@logtape/logtape";
import { type WakeOutcome, wakeOutcome, type WakeSignals } from "./wake.ts";
import {
  COCOON_HIBERNATION_PHASE_ACTIVE,
  COCOON_HIBERNATION_PHASE_FAILED,
  COCOON_HIBERNATION_PHASE_HIBERNATED,
  COCOON_HIBERNATION_PHASE_WAKING,
} from "../common/apis/v1/mod.ts";
import { readHibernateState } from "../common/meta/hibernate.ts";
import { ANNOTATION_HIBERNATE } from "../common/meta/keys.ts";
import { ANNOTATION_ORPHAN_HIBERNATE_TAG } from "../common/meta/orphan_tag.ts";
import { parseRfc3339, Pods } from "../kube/mod.ts";
import { FakeRegistry } from "../snapshot/testing/fake.ts";
import {
  at,
  Harness,
  HIBERNATED_LIFECYCLE,
  histogramCount,
  NS,
  POD,
  ready,
  readyOf,
  request,
  VM,
  vmPod,
} from "./_fixtures.ts";
import { REQUEUE_INTERVAL_MS, WAKE_TIMEOUT_MS } from "./status.ts";

// --- wake ------------------------------------------------------------------------------------

Deno.test("wake: clears the annotation, waits in Waking, keeps the tag", async () => {
  const registry = new FakeRegistry();
  registry.put(VM, "hibernate");
  const h = Harness.create([
    request("hib", "Wake", { status: { phase: COCOON_HIBERNATION_PHASE_HIBERNATED, vmName: VM } }),
    vmPod({ hibernate: true, lifecycle: HIBERNATED_LIFECYCLE }),
  ], { registry });
  assert.deepEqual(await h.reconcile("hib"), { requeueAfter: REQUEUE_INTERVAL_MS });
  const pod = await h.pod();
  assert.equal(pod.metadata.annotations?.[ANNOTATION_HIBERNATE], undefined);
  assert.equal((await h.hib("hib")).status?.phase, COCOON_HIBERNATION_PHASE_WAKING);
  assert.equal(registry.contains(VM, "hibernate"), true);
  // Idempotent: an already-clear annotation is not patched again.
  const podWrites = h.writes("pods");
  await h.reconcile("hib");
  assert.equal(h.writes("pods"), podWrites);
  await h.close();
});

Deno.test("wake: past 5 minutes → Failed, WakeTimedOut, histogram result=timeout", async () => {
  const timeouts = await histogramCount("wake", "timeout");
  const h = Harness.create([
    request("hib", "Wake", {
      status: {
        phase: COCOON_HIBERNATION_PHASE_WAKING,
        vmName: VM,
        conditions: [ready("False", "Pending", at(-2 * WAKE_TIMEOUT_MS))],
      },
    }),
    vmPod(),
  ]);
  assert.deepEqual(await h.reconcile("hib"), {});
  const got = await h.hib("hib");
  assert.equal(got.status?.phase, COCOON_HIBERNATION_PHASE_FAILED);
  assert.equal(
    readyOf(got.status)?.message,
    "wake timed out after 5m0s; vk-cocoon never reported the container running",
  );
  assert.deepEqual(await h.reasons("hib"), ["WakeTimedOut"]);
  assert.equal(await histogramCount("wake", "timeout"), timeouts + 1);
  await h.close();
});

Deno.test("wake: Failed re-enters Waking with a fresh clock that does not re-trip", async () => {
  const stale = at(-2 * WAKE_TIMEOUT_MS);
  const h = Harness.create([
    request("hib", "Wake", {
      status: {
        phase: COCOON_HIBERNATION_PHASE_FAILED,
        conditions: [ready("False", "Failed", stale)],
      },
    }),
    vmPod(),
  ]);
  await h.reconcile("hib");
  let got = await h.hib("hib");
  assert.equal(got.status?.phase, COCOON_HIBERNATION_PHASE_WAKING);
  assert.ok(parseRfc3339(readyOf(got.status)?.lastTransitionTime)! > parseRfc3339(stale)!);
  await h.reconcile("hib");
  got = await h.hib("hib");
  assert.equal(got.status?.phase, COCOON_HIBERNATION_PHASE_WAKING, "the deadline must not re-trip");
  assert.deepEqual(await h.reasons("hib"), ["RetryRequested"]);
  await h.close();
});

Deno.test("wake: fast path — a live VM clears the residue and goes Active in one pass", async () => {
  const registry = new FakeRegistry();
  registry.put(VM, "hibernate");
  const h = Harness.create([
    request("hib", "Wake", { status: { phase: COCOON_HIBERNATION_PHASE_WAKING } }),
    vmPod({ hibernate: true, vmID: "vmid-live", running: true }),
  ], { registry });
  assert.deepEqual(await h.reconcile("hib"), {});
  assert.equal((await h.hib("hib")).status?.phase, COCOON_HIBERNATION_PHASE_ACTIVE);
  assert.equal(readHibernateState(await h.pod()), false);
  assert.equal(registry.contains(VM, "hibernate"), false);
  await h.close();
});

Deno.test("wake: VM live → tag dropped, Active, WokenActive and histogram ok once", async () => {
  const oks = await histogramCount("wake", "ok");
  const registry = new FakeRegistry();
  registry.put(VM, "hibernate");
  const h = Harness.create([
    request("hib", "Wake", { status: { phase: COCOON_HIBERNATION_PHASE_HIBERNATED, vmName: VM } }),
    vmPod({ hibernate: true, lifecycle: HIBERNATED_LIFECYCLE }),
  ], { registry });
  await h.reconcile("hib");
  assert.equal(registry.contains(VM, "hibernate"), true, "kept while the VM is not live");
  h.clock.advance(20_000);
  // vk restores: a fresh VM id and a running container.
  h.api.seed(Pods, vmPod({ vmID: "vmid-new", running: true, lifecycle: { state: "ready" } }));
  assert.deepEqual(await h.reconcile("hib"), {});
  const got = await h.hib("hib");
  assert.equal(got.status?.phase, COCOON_HIBERNATION_PHASE_ACTIVE);
  assert.equal(readyOf(got.status)?.status, "True");
  assert.equal(registry.contains(VM, "hibernate"), false);
  await h.reconcile("hib");
  assert.deepEqual(await h.reasons("hib"), ["WokenActive"]);
  const event = (await h.events()).find((e) => e.reason === "WokenActive");
  assert.equal(event?.message, `pod ${NS}/${POD} is running`);
  assert.equal(await histogramCount("wake", "ok"), oks + 1);
  await h.close();
});

// vk-cocoon pushes `:hibernate` before it tears the VM down and clears its id; the contract has it
// report lifecycle-state=hibernating meanwhile. A wake landing in that window saw the old VM
// still "live", dropped the snapshot and went Active — and then vk-cocoon removed the VM and found
// no snapshot to restore it from.
Deno.test("wake: a VM vk-cocoon is still hibernating is not live; the tag outlives it", async () => {
  const registry = new FakeRegistry();
  const h = Harness.create([
    request("hib", "Wake", { status: { phase: COCOON_HIBERNATION_PHASE_ACTIVE, vmName: VM } }),
    // A suspend raced the Wake: vk-cocoon has pushed the snapshot, the old VM still shows.
    vmPod({
      hibernate: true,
      vmID: "vmid-old",
      running: true,
      lifecycle: { state: "hibernating" },
    }),
  ], { registry });
  registry.put(VM, "hibernate");
  assert.deepEqual(await h.reconcile("hib"), { requeueAfter: REQUEUE_INTERVAL_MS });
  assert.equal(readHibernateState(await h.pod()), false, "the hibernate request is withdrawn");
  assert.equal(registry.contains(VM, "hibernate"), true, "the snapshot is kept");
  assert.equal((await h.hib("hib")).status?.phase, COCOON_HIBERNATION_PHASE_WAKING);

  // The hibernation completes (VM gone), then vk-cocoon restores from the snapshot.
  h.api.seed(Pods, vmPod({ lifecycle: HIBERNATED_LIFECYCLE }));
  await h.reconcile("hib");
  assert.equal(registry.contains(VM, "hibernate"), true, "kept until the restored VM runs");
  h.api.seed(Pods, vmPod({ vmID: "vmid-new", running: true, lifecycle: { state: "ready" } }));
  assert.deepEqual(await h.reconcile("hib"), {});
  assert.equal((await h.hib("hib")).status?.phase, COCOON_HIBERNATION_PHASE_ACTIVE);
  assert.equal(registry.contains(VM, "hibernate"), false);
  await h.close();
});

Deno.test("wake: a failing tag delete is logged and the wake still completes", async () => {
  const registry = new FakeRegistry();
  registry.put(VM, "hibernate");
  registry.failNext("deleteManifest", new Error("denied"), { times: Infinity });
  const h = Harness.create([
    request("hib", "Wake", { status: { phase: COCOON_HIBERNATION_PHASE_WAKING, vmName: VM } }),
    vmPod({ vmID: "vmid-new", running: true }),
  ], { registry });
  assert.deepEqual(await h.reconcile("hib"), {});
  assert.equal(registry.callsOf("deleteManifest", VM).length, 1, "the tag delete was tried");
  assert.equal((await h.hib("hib")).status?.phase, COCOON_HIBERNATION_PHASE_ACTIVE);
  await h.close();
});

/** The log records of the operator's loggers while fn runs, each with its rendered message. */
async function capturedLogs(fn: () => Promise<void>): Promise<{ level: string; text: string }[]> {
  const records: LogRecord[] = [];
  await configure({
    sinks: { capture: (r: LogRecord) => records.push(r) },
    loggers: [
      { category: ["cocoon-operator"], lowestLevel: "debug", sinks: ["capture"] },
      { category: ["logtape", "meta"], lowestLevel: "warning", sinks: [] },
    ],
    reset: true,
  });
  try {
    await fn();
  } finally {
    await reset();
  }
  return records.map((r) => ({ level: r.level, text: r.message.map(String).join("") }));
}

Deno.test("wake: a refused tag drop is logged naming the request; the wake completes", async () => {
  // "late" also wakes the VM and is Waking: the gate keeps the tag for it and only logs that.
  const registry = new FakeRegistry();
  registry.put(VM, "hibernate");
  const h = Harness.create([
    request("early", "Wake", {
      status: { phase: COCOON_HIBERNATION_PHASE_WAKING, vmName: VM },
      created: at(-60_000),
    }),
    request("late", "Wake", {
      status: { phase: COCOON_HIBERNATION_PHASE_WAKING, vmName: VM },
      created: at(0),
    }),
    vmPod({ vmID: "vmid-new", running: true }),
  ], { registry });
  const logs = await capturedLogs(async () => {
    assert.deepEqual(await h.reconcile("early"), {});
  });
  assert.equal((await h.hib("early")).status?.phase, COCOON_HIBERNATION_PHASE_ACTIVE);
  assert.equal(registry.contains(VM, "hibernate"), true, "the tag is kept for the other request");
  assert.equal(registry.callsOf("deleteManifest").length, 0);
  const kept = logs.filter((l) => l.level === "warning" && l.text.includes(`${VM}:hibernate`));
  assert.equal(kept.length, 1, JSON.stringify(logs));
  assert.match(kept[0].text, new RegExp(`CocoonHibernation ${NS}/early\\b`));
  await h.close();
});

// --- the decision of a wake pass ---------------------------------------------------------------

Deno.test("wakeOutcome: a live VM wins, the tag goes only when this wake brought it back", () => {
  const table: [WakeSignals, WakeOutcome][] = [
    [{ live: true, broughtBack: true, expired: false }, "active-drop-tag"],
    [{ live: true, broughtBack: true, expired: true }, "active-drop-tag"],
    [{ live: true, broughtBack: false, expired: false }, "active-keep-tag"],
    [{ live: true, broughtBack: false, expired: true }, "active-keep-tag"],
    [{ live: false, broughtBack: false, expired: false }, "waking"],
    [{ live: false, broughtBack: false, expired: true }, "timed-out"],
  ];
  for (const [signals, want] of table) {
    assert.equal(wakeOutcome(signals), want, JSON.stringify(signals));
  }
});

// --- an orphaned tag on a pod no CocoonSet watches -------------------------------------------

function orphanMarked(pod: ReturnType<typeof vmPod>, vmID: string) {
  pod.metadata.annotations = {
    ...pod.metadata.annotations,
    [ANNOTATION_ORPHAN_HIBERNATE_TAG]: vmID,
  };
  return pod;
}

Deno.test("wake: a VM live from the start drops the orphaned tag when it runs under a new id", async () => {
  // A deleted request left the tag; a person woke the pod (no set watches it). A Wake request
  // finds the VM live: the mark says it came back since, so the old snapshot goes.
  const registry = new FakeRegistry();
  registry.put(VM, "hibernate");
  const h = Harness.create([
    request("hib", "Wake"),
    orphanMarked(vmPod({ vmID: "vmid-new", running: true }), ""),
  ], { registry });
  assert.deepEqual(await h.reconcile("hib"), {});
  assert.equal((await h.hib("hib")).status?.phase, COCOON_HIBERNATION_PHASE_ACTIVE);
  assert.equal(registry.contains(VM, "hibernate"), false);
  assert.equal((await h.pod()).metadata.annotations?.[ANNOTATION_ORPHAN_HIBERNATE_TAG], undefined);
  await h.close();
});

Deno.test("wake: a VM live from the start under the id the mark recorded keeps the tag", async () => {
  // It may be the VM vk-cocoon pushed and is about to remove and restore from that tag.
  const registry = new FakeRegistry();
  registry.put(VM, "hibernate");
  const h = Harness.create([
    request("hib", "Wake"),
    orphanMarked(vmPod({ vmID: "vmid-old", running: true }), "vmid-old"),
  ], { registry });
  await h.reconcile("hib");
  assert.equal((await h.hib("hib")).status?.phase, COCOON_HIBERNATION_PHASE_ACTIVE);
  assert.equal(registry.contains(VM, "hibernate"), true);
  assert.equal(
    (await h.pod()).metadata.annotations?.[ANNOTATION_ORPHAN_HIBERNATE_TAG],
    "vmid-old",
  );
  await h.close();
});

Deno.test("wake: a wake that brought the VM back drops the tag and the orphan mark with it", async () => {
  const registry = new FakeRegistry();
  registry.put(VM, "hibernate");
  const h = Harness.create([
    request("hib", "Wake", { status: { phase: COCOON_HIBERNATION_PHASE_WAKING, vmName: VM } }),
    orphanMarked(vmPod({ vmID: "vmid-new", running: true }), ""),
  ], { registry });
  await h.reconcile("hib");
  assert.equal(registry.contains(VM, "hibernate"), false);
  assert.equal((await h.pod()).metadata.annotations?.[ANNOTATION_ORPHAN_HIBERNATE_TAG], undefined);
  await h.close();
});
