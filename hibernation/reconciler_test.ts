/**
 * The reconciler on the fake API: the counterparts of the Go operator's hibernation tests (named
 * after them in tests/PARITY.md) and the behaviour this port adds.
 */
import assert from "node:assert/strict";
import {
  type CocoonHibernationPhase,
  CocoonHibernationPhaseActive,
  CocoonHibernationPhaseFailed,
  CocoonHibernationPhaseHibernated,
  CocoonHibernationPhaseHibernating,
  CocoonHibernationPhasePending,
  CocoonHibernationPhaseWaking,
  CocoonHibernations,
  type CocoonHibernationStatus,
} from "../common/apis/v1/mod.ts";
import { ConditionTypeReady, findStatusCondition } from "../common/k8s/condition.ts";
import { readHibernateState } from "../common/meta/hibernate.ts";
import { AnnotationHibernate, AnnotationLifecycleState } from "../common/meta/keys.ts";
import { Pods } from "../kube/core.ts";
import { newApiError } from "../kube/errors.ts";
import type { KubeObject } from "../kube/object.ts";
import { metricValue } from "../kube/testing/metrics.ts";
import { flushMicrotasks, waitFor } from "../kube/testing/wait.ts";
import { staleCache } from "../kube/testing/stale_cache.ts";
import type { CocoonHibernation } from "../common/apis/v1/cocoonhibernation_types.ts";
import { parseRfc3339 } from "../kube/time.ts";
import { FakeRegistry } from "../snapshot/testing/fake.ts";
import { at, Harness, NS, POD, ready, request, VM, vmPod } from "./_fixtures.ts";
import { HIBERNATION_FINALIZER } from "./reconciler.ts";
import { HIBERNATE_TIMEOUT_MS, REQUEUE_INTERVAL_MS, WAKE_TIMEOUT_MS } from "./status.ts";

const hibernatedLifecycle = { state: "hibernated", observedGeneration: 0 };

function readyOf(status: { conditions?: Parameters<typeof findStatusCondition>[0] } | undefined) {
  return findStatusCondition(status?.conditions, ConditionTypeReady);
}

async function histogramCount(family: "hibernate" | "wake", result: string): Promise<number> {
  return await metricValue(`cocoon_operator_${family}_phase_duration_seconds_count`, { result }) ??
    0;
}

// --- finalizer -------------------------------------------------------------------------------

Deno.test("adds the finalizer in a pass of its own and requeues, status untouched", async () => {
  const h = Harness.create([request("hib", "Hibernate", { finalizers: [] }), vmPod()]);
  const res = await h.reconcile("hib");
  assert.deepEqual(res, { requeue: true });
  const got = await h.hib("hib");
  assert.deepEqual(got.metadata.finalizers, [HIBERNATION_FINALIZER]);
  assert.equal(got.status?.phase, undefined);
  assert.equal(readHibernateState(await h.pod()), false, "no pod write in the finalizer pass");
  await h.close();
});

Deno.test("delete drops the VM's :hibernate tag and removes the finalizer", async () => {
  const registry = new FakeRegistry();
  registry.put(VM, "hibernate");
  const h = Harness.create([
    request("hib", "Hibernate", { deleting: true, status: { vmName: VM } }),
  ], { registry });
  assert.deepEqual(await h.reconcile("hib"), {});
  assert.equal(registry.contains(VM, "hibernate"), false);
  assert.equal(await h.gone("hib"), true, "finalizer removed, object gone");
  await h.close();
});

Deno.test("delete removes the finalizer even when the tag delete fails", async () => {
  const registry = new FakeRegistry();
  registry.put(VM, "hibernate");
  registry.failNext("deleteManifest", new Error("registry unavailable"), { times: Infinity });
  const h = Harness.create([
    request("hib", "Hibernate", { deleting: true, status: { vmName: VM } }),
  ], { registry });
  assert.deepEqual(await h.reconcile("hib"), {});
  assert.equal(registry.callsOf("deleteManifest", VM).length, 1);
  assert.equal(await h.gone("hib"), true);
  await h.close();
});

Deno.test("delete makes no registry call when the request never recorded a VM", async () => {
  const registry = new FakeRegistry();
  const h = Harness.create([request("hib", "Hibernate", { deleting: true })], { registry });
  await h.reconcile("hib");
  assert.equal(registry.calls.length, 0);
  assert.equal(await h.gone("hib"), true);
  await h.close();
});

Deno.test("delete keeps the tag while another live request tracks the VM; the last drops it", async () => {
  const registry = new FakeRegistry();
  registry.put(VM, "hibernate");
  const hibernated: CocoonHibernationStatus = {
    vmName: VM,
    phase: CocoonHibernationPhaseHibernated,
  };
  const h = Harness.create([
    request("a", "Hibernate", { deleting: true, status: hibernated }),
    request("b", "Hibernate", { status: hibernated }),
  ], { registry });
  await h.reconcile("a");
  assert.equal(await h.gone("a"), true);
  assert.equal(registry.contains(VM, "hibernate"), true, "b still holds the VM");
  assert.equal(registry.callsOf("deleteManifest").length, 0);

  await h.api.delete(CocoonHibernations, NS, "b");
  await h.reconcile("b");
  assert.equal(await h.gone("b"), true);
  assert.equal(registry.contains(VM, "hibernate"), false, "the last holder drops the tag");
  await h.close();
});

Deno.test("delete keeps the tag for a duplicate that has not reconciled yet (podRef match)", async () => {
  const registry = new FakeRegistry();
  registry.put(VM, "hibernate");
  const h = Harness.create([
    request("a", "Hibernate", { deleting: true, status: { vmName: VM } }),
    request("c", "Hibernate", { finalizers: [] }),
  ], { registry });
  await h.reconcile("a");
  assert.equal(registry.contains(VM, "hibernate"), true);
  assert.equal(registry.callsOf("deleteManifest").length, 0);
  await h.close();
});

// A Waking request has withdrawn the hibernate annotation: vk-cocoon is restoring the VM from
// `:hibernate`. Its finalizer dropped that tag under the restore, which then failed for good.
Deno.test("delete while Waking keeps the tag until the restored VM runs", async (t) => {
  const waking: CocoonHibernationStatus = { vmName: VM, phase: CocoonHibernationPhaseWaking };
  await t.step("restore in flight: the tag stays, the finalizer goes", async () => {
    const registry = new FakeRegistry();
    registry.put(VM, "hibernate");
    const h = Harness.create([
      request("hib", "Wake", { deleting: true, status: waking }),
      vmPod({ lifecycle: hibernatedLifecycle }),
    ], { registry });
    assert.deepEqual(await h.reconcile("hib"), {});
    assert.equal(await h.gone("hib"), true);
    assert.equal(registry.contains(VM, "hibernate"), true);
    assert.equal(registry.callsOf("deleteManifest").length, 0);
    await h.close();
  });
  await t.step("the VM already runs again: the tag goes", async () => {
    const registry = new FakeRegistry();
    registry.put(VM, "hibernate");
    const h = Harness.create([
      request("hib", "Wake", { deleting: true, status: waking }),
      vmPod({ vmID: "vmid-new", running: true, lifecycle: { state: "ready" } }),
    ], { registry });
    await h.reconcile("hib");
    assert.equal(await h.gone("hib"), true);
    assert.equal(registry.contains(VM, "hibernate"), false);
    await h.close();
  });
  await t.step("the pod is gone: the tag goes", async () => {
    const registry = new FakeRegistry();
    registry.put(VM, "hibernate");
    const h = Harness.create([request("hib", "Wake", { deleting: true, status: waking })], {
      registry,
    });
    await h.reconcile("hib");
    assert.equal(await h.gone("hib"), true);
    assert.equal(registry.contains(VM, "hibernate"), false);
    await h.close();
  });
});

Deno.test("delete keeps the tag while the pod is still asked to hibernate (its VM's state is only there)", async (t) => {
  const phases: [string, CocoonHibernationStatus][] = [
    ["Hibernated", { vmName: VM, phase: CocoonHibernationPhaseHibernated }],
    ["Hibernating", { vmName: VM, phase: CocoonHibernationPhaseHibernating }],
  ];
  for (const [name, status] of phases) {
    await t.step(`${name}: the tag stays, the finalizer goes`, async () => {
      const registry = new FakeRegistry();
      registry.put(VM, "hibernate");
      const h = Harness.create([
        request("hib", "Hibernate", { deleting: true, status }),
        vmPod({ hibernate: true, lifecycle: hibernatedLifecycle }),
      ], { registry });
      assert.deepEqual(await h.reconcile("hib"), {});
      assert.equal(await h.gone("hib"), true);
      assert.equal(registry.contains(VM, "hibernate"), true);
      assert.equal(registry.callsOf("deleteManifest").length, 0);
      await h.close();
    });
  }
  await t.step("the pod was woken by hand and runs: the tag goes", async () => {
    const registry = new FakeRegistry();
    registry.put(VM, "hibernate");
    const h = Harness.create([
      request("hib", "Hibernate", {
        deleting: true,
        status: { vmName: VM, phase: CocoonHibernationPhaseHibernated },
      }),
      vmPod({ vmID: "vmid-new", running: true, lifecycle: { state: "ready" } }),
    ], { registry });
    await h.reconcile("hib");
    assert.equal(await h.gone("hib"), true);
    assert.equal(registry.contains(VM, "hibernate"), false);
    await h.close();
  });
  await t.step("the pod now runs another VM: the recorded VM's tag goes", async () => {
    const registry = new FakeRegistry();
    registry.put(VM, "hibernate");
    const h = Harness.create([
      request("hib", "Hibernate", {
        deleting: true,
        status: { vmName: VM, phase: CocoonHibernationPhaseHibernated },
      }),
      vmPod({ vmName: "vk-other", hibernate: true }),
    ], { registry });
    await h.reconcile("hib");
    assert.equal(registry.contains(VM, "hibernate"), false);
    await h.close();
  });
});

// --- pending -----------------------------------------------------------------------------------

Deno.test("a missing pod parks the request on Pending and requeues in 5 s", async () => {
  const h = Harness.create([request("hib", "Hibernate")]);
  assert.deepEqual(await h.reconcile("hib"), { requeueAfter: REQUEUE_INTERVAL_MS });
  const got = await h.hib("hib");
  assert.equal(got.status?.phase, CocoonHibernationPhasePending);
  assert.equal(readyOf(got.status)?.message, `pod ${NS}/${POD} not yet present`);
  assert.equal(readyOf(got.status)?.reason, "Pending");
  await h.close();
});

Deno.test("a pod without a VM name parks the request on Pending and requeues in 5 s", async () => {
  const h = Harness.create([request("hib", "Hibernate"), vmPod({ vmName: null })]);
  assert.deepEqual(await h.reconcile("hib"), { requeueAfter: REQUEUE_INTERVAL_MS });
  const got = await h.hib("hib");
  assert.equal(got.status?.phase, CocoonHibernationPhasePending);
  assert.equal(
    readyOf(got.status)?.message,
    `pod ${NS}/${POD} has no vm.cocoonstack.io/name annotation yet`,
  );
  assert.equal(readHibernateState(await h.pod()), false, "nothing asked of a pod with no VM");
  await h.close();
});

Deno.test("Hibernated and Waking survive pod gaps (pod missing or without VM name)", async (t) => {
  for (const gap of ["pod missing", "pod without vmname"]) {
    const phases: CocoonHibernationPhase[] = [
      CocoonHibernationPhaseHibernated,
      CocoonHibernationPhaseWaking,
    ];
    for (const phase of phases) {
      await t.step(`${gap}/${phase}`, async () => {
        const objects: KubeObject[] = [
          request("hib", "Hibernate", { status: { phase, vmName: VM } }),
        ];
        if (gap === "pod without vmname") objects.push(vmPod({ vmName: null }));
        const h = Harness.create(objects);
        const before = (await h.hib("hib")).metadata.resourceVersion;
        assert.deepEqual(await h.reconcile("hib"), { requeueAfter: REQUEUE_INTERVAL_MS });
        const got = await h.hib("hib");
        assert.equal(got.status?.phase, phase);
        assert.equal(got.metadata.resourceVersion, before, "no status write");
        await h.close();
      });
    }
  }
});

Deno.test("Pending is rewritten when only the generation moved", async () => {
  const msg = `pod ${NS}/${POD} not yet present`;
  const h = Harness.create([request("hib", "Hibernate", {
    generation: 4,
    status: {
      phase: CocoonHibernationPhasePending,
      observedGeneration: 3,
      conditions: [ready("False", "Pending", at(-1000), msg)],
    },
  })]);
  await h.reconcile("hib");
  const got = await h.hib("hib");
  assert.equal(got.status?.observedGeneration, 4);
  assert.equal(readyOf(got.status)?.observedGeneration, 4);
  // Unchanged afterwards: no further write.
  const rv = got.metadata.resourceVersion;
  await h.reconcile("hib");
  assert.equal((await h.hib("hib")).metadata.resourceVersion, rv);
  await h.close();
});

// --- hibernate -------------------------------------------------------------------------------

Deno.test("hibernate: annotates the pod, waits in Hibernating while the tag is absent", async () => {
  const h = Harness.create([request("hib", "Hibernate"), vmPod()]);
  assert.deepEqual(await h.reconcile("hib"), { requeueAfter: REQUEUE_INTERVAL_MS });
  assert.equal(readHibernateState(await h.pod()), true);
  const got = await h.hib("hib");
  assert.equal(got.status?.phase, CocoonHibernationPhaseHibernating);
  assert.equal(got.status?.vmName, VM);
  assert.equal(readyOf(got.status)?.lastTransitionTime, at(0), "the phase clock starts now");
  await h.close();
});

Deno.test("hibernate: a probe error before the deadline is thrown, status untouched", async () => {
  const registry = new FakeRegistry();
  const boom = new Error("transport boom");
  registry.failNext("hasManifest", boom);
  const h = Harness.create([
    request("hib", "Hibernate"),
    vmPod({ hibernate: true, lifecycle: hibernatedLifecycle }),
  ], { registry });
  await assert.rejects(h.reconcile("hib"), (err: Error) => err.cause === boom);
  assert.equal((await h.hib("hib")).status, undefined);
  await h.close();
});

Deno.test("hibernate: a probe error at the deadline fails the request", async () => {
  const registry = new FakeRegistry();
  registry.failNext("hasManifest", new Error("registry down"), { times: Infinity });
  const h = Harness.create([
    request("hib", "Wake", {
      status: {
        phase: CocoonHibernationPhaseHibernating,
        conditions: [ready("False", "Pending", at(-2 * HIBERNATE_TIMEOUT_MS))],
      },
    }),
    vmPod({ hibernate: true, lifecycle: hibernatedLifecycle }),
  ], { registry });
  assert.deepEqual(await h.reconcile("hib"), {});
  const got = await h.hib("hib");
  assert.equal(got.status?.phase, CocoonHibernationPhaseFailed);
  assert.equal(readyOf(got.status)?.message, "hibernate not confirmed within 3m0s");
  await h.close();
});

Deno.test("hibernate: past 3 minutes → Failed, HibernateTimedOut, histogram result=timeout", async () => {
  const timeouts = await histogramCount("hibernate", "timeout");
  const h = Harness.create([
    request("hib", "Hibernate", {
      status: {
        phase: CocoonHibernationPhaseHibernating,
        vmName: VM,
        conditions: [ready("False", "Pending", at(-HIBERNATE_TIMEOUT_MS - 1000))],
      },
    }),
    vmPod({ hibernate: true }),
  ]);
  assert.deepEqual(await h.reconcile("hib"), {});
  const got = await h.hib("hib");
  assert.equal(got.status?.phase, CocoonHibernationPhaseFailed);
  assert.equal(readyOf(got.status)?.reason, "Failed");
  assert.deepEqual(await h.reasons("hib"), ["HibernateTimedOut"]);
  assert.equal(await histogramCount("hibernate", "timeout"), timeouts + 1);
  await h.close();
});

Deno.test("hibernate: just inside the deadline stays Hibernating", async () => {
  const h = Harness.create([
    request("hib", "Hibernate", {
      status: {
        phase: CocoonHibernationPhaseHibernating,
        vmName: VM,
        conditions: [ready("False", "Pending", at(-HIBERNATE_TIMEOUT_MS))],
      },
    }),
    vmPod({ hibernate: true }),
  ]);
  assert.deepEqual(await h.reconcile("hib"), { requeueAfter: REQUEUE_INTERVAL_MS });
  assert.equal((await h.hib("hib")).status?.phase, CocoonHibernationPhaseHibernating);
  await h.close();
});

Deno.test("hibernate: Failed re-enters Hibernating with a fresh clock and RetryRequested", async () => {
  const stale = at(-2 * HIBERNATE_TIMEOUT_MS);
  const h = Harness.create([
    request("hib", "Hibernate", {
      status: {
        phase: CocoonHibernationPhaseFailed,
        conditions: [ready("False", "Failed", stale)],
      },
    }),
    vmPod(),
  ]);
  await h.reconcile("hib");
  const got = await h.hib("hib");
  assert.equal(got.status?.phase, CocoonHibernationPhaseHibernating);
  assert.equal(readyOf(got.status)?.lastTransitionTime, at(0));
  assert.deepEqual(await h.reasons("hib"), ["RetryRequested"]);
  const retry = (await h.events()).find((e) => e.reason === "RetryRequested");
  assert.equal(retry?.message, "retrying Hibernate after prior failure");
  await h.close();
});

Deno.test("hibernate: a stale tag is ignored until vk reports lifecycle-state=hibernated", async () => {
  const registry = new FakeRegistry();
  registry.put(VM, "hibernate");
  const h = Harness.create([request("hib", "Hibernate"), vmPod({ hibernate: true })], {
    registry,
  });
  await h.reconcile("hib");
  assert.equal((await h.hib("hib")).status?.phase, CocoonHibernationPhaseHibernating);
  assert.equal(registry.callsOf("hasManifest").length, 0, "the registry is probed only after vk");

  await h.api.patch(Pods, NS, POD, "merge", {
    metadata: { annotations: { [AnnotationLifecycleState]: "hibernated" } },
  });
  await h.reconcile("hib");
  assert.equal((await h.hib("hib")).status?.phase, CocoonHibernationPhaseHibernated);
  await h.close();
});

Deno.test("hibernate: a lifecycle pair from an older round is rejected", async () => {
  const registry = new FakeRegistry();
  registry.put(VM, "hibernate");
  const h = Harness.create([
    request("hib", "Hibernate"),
    vmPod({ hibernate: true, stamp: 3, lifecycle: { state: "hibernated", observedGeneration: 2 } }),
  ], { registry });
  await h.reconcile("hib");
  assert.equal((await h.hib("hib")).status?.phase, CocoonHibernationPhaseHibernating);

  await h.api.patch(Pods, NS, POD, "merge", {
    metadata: { annotations: { "vm.cocoonstack.io/lifecycle-observed-generation": "3" } },
  });
  await h.reconcile("hib");
  assert.equal((await h.hib("hib")).status?.phase, CocoonHibernationPhaseHibernated);
  await h.close();
});

Deno.test("hibernate: confirmed → Hibernated, Event and histogram ok exactly once", async () => {
  const oks = await histogramCount("hibernate", "ok");
  const registry = new FakeRegistry();
  const h = Harness.create([request("hib", "Hibernate"), vmPod()], { registry });
  await h.reconcile("hib");
  h.clock.advance(42_000);
  registry.put(VM, "hibernate");
  await h.api.patch(Pods, NS, POD, "merge", {
    metadata: { annotations: { [AnnotationLifecycleState]: "hibernated" } },
  });
  assert.deepEqual(await h.reconcile("hib"), {});
  const got = await h.hib("hib");
  assert.equal(got.status?.phase, CocoonHibernationPhaseHibernated);
  assert.equal(readyOf(got.status)?.status, "True");
  assert.equal(readyOf(got.status)?.reason, "Done");
  // Further passes re-validate without announcing again.
  await h.reconcile("hib");
  await h.reconcile("hib");
  assert.deepEqual(await h.reasons("hib"), ["Hibernated"]);
  const event = (await h.events()).find((e) => e.reason === "Hibernated");
  assert.equal(event?.message, `snapshot ${VM} pushed to the registry`);
  assert.equal(await histogramCount("hibernate", "ok"), oks + 1);
  await h.close();
});

Deno.test("hibernate: a stale cache copy cannot announce a transition twice", async () => {
  const oks = await histogramCount("hibernate", "ok");
  const registry = new FakeRegistry();
  let stale: CocoonHibernation | undefined;
  const h = Harness.create([request("hib", "Hibernate"), vmPod()], {
    registry,
    // A cache that still serves the Hibernating copy after the Hibernated write.
    cachedClient: (api) =>
      staleCache(api, {
        get: (rt, _namespace, name) =>
          stale && rt.plural === "cocoonhibernations" && name === "hib" ? stale : undefined,
      }),
  });
  await h.reconcile("hib");
  stale = await h.hib("hib");
  registry.put(VM, "hibernate");
  await h.api.patch(Pods, NS, POD, "merge", {
    metadata: { annotations: { [AnnotationLifecycleState]: "hibernated" } },
  });
  assert.deepEqual(await h.reconcile("hib"), {});
  assert.equal((await h.hib("hib")).status?.phase, CocoonHibernationPhaseHibernated);
  // The lagging copy says Hibernating: the write it computes is refused, nothing is announced.
  assert.deepEqual(await h.reconcile("hib"), { requeue: true });
  stale = undefined;
  await h.reconcile("hib");
  assert.deepEqual(await h.reasons("hib"), ["Hibernated"]);
  assert.equal(await histogramCount("hibernate", "ok"), oks + 1);
  await h.close();
});

Deno.test("hibernate: both signals already there on the first pass → Hibernated at once", async () => {
  const oks = await histogramCount("hibernate", "ok");
  const registry = new FakeRegistry();
  registry.put(VM, "hibernate");
  const h = Harness.create([
    request("hib", "Hibernate"),
    vmPod({ hibernate: true, lifecycle: hibernatedLifecycle }),
  ], { registry });
  await h.reconcile("hib");
  assert.equal((await h.hib("hib")).status?.phase, CocoonHibernationPhaseHibernated);
  assert.deepEqual(await h.reasons("hib"), ["Hibernated"]);
  assert.equal(await histogramCount("hibernate", "ok"), oks, "no Hibernating phase to measure");
  await h.close();
});

Deno.test("hibernate: a Hibernated request whose tag vanished goes back to Hibernating", async () => {
  const h = Harness.create([
    request("hib", "Hibernate", {
      status: {
        phase: CocoonHibernationPhaseHibernated,
        vmName: VM,
        conditions: [ready("True", "Done", at(-60_000), "Hibernated")],
      },
    }),
    vmPod({ hibernate: true, lifecycle: hibernatedLifecycle }),
  ]);
  assert.deepEqual(await h.reconcile("hib"), { requeueAfter: REQUEUE_INTERVAL_MS });
  const got = await h.hib("hib");
  assert.equal(got.status?.phase, CocoonHibernationPhaseHibernating);
  assert.equal(readyOf(got.status)?.lastTransitionTime, at(0), "a fresh 3-minute clock");
  await h.close();
});

// --- wake ------------------------------------------------------------------------------------

Deno.test("wake: clears the annotation, waits in Waking, keeps the tag", async () => {
  const registry = new FakeRegistry();
  registry.put(VM, "hibernate");
  const h = Harness.create([
    request("hib", "Wake", { status: { phase: CocoonHibernationPhaseHibernated, vmName: VM } }),
    vmPod({ hibernate: true, lifecycle: hibernatedLifecycle }),
  ], { registry });
  assert.deepEqual(await h.reconcile("hib"), { requeueAfter: REQUEUE_INTERVAL_MS });
  const pod = await h.pod();
  assert.equal(pod.metadata.annotations?.[AnnotationHibernate], undefined);
  assert.equal((await h.hib("hib")).status?.phase, CocoonHibernationPhaseWaking);
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
        phase: CocoonHibernationPhaseWaking,
        vmName: VM,
        conditions: [ready("False", "Pending", at(-2 * WAKE_TIMEOUT_MS))],
      },
    }),
    vmPod(),
  ]);
  assert.deepEqual(await h.reconcile("hib"), {});
  const got = await h.hib("hib");
  assert.equal(got.status?.phase, CocoonHibernationPhaseFailed);
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
        phase: CocoonHibernationPhaseFailed,
        conditions: [ready("False", "Failed", stale)],
      },
    }),
    vmPod(),
  ]);
  await h.reconcile("hib");
  let got = await h.hib("hib");
  assert.equal(got.status?.phase, CocoonHibernationPhaseWaking);
  assert.ok(parseRfc3339(readyOf(got.status)?.lastTransitionTime)! > parseRfc3339(stale)!);
  await h.reconcile("hib");
  got = await h.hib("hib");
  assert.equal(got.status?.phase, CocoonHibernationPhaseWaking, "the deadline must not re-trip");
  assert.deepEqual(await h.reasons("hib"), ["RetryRequested"]);
  await h.close();
});

Deno.test("wake: fast path — a live VM clears the residue and goes Active in one pass", async () => {
  const registry = new FakeRegistry();
  registry.put(VM, "hibernate");
  const h = Harness.create([
    request("hib", "Wake", { status: { phase: CocoonHibernationPhaseWaking } }),
    vmPod({ hibernate: true, vmID: "vmid-live", running: true }),
  ], { registry });
  assert.deepEqual(await h.reconcile("hib"), {});
  assert.equal((await h.hib("hib")).status?.phase, CocoonHibernationPhaseActive);
  assert.equal(readHibernateState(await h.pod()), false);
  assert.equal(registry.contains(VM, "hibernate"), false);
  await h.close();
});

Deno.test("wake: VM live → tag dropped, Active, WokenActive and histogram ok once", async () => {
  const oks = await histogramCount("wake", "ok");
  const registry = new FakeRegistry();
  registry.put(VM, "hibernate");
  const h = Harness.create([
    request("hib", "Wake", { status: { phase: CocoonHibernationPhaseHibernated, vmName: VM } }),
    vmPod({ hibernate: true, lifecycle: hibernatedLifecycle }),
  ], { registry });
  await h.reconcile("hib");
  assert.equal(registry.contains(VM, "hibernate"), true, "kept while the VM is not live");
  h.clock.advance(20_000);
  // vk restores: a fresh VM id and a running container.
  h.api.seed(Pods, vmPod({ vmID: "vmid-new", running: true, lifecycle: { state: "ready" } }));
  assert.deepEqual(await h.reconcile("hib"), {});
  const got = await h.hib("hib");
  assert.equal(got.status?.phase, CocoonHibernationPhaseActive);
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
    request("hib", "Wake", { status: { phase: CocoonHibernationPhaseActive, vmName: VM } }),
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
  assert.equal((await h.hib("hib")).status?.phase, CocoonHibernationPhaseWaking);

  // The hibernation completes (VM gone), then vk-cocoon restores from the snapshot.
  h.api.seed(Pods, vmPod({ lifecycle: hibernatedLifecycle }));
  await h.reconcile("hib");
  assert.equal(registry.contains(VM, "hibernate"), true, "kept until the restored VM runs");
  h.api.seed(Pods, vmPod({ vmID: "vmid-new", running: true, lifecycle: { state: "ready" } }));
  assert.deepEqual(await h.reconcile("hib"), {});
  assert.equal((await h.hib("hib")).status?.phase, CocoonHibernationPhaseActive);
  assert.equal(registry.contains(VM, "hibernate"), false);
  await h.close();
});

Deno.test("wake: a failing tag delete is logged and the wake still completes", async () => {
  const registry = new FakeRegistry();
  registry.put(VM, "hibernate");
  registry.failNext("deleteManifest", new Error("denied"), { times: Infinity });
  const h = Harness.create([
    request("hib", "Wake", { status: { phase: CocoonHibernationPhaseWaking, vmName: VM } }),
    vmPod({ vmID: "vmid-new", running: true }),
  ], { registry });
  assert.deepEqual(await h.reconcile("hib"), {});
  assert.equal(registry.callsOf("deleteManifest", VM).length, 1, "the tag delete was tried");
  assert.equal((await h.hib("hib")).status?.phase, CocoonHibernationPhaseActive);
  await h.close();
});

// --- reverse desires -------------------------------------------------------------------------

Deno.test("a desire flipped to Hibernate mid-wake finishes the wake first", async () => {
  const registry = new FakeRegistry();
  registry.put(VM, "hibernate");
  const h = Harness.create([
    request("hib", "Hibernate", { status: { phase: CocoonHibernationPhaseWaking, vmName: VM } }),
    vmPod({ lifecycle: { state: "hibernated" } }),
  ], { registry });
  await h.reconcile("hib");
  assert.equal((await h.hib("hib")).status?.phase, CocoonHibernationPhaseWaking);
  assert.equal(registry.callsOf("deleteManifest").length, 0, "tag kept while the VM is down");
  assert.equal(readHibernateState(await h.pod()), false, "no hibernate asked mid-wake");

  // vk finishes the wake; the Active write is followed by the hibernate the desire asks for.
  h.api.seed(Pods, vmPod({ vmID: "vmid-new", running: true, lifecycle: { state: "ready" } }));
  await h.reconcile("hib");
  assert.equal((await h.hib("hib")).status?.phase, CocoonHibernationPhaseActive);
  assert.equal(registry.contains(VM, "hibernate"), false);
  await h.reconcile("hib");
  assert.equal((await h.hib("hib")).status?.phase, CocoonHibernationPhaseHibernating);
  assert.equal(readHibernateState(await h.pod()), true);
  await h.close();
});

Deno.test("a desire flipped to Wake mid-hibernate finishes the hibernate first", async () => {
  const registry = new FakeRegistry();
  const h = Harness.create([
    request("hib", "Wake", { status: { phase: CocoonHibernationPhaseHibernating, vmName: VM } }),
    // A lagging view of the pod: still running with its old VM id.
    vmPod({ hibernate: true, vmID: "vmid-old", running: true }),
  ], { registry });
  await h.reconcile("hib");
  assert.equal((await h.hib("hib")).status?.phase, CocoonHibernationPhaseHibernating);
  assert.equal(registry.callsOf("deleteManifest").length, 0, "no tag GC off a stale view");
  assert.equal(readHibernateState(await h.pod()), true);

  registry.put(VM, "hibernate");
  h.api.seed(Pods, vmPod({ hibernate: true, lifecycle: hibernatedLifecycle }));
  await h.reconcile("hib");
  assert.equal((await h.hib("hib")).status?.phase, CocoonHibernationPhaseHibernated);
  await h.reconcile("hib");
  assert.equal((await h.hib("hib")).status?.phase, CocoonHibernationPhaseWaking);
  assert.equal(readHibernateState(await h.pod()), false);
  await h.close();
});

// --- spec checks (Differences from the Go operator) ------------------------------------------

Deno.test("a request without a podRef fails at once", async () => {
  const bad = request("hib", "Hibernate", { pod: "" });
  const h = Harness.create([bad]);
  assert.deepEqual(await h.reconcile("hib"), {});
  const got = await h.hib("hib");
  assert.equal(got.status?.phase, CocoonHibernationPhaseFailed);
  assert.equal(readyOf(got.status)?.message, "spec.podRef.name is required");
  const rv = got.metadata.resourceVersion;
  await h.reconcile("hib");
  assert.equal((await h.hib("hib")).metadata.resourceVersion, rv, "the message is written once");
  await h.close();
});

Deno.test("a podRef that is not a valid pod name fails at once, saying so", async () => {
  const h = Harness.create([request("hib", "Hibernate", { pod: "demo/0" })]);
  assert.deepEqual(await h.reconcile("hib"), {});
  const got = await h.hib("hib");
  assert.equal(got.status?.phase, CocoonHibernationPhaseFailed);
  assert.match(readyOf(got.status)?.message ?? "", /"demo\/0" is not a valid pod name/);
  assert.equal(h.api.actions.filter((a) => a.resource.plural === "pods").length, 0);
  await h.close();
});

Deno.test("an unknown desire fails at once", async () => {
  const h = Harness.create([request("hib", "Sleep"), vmPod()]);
  await h.reconcile("hib");
  const got = await h.hib("hib");
  assert.equal(got.status?.phase, CocoonHibernationPhaseFailed);
  assert.equal(readyOf(got.status)?.message, 'unknown desire "Sleep"');
  assert.equal(readHibernateState(await h.pod()), false);
  await h.close();
});

// --- conditions follow the phase (Differences from the Go operator) --------------------------

Deno.test("a Ready condition that contradicts the phase is rewritten", async () => {
  const registry = new FakeRegistry();
  registry.put(VM, "hibernate");
  const h = Harness.create([
    request("hib", "Hibernate", {
      status: {
        phase: CocoonHibernationPhaseHibernated,
        vmName: VM,
        observedGeneration: 1,
        conditions: [ready("False", "Pending", at(-60_000), "Hibernating")],
      },
    }),
    vmPod({ hibernate: true, lifecycle: hibernatedLifecycle }),
  ], { registry });
  await h.reconcile("hib");
  const got = await h.hib("hib");
  assert.equal(got.status?.phase, CocoonHibernationPhaseHibernated);
  assert.equal(readyOf(got.status)?.status, "True");
  assert.equal(readyOf(got.status)?.reason, "Done");
  assert.equal(readyOf(got.status)?.message, "Hibernated");
  await h.close();
});

// --- opposite requests on one VM (Differences from the Go operator) --------------------------

Deno.test("opposite requests: the later one is refused with Conflict and touches nothing", async () => {
  const registry = new FakeRegistry();
  const h = Harness.create([
    request("a", "Hibernate", { created: at(-10_000) }),
    request("b", "Wake", { created: at(-5_000) }),
    vmPod({ vmID: "vmid-1", running: true }),
  ], { registry });
  assert.deepEqual(await h.reconcile("a"), { requeueAfter: REQUEUE_INTERVAL_MS });
  assert.equal(readHibernateState(await h.pod()), true);

  const podRv = (await h.pod()).metadata.resourceVersion;
  assert.deepEqual(await h.reconcile("b"), { requeueAfter: REQUEUE_INTERVAL_MS });
  const b = await h.hib("b");
  assert.equal(b.status?.phase, CocoonHibernationPhaseFailed);
  assert.equal(readyOf(b.status)?.reason, "Conflict");
  assert.match(readyOf(b.status)?.message ?? "", /CocoonHibernation a .*Hibernate VM vk-ns-demo-0/);
  assert.equal((await h.pod()).metadata.resourceVersion, podRv, "the refused request left the pod");
  assert.equal(registry.calls.length, 0);
  const conflict = (await h.events()).find((e) => e.reason === "Conflict");
  assert.equal(conflict?.type, "Warning");
  assert.equal(conflict?.involvedObject.name, "b");
  assert.match(conflict?.message ?? "", /CocoonHibernation a /);

  // While the conflict lasts, a pass costs no write at all.
  const writes = h.writes();
  for (let i = 0; i < 3; i++) {
    assert.deepEqual(await h.reconcile("b"), { requeueAfter: REQUEUE_INTERVAL_MS });
    assert.deepEqual(await h.reconcile("a"), { requeueAfter: REQUEUE_INTERVAL_MS });
  }
  assert.equal(h.writes(), writes);
  assert.deepEqual(await h.reasons("b"), ["Conflict"]);
  await h.close();
});

Deno.test("opposite requests: the refused one proceeds once the earlier one is gone", async () => {
  const registry = new FakeRegistry();
  registry.put(VM, "hibernate");
  const h = Harness.create([
    request("a", "Hibernate", {
      created: at(-10_000),
      status: { phase: CocoonHibernationPhaseHibernated, vmName: VM },
    }),
    request("b", "Wake", { created: at(-5_000) }),
    vmPod({ hibernate: true, lifecycle: hibernatedLifecycle }),
  ], { registry });
  await h.reconcile("b");
  assert.equal((await h.hib("b")).status?.phase, CocoonHibernationPhaseFailed);
  assert.equal(readHibernateState(await h.pod()), true, "the VM keeps the earlier request's state");

  await h.api.delete(CocoonHibernations, NS, "a");
  await h.reconcile("a");
  assert.equal(await h.gone("a"), true);
  assert.equal(registry.contains(VM, "hibernate"), true, "b still tracks the VM (podRef)");
  await h.reconcile("b");
  assert.equal((await h.hib("b")).status?.phase, CocoonHibernationPhaseWaking);
  assert.equal(readHibernateState(await h.pod()), false);
  assert.deepEqual(await h.reasons("b"), ["Conflict", "RetryRequested"]);
  await h.close();
});

Deno.test("opposite requests: a later request that agrees with the earliest still acts", async () => {
  const h = Harness.create([
    request("a", "Hibernate", { created: at(-10_000) }),
    request("b", "Wake", { created: at(-5_000) }),
    request("c", "Hibernate", { created: at(-1_000) }),
    vmPod(),
  ]);
  await h.reconcile("c");
  assert.equal((await h.hib("c")).status?.phase, CocoonHibernationPhaseHibernating);
  await h.reconcile("b");
  assert.equal((await h.hib("b")).status?.phase, CocoonHibernationPhaseFailed);
  await h.close();
});

Deno.test("opposite requests: the earliest's transition in flight sets the direction, not its new desire", async (t) => {
  await t.step(
    "Hibernate asked of a VM the earliest is still waking waits for the wake",
    async () => {
      const registry = new FakeRegistry();
      registry.put(VM, "hibernate");
      const h = Harness.create([
        // Flipped back to Hibernate mid-wake: it keeps waking until Active.
        request("a", "Hibernate", {
          created: at(-10_000),
          status: { phase: CocoonHibernationPhaseWaking, vmName: VM },
        }),
        request("b", "Hibernate", { created: at(-5_000) }),
        vmPod({ lifecycle: hibernatedLifecycle }),
      ], { registry });
      const podRv = (await h.pod()).metadata.resourceVersion;
      assert.deepEqual(await h.reconcile("b"), { requeueAfter: REQUEUE_INTERVAL_MS });
      assert.equal((await h.pod()).metadata.resourceVersion, podRv, "no hibernate asked mid-wake");
      const b = await h.hib("b");
      assert.equal(b.status?.phase, CocoonHibernationPhaseFailed);
      assert.equal(readyOf(b.status)?.reason, "Conflict");
      assert.match(
        readyOf(b.status)?.message ?? "",
        /CocoonHibernation a .* wake of VM vk-ns-demo-0/,
      );
      assert.equal(registry.calls.length, 0);

      // The wake done, a turns to its Hibernate and b agrees with it again.
      h.api.seed(Pods, vmPod({ vmID: "vmid-new", running: true, lifecycle: { state: "ready" } }));
      await h.reconcile("a");
      assert.equal((await h.hib("a")).status?.phase, CocoonHibernationPhaseActive);
      await h.reconcile("a");
      assert.equal((await h.hib("a")).status?.phase, CocoonHibernationPhaseHibernating);
      await h.reconcile("b");
      assert.equal((await h.hib("b")).status?.phase, CocoonHibernationPhaseHibernating);
      assert.deepEqual(await h.reasons("b"), ["Conflict", "RetryRequested"]);
      await h.close();
    },
  );

  await t.step(
    "Wake asked of a VM the earliest is still hibernating keeps the snapshot",
    async () => {
      const registry = new FakeRegistry();
      registry.put(VM, "hibernate");
      const h = Harness.create([
        // Flipped to Wake mid-hibernate: it keeps hibernating until Hibernated.
        request("a", "Wake", {
          created: at(-10_000),
          status: { phase: CocoonHibernationPhaseHibernating, vmName: VM },
        }),
        request("b", "Wake", { created: at(-5_000) }),
        // A lagging view of the pod: still running with its old VM id.
        vmPod({ hibernate: true, vmID: "vmid-old", running: true }),
      ], { registry });
      assert.deepEqual(await h.reconcile("b"), { requeueAfter: REQUEUE_INTERVAL_MS });
      assert.equal(readHibernateState(await h.pod()), true, "the hibernation is not withdrawn");
      assert.equal(registry.contains(VM, "hibernate"), true, "no tag GC off a stale view");
      assert.equal(registry.callsOf("deleteManifest").length, 0);
      assert.equal(readyOf((await h.hib("b")).status)?.reason, "Conflict");
      await h.close();
    },
  );
});

Deno.test("opposite requests created in the same second: the name decides, consistently", async () => {
  const h = Harness.create([
    request("x", "Wake", { created: at(0) }),
    request("y", "Hibernate", { created: at(0) }),
    vmPod(),
  ]);
  await h.reconcile("y");
  await h.reconcile("x");
  assert.equal((await h.hib("y")).status?.phase, CocoonHibernationPhaseFailed);
  assert.equal((await h.hib("x")).status?.phase, CocoonHibernationPhaseWaking);
  await h.close();
});

// --- target pods outside the pod cache -------------------------------------------------------

Deno.test("a target pod the cache does not hold is read from the API server", async () => {
  const h = Harness.create([request("hib", "Hibernate"), vmPod()], {
    // A pod cache scoped to CocoonSet pods: this unlabelled pod is not in it.
    cachedClient: (api) =>
      staleCache(api, {
        get: (rt) => {
          if (rt.plural === "pods") {
            throw newApiError(404, "NotFound", { resource: "pods" }, "not in cache");
          }
          return undefined;
        },
      }),
  });
  assert.deepEqual(await h.reconcile("hib"), { requeueAfter: REQUEUE_INTERVAL_MS });
  assert.equal((await h.hib("hib")).status?.phase, CocoonHibernationPhaseHibernating);
  assert.equal(readHibernateState(await h.pod()), true);
  await h.close();
});

// --- per-VM serialization --------------------------------------------------------------------

async function reconcileTogether(h: Harness, names: string[]): Promise<void> {
  await Promise.allSettled(names.map((n) => h.reconcile(n)));
}

Deno.test("requests on one pod never have two registry calls for the VM in flight", async (t) => {
  await t.step("agreeing requests (both probe the registry)", async () => {
    const registry = new FakeRegistry({ latency: 20 });
    const h = Harness.create([
      request("a", "Hibernate", { created: at(-2000) }),
      request("b", "Hibernate", { created: at(-1000) }),
      vmPod({ hibernate: true, lifecycle: hibernatedLifecycle }),
    ], { registry });
    await reconcileTogether(h, ["a", "b"]);
    assert.equal(registry.callsOf("hasManifest", VM).length, 2);
    assert.equal(registry.maxInFlight(VM), 1);
    await h.close();
  });
  await t.step(
    "opposing requests (Go: both reach the registry; here the later is refused)",
    async () => {
      const registry = new FakeRegistry({ latency: 20 });
      registry.put(VM, "hibernate");
      const h = Harness.create([
        request("a", "Hibernate", { created: at(-2000) }),
        request("b", "Wake", { created: at(-1000) }),
        // Live, and vk's pair qualifies: a probes the tag, b's wake would drop it.
        vmPod({ vmID: "vmid-1", running: true, lifecycle: hibernatedLifecycle }),
      ], { registry });
      await reconcileTogether(h, ["a", "b"]);
      assert.equal(registry.maxInFlight(VM), 1);
      assert.equal(registry.callsOf("hasManifest", VM).length, 1, "a probed");
      assert.equal(registry.callsOf("deleteManifest").length, 0, "b touched nothing");
      assert.equal(readyOf((await h.hib("b")).status)?.reason, "Conflict");
      assert.equal(readHibernateState(await h.pod()), true);
      await h.close();
    },
  );
});

Deno.test("a deleting request and a live one on the same pod are serialized", async () => {
  // As in Go the deleting request makes no registry call here (the live one holds the VM), so
  // what shows the lock is order: the finalizer waits until the live pass has let go of the VM.
  let releaseProbe!: () => void;
  const registry = new FakeRegistry({
    latency: (call) =>
      call.op === "hasManifest"
        ? new Promise<void>((resolve) => (releaseProbe = resolve))
        : Promise.resolve(),
  });
  const h = Harness.create([
    request("a", "Hibernate", { deleting: true, status: { vmName: VM } }),
    request("b", "Hibernate", { created: at(-1000) }),
    vmPod({ hibernate: true, lifecycle: hibernatedLifecycle }),
  ], { registry });
  const live = h.reconcile("b");
  await waitFor("b probing under the VM's lock", () => registry.calls.length === 1);
  const deleting = h.reconcile("a");
  await waitFor(
    "a's pass started",
    () => h.api.actions.some((x) => x.verb === "get" && x.name === "a"),
  );
  // The fake API answers in microtasks: without the lock a's finalizer would be done by now.
  await flushMicrotasks(200);
  assert.equal(await h.gone("a"), false, "the finalizer waits for the VM's lock");
  releaseProbe();
  await Promise.all([live, deleting]);
  assert.equal(await h.gone("a"), true);
  assert.equal(registry.callsOf("deleteManifest").length, 0, "b holds the VM");
  assert.equal(registry.maxInFlight(VM), 1);
  await h.close();
});

Deno.test("a retargeted request is serialized against a live one on its recorded VM", async () => {
  const registry = new FakeRegistry({ latency: 20 });
  registry.put(VM, "hibernate");
  const h = Harness.create([
    // Points at demo-1 now, but its status still names demo-0's VM: the tag it will delete.
    request("a", "Hibernate", { pod: "demo-1", deleting: true, status: { vmName: VM } }),
    request("b", "Hibernate"),
    vmPod({ hibernate: true, lifecycle: hibernatedLifecycle }),
  ], { registry });
  await reconcileTogether(h, ["a", "b"]);
  // Issue 18: the snapshot gate refuses a's delete (demo-0's VM is not the name a derives from
  // its target demo-1, and b's hibernation holds the tag); before the gate it was deleted here.
  assert.equal(registry.callsOf("deleteManifest", VM).length, 0);
  assert.equal(registry.contains(VM, "hibernate"), true);
  assert.equal(registry.callsOf("hasManifest", VM).length, 1);
  assert.equal(registry.maxInFlight(VM), 1);
  await h.close();
});

Deno.test("an abort while waiting for the VM lock ends the pass without touching the VM", async () => {
  let releaseFirst!: () => void;
  const registry = new FakeRegistry({
    latency: (call) =>
      call.op === "hasManifest"
        ? new Promise<void>((resolve) => (releaseFirst = resolve))
        : Promise.resolve(),
  });
  const h = Harness.create([
    request("a", "Hibernate", { created: at(-2000) }),
    request("b", "Hibernate", { created: at(-1000) }),
    vmPod({ hibernate: true, lifecycle: hibernatedLifecycle }),
  ], { registry });
  const first = h.reconcile("a");
  while (registry.calls.length === 0) await new Promise((r) => setTimeout(r, 1));
  const ac = new AbortController();
  const second = h.reconcile("b", ac.signal);
  ac.abort(new Error("stopping"));
  await assert.rejects(second, /stopping/);
  releaseFirst();
  await first;
  assert.equal(registry.callsOf("hasManifest").length, 1, "the aborted pass never probed");
  assert.equal((await h.hib("b")).status, undefined);
  await h.close();
});
