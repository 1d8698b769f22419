/**
 * CocoonHibernation on the real system, targeting sub-agents of a running CocoonSet: hibernate
 * (Hibernated once the VM confirmed and its snapshot is in the registry; the set leaves the pod
 * hibernated), wake (the VM restored from that snapshot, the tag dropped after it runs), a
 * hibernation that cannot finish (the simulator refuses the push) timing out after its Ready
 * condition is back-dated through the status subresource (digest H5's fast recipe), the
 * immediate retry (RetryRequested), and recovery once the push goes through.
 */
import assert from "node:assert/strict";
import type { CocoonHibernation } from "../../common/apis/v1/mod.ts";
import { CocoonHibernations } from "../../common/apis/v1/resources.ts";
import { findStatusCondition } from "../../common/k8s/condition.ts";
import { ANNOTATION_HIBERNATE, ANNOTATION_LIFECYCLE_STATE } from "../../common/meta/keys.ts";
import { isPodReady } from "../../common/meta/pod.ts";
import { Pods } from "../../kube/core.ts";
import { parseRfc3339, rfc3339 } from "../../kube/time.ts";
import { ANNOTATION_SIM_PUSH_FAIL } from "../../sim/knobs.ts";
import type { Stack } from "../harness/stack.ts";
import { recordTimeline } from "../harness/timeline.ts";
import { waitUntil } from "../harness/wait.ts";
import {
  CONVERGE_MS,
  createSet,
  eventCount,
  getSet,
  inPhase,
  vmOf,
  waitEvent,
  waitMetric,
  waitPod,
  waitSet,
} from "../harness/stack_objects.ts";
import { e2eSuite } from "./_support.ts";

const NS = "e2e-hibernation";
const HIBERNATE = "cocoon_operator_hibernate_phase_duration_seconds_count";
const WAKE = "cocoon_operator_wake_phase_duration_seconds_count";

function readyOf(h: CocoonHibernation) {
  return findStatusCondition(h.status?.conditions, "Ready");
}

async function request(
  stack: Stack,
  name: string,
  pod: string,
  desire: "Hibernate" | "Wake",
): Promise<CocoonHibernation> {
  return await stack.admin.create(CocoonHibernations, {
    apiVersion: "cocoonset.cocoonstack.io/v1",
    kind: "CocoonHibernation",
    metadata: { name, namespace: NS },
    spec: { podRef: { name: pod }, desire },
  });
}

async function waitRequest(
  stack: Stack,
  name: string,
  phase: string,
  timeoutMs = CONVERGE_MS,
): Promise<CocoonHibernation> {
  return await waitUntil(async () => {
    const h = await stack.admin.get(CocoonHibernations, NS, name);
    return h.status?.phase === phase && h.status.observedGeneration === h.metadata.generation
      ? h
      : undefined;
  }, { what: `${name} ${phase}`, timeoutMs, intervalMs: 100 });
}

e2eSuite("CocoonHibernation: hibernate, wake, timeout, retry, recovery", {}, async (
  stack,
  step,
) => {
  await stack.namespace(NS);
  const requests = await recordTimeline(stack.admin, CocoonHibernations, NS);
  let cs = await createSet(stack, NS, "hib", { agent: { replicas: 2 } });
  try {
    await step("a running set with two sub-agents", async () => {
      cs = await waitSet(
        stack,
        cs,
        "Running",
        (c) => inPhase("Running")(c) && c.status?.readyAgents === 3,
      );
    });

    let snapshot = "";
    await step("hibernate: Hibernated with the VM's snapshot in the registry", async () => {
      const eventsBefore = (await stack.sim.events()).next - 1;
      let park = await request(stack, "park", "hib-1", "Hibernate");
      park = await waitRequest(stack, "park", "Hibernated");
      assert.equal(park.status?.vmName, vmOf(NS, "hib", 1));
      assert.deepEqual([readyOf(park)?.status, readyOf(park)?.reason], ["True", "Done"]);
      assert.deepEqual(park.metadata.finalizers, [
        "cocoonhibernation.cocoonset.cocoonstack.io/finalizer",
      ]);
      const ev = await waitEvent(stack, park, "Hibernated");
      assert.equal(ev.message, `snapshot ${vmOf(NS, "hib", 1)} pushed to the registry`);
      assert.equal(await waitMetric(stack, HIBERNATE, { result: "ok" }, (v) => v > 0), 1);
      const pushed = (await stack.sim.events(eventsBefore)).events.find((e) =>
        e.type === "pushed" && e.detail === `${vmOf(NS, "hib", 1)}:hibernate`
      );
      assert.ok(pushed?.digest);
      snapshot = pushed.digest;
      assert.equal(
        await stack.registry.digestOf(`${stack.prefix}/${vmOf(NS, "hib", 1)}`, "hibernate"),
        snapshot,
      );
      // The set leaves a pod its CocoonHibernation hibernates alone (no unsuspend of it).
      cs = await waitSet(stack, cs, "one agent down", (c) => c.status?.readyAgents === 2);
      const pod = await stack.admin.get(Pods, NS, "hib-1");
      assert.equal(pod.metadata.annotations?.[ANNOTATION_HIBERNATE], "true");
      assert.equal(pod.metadata.annotations?.[ANNOTATION_LIFECYCLE_STATE], "hibernated");
      assert.equal((await getSet(stack, cs)).status?.phase, "Scaling");
    });

    await step(
      "wake: Active, restored from that snapshot, the tag dropped after it ran",
      async () => {
        const eventsBefore = (await stack.sim.events()).next - 1;
        const wokenAt = Date.now();
        let park = await stack.admin.patch(CocoonHibernations, NS, "park", "merge", {
          spec: { desire: "Wake" },
        });
        park = await waitRequest(stack, "park", "Active");
        assert.deepEqual([readyOf(park)?.status, readyOf(park)?.reason], ["True", "Done"]);
        const ev = await waitEvent(stack, park, "WokenActive");
        assert.equal(ev.message, `pod ${NS}/hib-1 is running`);
        assert.equal(await waitMetric(stack, WAKE, { result: "ok" }, (v) => v > 0), 1);
        assert.equal((await stack.sim.vm(NS, "hib-1"))?.restoredFrom, snapshot);
        await waitUntil(async () => (await stack.tagsOf(vmOf(NS, "hib", 1))).length === 0, {
          what: "the snapshot dropped",
          timeoutMs: 30_000,
        });
        const ready = (await stack.sim.events(eventsBefore)).events.find((e) =>
          e.type === "ready" && e.namespace === NS && e.name === "hib-1"
        );
        assert.ok(ready);
        const deletes = stack.proxy.requestsFor(`${stack.prefix}/${vmOf(NS, "hib", 1)}`, "DELETE")
          .filter((d) => d.at >= wokenAt);
        assert.ok(deletes.length > 0);
        for (const d of deletes) assert.ok(d.at >= ready.at, "dropped only after the VM ran");
        await waitPod(stack, NS, "hib-1", "Ready", isPodReady);
        // Each transition is announced once.
        assert.equal(await eventCount(stack, park, "Hibernated"), 1);
        assert.equal(await eventCount(stack, park, "WokenActive"), 1);
        cs = await waitSet(
          stack,
          cs,
          "Running again",
          (c) => inPhase("Running")(c) && c.status?.readyAgents === 3,
        );
      },
    );

    await step("a hibernation that cannot finish times out, then is retried at once", async () => {
      // The simulator refuses hib-2's pushes: it stays hibernating, retrying.
      await stack.admin.patch(Pods, NS, "hib-2", "merge", {
        metadata: { annotations: { [ANNOTATION_SIM_PUSH_FAIL]: "true" } },
      });
      await request(stack, "slow", "hib-2", "Hibernate");
      const slow = await waitRequest(stack, "slow", "Hibernating");
      await waitUntil(async () => (await stack.sim.status()).counters.pushFailures > 0, {
        what: "a refused push",
        timeoutMs: 30_000,
      });
      // Back-date the phase clock (Ready's lastTransitionTime) past the 3 min deadline.
      const backdated = rfc3339(Date.now() - 4 * 60_000);
      await stack.admin.patch(CocoonHibernations, NS, "slow", "merge", {
        status: {
          conditions: (slow.status?.conditions ?? []).map((c) =>
            c.type === "Ready" ? { ...c, lastTransitionTime: backdated } : c
          ),
        },
      }, { subresource: "status" });

      const timedOut = await waitEvent(stack, slow, "HibernateTimedOut");
      assert.equal(timedOut.type, "Warning");
      assert.equal(
        timedOut.message,
        `snapshot ${vmOf(NS, "hib", 2)} not confirmed in the registry within 3m0s`,
      );
      assert.equal(await waitMetric(stack, HIBERNATE, { result: "timeout" }, (v) => v > 0), 1);
      const retry = await waitEvent(stack, slow, "RetryRequested");
      assert.equal(retry.message, "retrying Hibernate after prior failure");
      const again = await waitRequest(stack, "slow", "Hibernating");
      const clock = parseRfc3339(readyOf(again)?.lastTransitionTime ?? "") ?? 0;
      assert.ok(clock > Date.now() - 60_000, "the retry restarted the phase clock");

      // The Failed phase was written in between, with the reason.
      const failed = requests.first((s) =>
        s.object.metadata.name === "slow" && s.object.status?.phase === "Failed"
      );
      assert.ok(failed, "Failed was written");
      assert.deepEqual(
        [readyOf(failed.object)?.reason, readyOf(failed.object)?.message],
        ["Failed", "hibernate not confirmed within 3m0s"],
      );
      const retried = requests.first((s) =>
        s.object.metadata.name === "slow" && s.rv > failed.rv &&
        s.object.status?.phase === "Hibernating"
      );
      assert.ok(retried, "Hibernating again after Failed");
    });

    await step("recovery: the push goes through, Hibernated", async () => {
      await stack.admin.patch(Pods, NS, "hib-2", "merge", {
        metadata: { annotations: { [ANNOTATION_SIM_PUSH_FAIL]: null } },
      });
      const slow = await waitRequest(stack, "slow", "Hibernated");
      assert.equal(readyOf(slow)?.status, "True");
      await waitEvent(stack, slow, "Hibernated");
      assert.equal(await waitMetric(stack, HIBERNATE, { result: "ok" }, (v) => v >= 2), 2);
      assert.deepEqual(await stack.tagsOf(vmOf(NS, "hib", 2)), ["hibernate"]);
      assert.equal(await stack.metric(HIBERNATE, { result: "timeout" }), 1);
      for (const reason of ["HibernateTimedOut", "RetryRequested", "Hibernated"]) {
        assert.equal(await eventCount(stack, slow, reason), 1, `${reason} once`);
      }
    });
  } finally {
    await requests.stop();
  }
});
