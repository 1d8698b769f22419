/**
 * The checks before a pass acts, on the fake API: the spec, the target pod, opposing requests
 * and a reversed desire (docs/hibernation.md, "One pass").
 */
import assert from "node:assert/strict";
import {
  COCOON_HIBERNATION_PHASE_ACTIVE,
  COCOON_HIBERNATION_PHASE_FAILED,
  COCOON_HIBERNATION_PHASE_HIBERNATED,
  COCOON_HIBERNATION_PHASE_HIBERNATING,
  COCOON_HIBERNATION_PHASE_PENDING,
  COCOON_HIBERNATION_PHASE_WAKING,
  type CocoonHibernationPhase,
  CocoonHibernations,
} from "../common/apis/v1/mod.ts";
import { readHibernateState } from "../common/meta/hibernate.ts";
import { newApiError, Pods } from "../kube/mod.ts";
import type { KubeObject, Reader } from "../kube/mod.ts";
import { staleCache } from "../kube/testing/mod.ts";
import type { FakeClient } from "../kube/testing/mod.ts";
import { FakeRegistry } from "../snapshot/testing/fake.ts";
import { cameFirst } from "../snapshotgate/mod.ts";
import {
  at,
  Harness,
  HIBERNATED_LIFECYCLE,
  NS,
  POD,
  ready,
  readyOf,
  request,
  VM,
  vmPod,
} from "./_fixtures.ts";
import { direction, opposingProblem, podNameProblem, specProblem } from "./checks.ts";
import { REQUEUE_INTERVAL_MS } from "./status.ts";

// --- the spec ----------------------------------------------------------------------------------

Deno.test("pod names must be DNS-1123 subdomains", () => {
  for (const ok of ["demo-0", "a", "a.b-c", "0", "x".repeat(253)]) {
    assert.equal(podNameProblem(ok), undefined, ok);
  }
  for (const bad of ["demo/0", "Demo", "-a", "a-", "a..b", "a_b", " a", "x".repeat(254)]) {
    assert.ok(podNameProblem(bad), bad);
  }
});

Deno.test("specProblem names what is wrong, in order: podRef missing, invalid, desire", () => {
  assert.equal(specProblem(request("h", "Hibernate", { pod: "" })), "spec.podRef.name is required");
  assert.match(specProblem(request("h", "Hibernate", { pod: "a/b" }))!, /"a\/b" is not a valid/);
  assert.equal(specProblem(request("h", "Nap")), 'unknown desire "Nap"');
  assert.equal(specProblem(request("h", "Wake")), undefined);
});

Deno.test("specProblem quotes at most the start of an overlong podRef (Ready messages are capped)", () => {
  // The CRD does not bound podRef.name, the condition message is at most 32768 characters: a
  // message quoting the whole name could never be written, and the request would show nothing.
  const problem = specProblem(request("h", "Hibernate", { pod: "x".repeat(40_000) }))!;
  assert.match(problem, /is not a valid pod name: must be no more than 253 characters/);
  assert.ok(problem.length < 1_024, `message of ${problem.length} characters`);
});

// --- spec checks through a pass (Differences from the Go operator) ---------------------------

Deno.test("a request without a podRef fails at once", async () => {
  const bad = request("hib", "Hibernate", { pod: "" });
  const h = Harness.create([bad]);
  assert.deepEqual(await h.reconcile("hib"), {});
  const got = await h.hib("hib");
  assert.equal(got.status?.phase, COCOON_HIBERNATION_PHASE_FAILED);
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
  assert.equal(got.status?.phase, COCOON_HIBERNATION_PHASE_FAILED);
  assert.match(readyOf(got.status)?.message ?? "", /"demo\/0" is not a valid pod name/);
  assert.equal(h.api.actions.filter((a) => a.resource.plural === "pods").length, 0);
  await h.close();
});

Deno.test("an unknown desire fails at once", async () => {
  const h = Harness.create([request("hib", "Sleep"), vmPod()]);
  await h.reconcile("hib");
  const got = await h.hib("hib");
  assert.equal(got.status?.phase, COCOON_HIBERNATION_PHASE_FAILED);
  assert.equal(readyOf(got.status)?.message, 'unknown desire "Sleep"');
  assert.equal(readHibernateState(await h.pod()), false);
  await h.close();
});

// --- pending -----------------------------------------------------------------------------------

Deno.test("a missing pod parks the request on Pending and requeues in 5 s", async () => {
  const h = Harness.create([request("hib", "Hibernate")]);
  assert.deepEqual(await h.reconcile("hib"), { requeueAfter: REQUEUE_INTERVAL_MS });
  const got = await h.hib("hib");
  assert.equal(got.status?.phase, COCOON_HIBERNATION_PHASE_PENDING);
  assert.equal(readyOf(got.status)?.message, `pod ${NS}/${POD} not yet present`);
  assert.equal(readyOf(got.status)?.reason, "Pending");
  await h.close();
});

Deno.test("a pod without a VM name parks the request on Pending and requeues in 5 s", async () => {
  const h = Harness.create([request("hib", "Hibernate"), vmPod({ vmName: null })]);
  assert.deepEqual(await h.reconcile("hib"), { requeueAfter: REQUEUE_INTERVAL_MS });
  const got = await h.hib("hib");
  assert.equal(got.status?.phase, COCOON_HIBERNATION_PHASE_PENDING);
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
      COCOON_HIBERNATION_PHASE_HIBERNATED,
      COCOON_HIBERNATION_PHASE_WAKING,
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
      phase: COCOON_HIBERNATION_PHASE_PENDING,
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

// --- target pods outside the pod cache -------------------------------------------------------

Deno.test("a target pod the cache does not hold is read from the API server", async () => {
  const podReads: string[] = [];
  const h = Harness.create([request("hib", "Hibernate"), vmPod()], {
    // A pod cache scoped to CocoonSet pods: this unlabelled pod is not in it.
    cachedClient: (api) =>
      staleCache(api, {
        get: (rt, namespace, name) => {
          if (rt.plural === "pods") {
            podReads.push(`cache ${namespace}/${name}`);
            throw newApiError(404, "NotFound", { resource: "pods" }, "not in cache");
          }
          return undefined;
        },
      }),
    apiReader: (api) => recordingPodGets(api, podReads),
  });
  assert.deepEqual(await h.reconcile("hib"), { requeueAfter: REQUEUE_INTERVAL_MS });
  assert.equal((await h.hib("hib")).status?.phase, COCOON_HIBERNATION_PHASE_HIBERNATING);
  assert.equal(readHibernateState(await h.pod()), true);
  // The pass asked the cache first and, told NotFound, the API server for the same pod.
  const miss = podReads.indexOf(`cache ${NS}/${POD}`);
  assert.ok(miss >= 0, `the cache was asked for the pod: ${podReads.join(", ")}`);
  assert.equal(podReads[miss + 1], `api ${NS}/${POD}`, "then the API server");
  await h.close();
});

/** api as an uncached reader that lets every read through and records the pods it gets. */
function recordingPodGets(api: FakeClient, reads: string[]): Reader {
  return staleCache(api, {
    get: (rt, namespace, name) => {
      if (rt === Pods) reads.push(`api ${namespace}/${name}`);
      return undefined;
    },
  });
}

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
  assert.equal(b.status?.phase, COCOON_HIBERNATION_PHASE_FAILED);
  assert.equal(readyOf(b.status)?.reason, "Conflict");
  assert.match(readyOf(b.status)?.message ?? "", /CocoonHibernation a .*Hibernate VM vk-ns-demo-0/);
  assert.equal((await h.pod()).metadata.resourceVersion, podRv, "the refused request left the pod");
  assert.equal(registry.calls.length, 0);
  const conflict = (await h.events()).find((e) => e.reason === "Conflict");
  assert.equal(conflict?.type, "Warning");
  assert.equal(conflict?.involvedObject.name, "b");
  assert.match(conflict?.message ?? "", /CocoonHibernation a /);

  // While the refusal lasts, a pass costs no write at all.
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
      status: { phase: COCOON_HIBERNATION_PHASE_HIBERNATED, vmName: VM },
    }),
    request("b", "Wake", { created: at(-5_000) }),
    vmPod({ hibernate: true, lifecycle: HIBERNATED_LIFECYCLE }),
  ], { registry });
  await h.reconcile("b");
  assert.equal((await h.hib("b")).status?.phase, COCOON_HIBERNATION_PHASE_FAILED);
  assert.equal(readHibernateState(await h.pod()), true, "the VM keeps the earlier request's state");

  await h.api.delete(CocoonHibernations, NS, "a");
  await h.reconcile("a");
  assert.equal(await h.gone("a"), true);
  assert.equal(registry.contains(VM, "hibernate"), true, "b still tracks the VM (podRef)");
  await h.reconcile("b");
  assert.equal((await h.hib("b")).status?.phase, COCOON_HIBERNATION_PHASE_WAKING);
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
  assert.equal((await h.hib("c")).status?.phase, COCOON_HIBERNATION_PHASE_HIBERNATING);
  await h.reconcile("b");
  assert.equal((await h.hib("b")).status?.phase, COCOON_HIBERNATION_PHASE_FAILED);
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
          status: { phase: COCOON_HIBERNATION_PHASE_WAKING, vmName: VM },
        }),
        request("b", "Hibernate", { created: at(-5_000) }),
        vmPod({ lifecycle: HIBERNATED_LIFECYCLE }),
      ], { registry });
      const podRv = (await h.pod()).metadata.resourceVersion;
      assert.deepEqual(await h.reconcile("b"), { requeueAfter: REQUEUE_INTERVAL_MS });
      assert.equal((await h.pod()).metadata.resourceVersion, podRv, "no hibernate asked mid-wake");
      const b = await h.hib("b");
      assert.equal(b.status?.phase, COCOON_HIBERNATION_PHASE_FAILED);
      assert.equal(readyOf(b.status)?.reason, "Conflict");
      assert.match(
        readyOf(b.status)?.message ?? "",
        /CocoonHibernation a .* wake of VM vk-ns-demo-0/,
      );
      assert.equal(registry.calls.length, 0);

      // The wake done, a turns to its Hibernate and b agrees with it again.
      h.api.seed(Pods, vmPod({ vmID: "vmid-new", running: true, lifecycle: { state: "ready" } }));
      await h.reconcile("a");
      assert.equal((await h.hib("a")).status?.phase, COCOON_HIBERNATION_PHASE_ACTIVE);
      await h.reconcile("a");
      assert.equal((await h.hib("a")).status?.phase, COCOON_HIBERNATION_PHASE_HIBERNATING);
      await h.reconcile("b");
      assert.equal((await h.hib("b")).status?.phase, COCOON_HIBERNATION_PHASE_HIBERNATING);
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
          status: { phase: COCOON_HIBERNATION_PHASE_HIBERNATING, vmName: VM },
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
  assert.equal((await h.hib("y")).status?.phase, COCOON_HIBERNATION_PHASE_FAILED);
  assert.equal((await h.hib("x")).status?.phase, COCOON_HIBERNATION_PHASE_WAKING);
  await h.close();
});

// --- the creation order (common/meta/creation_order.ts) ----------------------------------------

Deno.test("the earliest request is picked by the same creation order as a VM name's first comer", () => {
  // Pairs a real API server never writes (it stamps every object, in whole UTC seconds), where
  // two rules could disagree: a missing time, a fractional second, an offset.
  const pairs: [string | undefined, string | undefined][] = [
    [undefined, at(0)],
    [at(0), undefined],
    ["2026-03-02T10:00:00.500Z", "2026-03-02T10:00:00Z"],
    ["2026-03-02T10:30:00+01:00", "2026-03-02T10:00:00Z"],
    [at(0), at(0)],
  ];
  for (const [first, second] of pairs) {
    const a = request("a", "Hibernate", { uid: "uid-a", created: first });
    const b = request("b", "Wake", { uid: "uid-b", created: second });
    // a refused (b opposes it and came first) exactly when b is the first comer.
    const bFirst = cameFirst(
      { namespace: NS, name: "b", creationTimestamp: second },
      { namespace: NS, name: "a", creationTimestamp: first },
    );
    assert.equal(opposingProblem(a, [a, b], VM) !== undefined, bFirst, `a ${first}, b ${second}`);
    assert.equal(opposingProblem(b, [a, b], VM) !== undefined, !bFirst, `b ${second}, a ${first}`);
  }
});

// --- a reversed desire --------------------------------------------------------------------------

Deno.test("direction: the desire, except that a reversed desire finishes the transition in flight", () => {
  const phases: (CocoonHibernationPhase | undefined)[] = [
    undefined,
    COCOON_HIBERNATION_PHASE_PENDING,
    COCOON_HIBERNATION_PHASE_HIBERNATING,
    COCOON_HIBERNATION_PHASE_HIBERNATED,
    COCOON_HIBERNATION_PHASE_WAKING,
    COCOON_HIBERNATION_PHASE_ACTIVE,
    COCOON_HIBERNATION_PHASE_FAILED,
  ];
  for (const phase of phases) {
    const status = phase ? { phase } : undefined;
    assert.equal(
      direction(request("h", "Hibernate", { status })),
      phase === COCOON_HIBERNATION_PHASE_WAKING ? "Wake" : "Hibernate",
      `Hibernate in ${phase}`,
    );
    assert.equal(
      direction(request("h", "Wake", { status })),
      phase === COCOON_HIBERNATION_PHASE_HIBERNATING ? "Hibernate" : "Wake",
      `Wake in ${phase}`,
    );
  }
});

Deno.test("a desire flipped to Hibernate mid-wake finishes the wake first", async () => {
  const registry = new FakeRegistry();
  registry.put(VM, "hibernate");
  const h = Harness.create([
    request("hib", "Hibernate", { status: { phase: COCOON_HIBERNATION_PHASE_WAKING, vmName: VM } }),
    vmPod({ lifecycle: { state: "hibernated" } }),
  ], { registry });
  await h.reconcile("hib");
  assert.equal((await h.hib("hib")).status?.phase, COCOON_HIBERNATION_PHASE_WAKING);
  assert.equal(registry.callsOf("deleteManifest").length, 0, "tag kept while the VM is down");
  assert.equal(readHibernateState(await h.pod()), false, "no hibernate asked mid-wake");

  // vk finishes the wake; the Active write is followed by the hibernate the desire asks for.
  h.api.seed(Pods, vmPod({ vmID: "vmid-new", running: true, lifecycle: { state: "ready" } }));
  await h.reconcile("hib");
  assert.equal((await h.hib("hib")).status?.phase, COCOON_HIBERNATION_PHASE_ACTIVE);
  assert.equal(registry.contains(VM, "hibernate"), false);
  await h.reconcile("hib");
  assert.equal((await h.hib("hib")).status?.phase, COCOON_HIBERNATION_PHASE_HIBERNATING);
  assert.equal(readHibernateState(await h.pod()), true);
  await h.close();
});

Deno.test("a desire flipped to Wake mid-hibernate finishes the hibernate first", async () => {
  const registry = new FakeRegistry();
  const h = Harness.create([
    request("hib", "Wake", { status: { phase: COCOON_HIBERNATION_PHASE_HIBERNATING, vmName: VM } }),
    // A lagging view of the pod: still running with its old VM id.
    vmPod({ hibernate: true, vmID: "vmid-old", running: true }),
  ], { registry });
  await h.reconcile("hib");
  assert.equal((await h.hib("hib")).status?.phase, COCOON_HIBERNATION_PHASE_HIBERNATING);
  assert.equal(registry.callsOf("deleteManifest").length, 0, "no tag GC off a stale view");
  assert.equal(readHibernateState(await h.pod()), true);

  registry.put(VM, "hibernate");
  h.api.seed(Pods, vmPod({ hibernate: true, lifecycle: HIBERNATED_LIFECYCLE }));
  await h.reconcile("hib");
  assert.equal((await h.hib("hib")).status?.phase, COCOON_HIBERNATION_PHASE_HIBERNATED);
  await h.reconcile("hib");
  assert.equal((await h.hib("hib")).status?.phase, COCOON_HIBERNATION_PHASE_WAKING);
  assert.equal(readHibernateState(await h.pod()), false);
  await h.close();
});
