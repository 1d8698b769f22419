/**
 * Cross-node migration of a running main (spec.nodeName) on two simulator nodes: Migrating is
 * written before the main is asked to hibernate; the old pod goes once its snapshot is in the
 * registry; the main is recreated on the target restoring that very snapshot (the simulator
 * records the digest of the manifest it pulled); the snapshot is dropped only after the new VM
 * runs; the sub-agents keep running on the old node, untouched.
 */
import assert from "node:assert/strict";
import type { CocoonSet } from "../../common/apis/v1/cocoonset_types.ts";
import { CocoonSets } from "../../common/apis/v1/resources.ts";
import {
  ANNOTATION_HIBERNATE,
  ANNOTATION_RESTORE_FROM_HIBERNATE,
  ANNOTATION_VMID,
} from "../../common/meta/keys.ts";
import { isPodReady } from "../../common/meta/pod.ts";
import { type Pod, Pods } from "../../kube/core.ts";
import { recordTimeline } from "../harness/timeline.ts";
import { waitUntil } from "../harness/wait.ts";
import {
  createSet,
  inPhase,
  livePodsOf,
  patchSpec,
  vmOf,
  waitPod,
  waitSet,
} from "../harness/stack_objects.ts";
import { e2eSuite } from "./_support.ts";

const NS = "e2e-migrate";
const VM = vmOf(NS, "mig", 0);

e2eSuite("migration of a running main to the other node", {}, async (stack, step) => {
  await stack.namespace(NS);
  const sets = await recordTimeline(stack.admin, CocoonSets, NS);
  const pods = await recordTimeline(stack.admin, Pods, NS);
  let cs: CocoonSet = await createSet(stack, NS, "mig", { agent: { replicas: 2 } });
  try {
    let before = new Map<string, Pod>();
    /** resourceVersion of the spec edit that asked for the migration. */
    let editRv = 0;
    await step("a running set: main and two sub-agents on one node", async () => {
      cs = await waitSet(
        stack,
        cs,
        "Running",
        (c) => inPhase("Running")(c) && c.status?.readyAgents === 3,
      );
      before = await livePodsOf(stack, cs);
    });

    await step(
      "spec.nodeName → the same snapshot restored on the target, then dropped",
      async () => {
        const oldMain = before.get("mig-0")!;
        const from = oldMain.spec!.nodeName!;
        const to = from === "vk-a" ? "vk-b" : "vk-a";
        const eventsBefore = (await stack.sim.events()).next - 1;
        const startedAt = Date.now();
        cs = await patchSpec(stack, cs, { nodeName: to });
        editRv = Number(cs.metadata.resourceVersion);

        const main = await waitPod(
          stack,
          NS,
          "mig-0",
          `live on ${to}`,
          (p) =>
            p.metadata.uid !== oldMain.metadata.uid && p.spec?.nodeName === to && isPodReady(p),
        );
        cs = await waitSet(
          stack,
          cs,
          "Running again",
          (c) => inPhase("Running")(c) && c.status?.readyAgents === 3,
        );

        // Migrating was durable before the old main was asked to hibernate.
        const migrating = sets.first((s) => s.object.status?.phase === "Migrating");
        const quiesced = pods.first((s) =>
          s.object.metadata.uid === oldMain.metadata.uid &&
          s.object.metadata.annotations?.[ANNOTATION_HIBERNATE] === "true"
        );
        assert.ok(migrating && quiesced, "Migrating and the hibernate request were both seen");
        assert.ok(migrating.rv < quiesced.rv, "Migrating is written first");

        // The old main went only after its snapshot was pushed.
        const events = (await stack.sim.events(eventsBefore)).events.filter((e) =>
          e.namespace === NS
        );
        const pushed = events.find((e) => e.type === "pushed" && e.detail === `${VM}:hibernate`);
        assert.ok(pushed?.digest, "the old main's VM pushed its :hibernate snapshot");
        const oldGone = pods.first((s) =>
          s.object.metadata.uid === oldMain.metadata.uid && !!s.object.metadata.deletionTimestamp
        );
        assert.ok(oldGone, "the old main was deleted");
        const hibernated = pods.first((s) =>
          s.object.metadata.uid === oldMain.metadata.uid &&
          s.object.metadata.annotations?.["vm.cocoonstack.io/lifecycle-state"] === "hibernated"
        );
        assert.ok(hibernated && hibernated.rv < oldGone.rv, "deleted after it hibernated");

        // The new main: required affinity to the target, restored from exactly that manifest.
        assert.equal(main.metadata.annotations?.[ANNOTATION_RESTORE_FROM_HIBERNATE], "true");
        assert.deepEqual(
          main.spec?.affinity?.nodeAffinity?.requiredDuringSchedulingIgnoredDuringExecution,
          {
            nodeSelectorTerms: [{
              matchExpressions: [{ key: "kubernetes.io/hostname", operator: "In", values: [to] }],
            }],
          },
        );
        const vm = await stack.sim.vm(NS, "mig-0");
        assert.equal(vm?.node, to);
        assert.equal(vm?.restoredFrom, pushed.digest, "restored from the migration's snapshot");
        assert.notEqual(
          main.metadata.annotations?.[ANNOTATION_VMID],
          oldMain.metadata.annotations?.[ANNOTATION_VMID],
        );

        // The snapshot is dropped, and only after the restored VM ran.
        await waitUntil(async () => (await stack.tagsOf(VM)).length === 0, {
          what: `${VM}:hibernate dropped`,
          timeoutMs: 30_000,
        });
        const ready = events.find((e) =>
          e.type === "ready" && e.name === "mig-0" && e.digest === pushed.digest
        );
        assert.ok(ready, "the simulator reported the restored VM ready");
        const deletes = stack.proxy.requestsFor(`${stack.prefix}/${VM}`, "DELETE")
          .filter((d) => d.at >= startedAt);
        assert.ok(deletes.length > 0, "the operator deleted the snapshot");
        for (const d of deletes) {
          assert.ok(
            d.at >= ready.at,
            `snapshot DELETE at ${d.at} before the VM ran at ${ready.at}`,
          );
        }
      },
    );

    await step("the sub-agents were not touched", async () => {
      const after = await livePodsOf(stack, cs);
      for (const name of ["mig-1", "mig-2"]) {
        const was = before.get(name)!;
        const now = after.get(name)!;
        assert.equal(now.metadata.uid, was.metadata.uid, `${name} is the same pod`);
        assert.equal(now.spec?.nodeName, was.spec?.nodeName, `${name} stays on its node`);
        assert.equal(
          now.metadata.annotations?.[ANNOTATION_VMID],
          was.metadata.annotations?.[ANNOTATION_VMID],
          `${name} runs the same VM`,
        );
        assert.equal(now.metadata.annotations?.[ANNOTATION_HIBERNATE], undefined);
        // Ready in every version the API server wrote since the migration was asked for.
        const since = pods.of(name).filter((s) => s.rv > editRv);
        for (const s of since) {
          assert.ok(isPodReady(s.object), `${name} was never seen not Ready (rv ${s.rv})`);
          assert.equal(s.object.metadata.uid, was.metadata.uid, `${name} never replaced`);
          assert.notEqual(s.type, "DELETED");
        }
      }
      assert.deepEqual(cs.status?.agents?.map((a) => a.forkedFrom ?? ""), ["", VM, VM]);
      assert.equal(after.get("mig-0")?.spec?.nodeName, cs.spec.nodeName);
    });
  } finally {
    await sets.stop();
    await pods.stop();
  }
});
