/**
 * The target pod on the fake API (target_pod.ts): Pending while it or its VM name is missing, and
 * the read past the cache.
 */
import assert from "node:assert/strict";
import {
  COCOON_HIBERNATION_PHASE_HIBERNATED,
  COCOON_HIBERNATION_PHASE_HIBERNATING,
  COCOON_HIBERNATION_PHASE_PENDING,
  COCOON_HIBERNATION_PHASE_WAKING,
  type CocoonHibernationPhase,
} from "../common/apis/v1/mod.ts";
import { readHibernateState } from "../common/meta/hibernate.ts";
import { newApiError, Pods } from "../kube/mod.ts";
import type { KubeObject, Reader } from "../kube/mod.ts";
import { staleCache } from "../kube/testing/mod.ts";
import type { FakeClient } from "../kube/testing/mod.ts";
import { at, Harness, NS, POD, ready, readyOf, request, VM, vmPod } from "./_fixtures.ts";
import { REQUEUE_INTERVAL_MS } from "./timers.ts";

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
