/**
 * The hibernate step on the fake API (hibernate.ts): the counterparts of the Go operator's
 * hibernate tests (named after them in tests/PARITY.md) and what this port adds.
 */
import assert from "node:assert/strict";
import { type HibernateOutcome, hibernateOutcome, type SnapshotProbe } from "./hibernate.ts";
import {
  COCOON_HIBERNATION_PHASE_FAILED,
  COCOON_HIBERNATION_PHASE_HIBERNATED,
  COCOON_HIBERNATION_PHASE_HIBERNATING,
} from "../common/apis/v1/mod.ts";
import { readHibernateState } from "../common/meta/hibernate.ts";
import { ANNOTATION_LIFECYCLE_STATE } from "../common/meta/keys.ts";
import { Pods } from "../kube/mod.ts";
import { staleCache } from "../kube/testing/mod.ts";
import { FakeRegistry } from "../snapshot/testing/fake.ts";
import type { CocoonHibernation } from "../common/apis/v1/cocoonhibernation_types.ts";
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
import { HIBERNATE_TIMEOUT_MS, REQUEUE_INTERVAL_MS } from "./status.ts";

// --- hibernate -------------------------------------------------------------------------------

Deno.test("hibernate: annotates the pod, waits in Hibernating while the tag is absent", async () => {
  const h = Harness.create([request("hib", "Hibernate"), vmPod()]);
  assert.deepEqual(await h.reconcile("hib"), { requeueAfter: REQUEUE_INTERVAL_MS });
  assert.equal(readHibernateState(await h.pod()), true);
  const got = await h.hib("hib");
  assert.equal(got.status?.phase, COCOON_HIBERNATION_PHASE_HIBERNATING);
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
    vmPod({ hibernate: true, lifecycle: HIBERNATED_LIFECYCLE }),
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
        phase: COCOON_HIBERNATION_PHASE_HIBERNATING,
        conditions: [ready("False", "Pending", at(-2 * HIBERNATE_TIMEOUT_MS))],
      },
    }),
    vmPod({ hibernate: true, lifecycle: HIBERNATED_LIFECYCLE }),
  ], { registry });
  assert.deepEqual(await h.reconcile("hib"), {});
  const got = await h.hib("hib");
  assert.equal(got.status?.phase, COCOON_HIBERNATION_PHASE_FAILED);
  assert.equal(readyOf(got.status)?.message, "hibernate not confirmed within 3m0s");
  await h.close();
});

Deno.test("hibernate: past 3 minutes → Failed, HibernateTimedOut, histogram result=timeout", async () => {
  const timeouts = await histogramCount("hibernate", "timeout");
  const h = Harness.create([
    request("hib", "Hibernate", {
      status: {
        phase: COCOON_HIBERNATION_PHASE_HIBERNATING,
        vmName: VM,
        conditions: [ready("False", "Pending", at(-HIBERNATE_TIMEOUT_MS - 1000))],
      },
    }),
    vmPod({ hibernate: true }),
  ]);
  assert.deepEqual(await h.reconcile("hib"), {});
  const got = await h.hib("hib");
  assert.equal(got.status?.phase, COCOON_HIBERNATION_PHASE_FAILED);
  assert.equal(readyOf(got.status)?.reason, "Failed");
  assert.deepEqual(await h.reasons("hib"), ["HibernateTimedOut"]);
  assert.equal(await histogramCount("hibernate", "timeout"), timeouts + 1);
  await h.close();
});

Deno.test("hibernate: just inside the deadline stays Hibernating", async () => {
  const h = Harness.create([
    request("hib", "Hibernate", {
      status: {
        phase: COCOON_HIBERNATION_PHASE_HIBERNATING,
        vmName: VM,
        conditions: [ready("False", "Pending", at(-HIBERNATE_TIMEOUT_MS))],
      },
    }),
    vmPod({ hibernate: true }),
  ]);
  assert.deepEqual(await h.reconcile("hib"), { requeueAfter: REQUEUE_INTERVAL_MS });
  assert.equal((await h.hib("hib")).status?.phase, COCOON_HIBERNATION_PHASE_HIBERNATING);
  await h.close();
});

Deno.test("hibernate: Failed re-enters Hibernating with a fresh clock and RetryRequested", async () => {
  const stale = at(-2 * HIBERNATE_TIMEOUT_MS);
  const h = Harness.create([
    request("hib", "Hibernate", {
      status: {
        phase: COCOON_HIBERNATION_PHASE_FAILED,
        conditions: [ready("False", "Failed", stale)],
      },
    }),
    vmPod(),
  ]);
  await h.reconcile("hib");
  const got = await h.hib("hib");
  assert.equal(got.status?.phase, COCOON_HIBERNATION_PHASE_HIBERNATING);
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
  assert.equal((await h.hib("hib")).status?.phase, COCOON_HIBERNATION_PHASE_HIBERNATING);
  assert.equal(registry.callsOf("hasManifest").length, 0, "the registry is probed only after vk");

  await h.api.patch(Pods, NS, POD, "merge", {
    metadata: { annotations: { [ANNOTATION_LIFECYCLE_STATE]: "hibernated" } },
  });
  await h.reconcile("hib");
  assert.equal((await h.hib("hib")).status?.phase, COCOON_HIBERNATION_PHASE_HIBERNATED);
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
  assert.equal((await h.hib("hib")).status?.phase, COCOON_HIBERNATION_PHASE_HIBERNATING);

  await h.api.patch(Pods, NS, POD, "merge", {
    metadata: { annotations: { "vm.cocoonstack.io/lifecycle-observed-generation": "3" } },
  });
  await h.reconcile("hib");
  assert.equal((await h.hib("hib")).status?.phase, COCOON_HIBERNATION_PHASE_HIBERNATED);
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
    metadata: { annotations: { [ANNOTATION_LIFECYCLE_STATE]: "hibernated" } },
  });
  assert.deepEqual(await h.reconcile("hib"), {});
  const got = await h.hib("hib");
  assert.equal(got.status?.phase, COCOON_HIBERNATION_PHASE_HIBERNATED);
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
    metadata: { annotations: { [ANNOTATION_LIFECYCLE_STATE]: "hibernated" } },
  });
  assert.deepEqual(await h.reconcile("hib"), {});
  assert.equal((await h.hib("hib")).status?.phase, COCOON_HIBERNATION_PHASE_HIBERNATED);
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
    vmPod({ hibernate: true, lifecycle: HIBERNATED_LIFECYCLE }),
  ], { registry });
  await h.reconcile("hib");
  assert.equal((await h.hib("hib")).status?.phase, COCOON_HIBERNATION_PHASE_HIBERNATED);
  assert.deepEqual(await h.reasons("hib"), ["Hibernated"]);
  assert.equal(await histogramCount("hibernate", "ok"), oks, "no Hibernating phase to measure");
  await h.close();
});

Deno.test("hibernate: a Hibernated request whose tag vanished goes back to Hibernating", async () => {
  const h = Harness.create([
    request("hib", "Hibernate", {
      status: {
        phase: COCOON_HIBERNATION_PHASE_HIBERNATED,
        vmName: VM,
        conditions: [ready("True", "Done", at(-60_000), "Hibernated")],
      },
    }),
    vmPod({ hibernate: true, lifecycle: HIBERNATED_LIFECYCLE }),
  ]);
  assert.deepEqual(await h.reconcile("hib"), { requeueAfter: REQUEUE_INTERVAL_MS });
  const got = await h.hib("hib");
  assert.equal(got.status?.phase, COCOON_HIBERNATION_PHASE_HIBERNATING);
  assert.equal(readyOf(got.status)?.lastTransitionTime, at(0), "a fresh 3-minute clock");
  await h.close();
});

// --- the decision of a hibernate pass ---------------------------------------------------------

Deno.test("hibernateOutcome: every probe answer, before and past the deadline", () => {
  const table: [SnapshotProbe, boolean, HibernateOutcome][] = [
    ["present", false, "hibernated"],
    ["present", true, "hibernated"],
    ["absent", false, "hibernating"],
    ["absent", true, "timed-out"],
    ["error", false, "retry"],
    ["error", true, "timed-out"],
    ["unprobed", false, "hibernating"],
    ["unprobed", true, "timed-out"],
  ];
  for (const [snapshot, expired, want] of table) {
    assert.equal(hibernateOutcome(snapshot, expired), want, `${snapshot}, expired=${expired}`);
  }
});
