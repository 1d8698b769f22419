/**
 * Snapshot safety on the real system (operator, simulator, registry and control plane as separate
 * processes): a CocoonHibernation deleted while its pod is gone keeps the tag a released seat
 * needs, a finished Wake request yields to a suspend instead of fighting it, a released-seat wake
 * withdraws a hibernate request nobody owns, and teardown deletes no tag under a name the set does
 * not derive or another namespace shares. tests/PARITY.md maps each step to the finding it pins.
 */
import assert from "node:assert/strict";
import { type CocoonHibernation, CocoonHibernations } from "../../common/apis/v1/mod.ts";
import { CocoonSets } from "../../common/apis/v1/resources.ts";
import { findStatusCondition } from "../../common/k8s/condition.ts";
import {
  ANNOTATION_HIBERNATE,
  ANNOTATION_LIFECYCLE_OBSERVED_GENERATION,
  ANNOTATION_LIFECYCLE_STATE,
  ANNOTATION_LIFECYCLE_STATE_MESSAGE,
  ANNOTATION_VM_NAME,
} from "../../common/meta/keys.ts";
import { ANNOTATION_SIM_LIFECYCLE, ANNOTATION_SIM_REMOVE_DELAY_MS } from "../../sim/knobs.ts";
import { Pods } from "../../kube/core.ts";
import { isNotFound } from "../../kube/errors.ts";
import type { Stack } from "../harness/stack.ts";
import { waitUntil } from "../harness/wait.ts";
import {
  conditionOf,
  createSet,
  eventCount,
  getSet,
  inPhase,
  patchSpec,
  vmOf,
  waitEvent,
  waitGone,
  waitPod,
  waitSet,
} from "../harness/stack_objects.ts";
import { e2eSuite } from "./_support.ts";
import { ANNOTATION_SNAPSHOT_LEDGER } from "../../cocoonset/snapshot_ledger.ts";

const NS = "e2e-safety";

async function createRequest(
  stack: Stack,
  namespace: string,
  name: string,
  pod: string,
  desire: "Hibernate" | "Wake",
): Promise<CocoonHibernation> {
  return await stack.admin.create(CocoonHibernations, {
    apiVersion: "cocoonset.cocoonstack.io/v1",
    kind: "CocoonHibernation",
    metadata: { name, namespace },
    spec: { podRef: { name: pod }, desire },
  });
}

async function waitRequest(
  stack: Stack,
  namespace: string,
  name: string,
  what: string,
  ok: (h: CocoonHibernation) => boolean,
): Promise<CocoonHibernation> {
  return await waitUntil(async () => {
    const h = await stack.admin.get(CocoonHibernations, namespace, name);
    return ok(h) ? h : undefined;
  }, { what: `${namespace}/${name} ${what}`, timeoutMs: 60_000, intervalMs: 100 });
}

/**
 * Turns the pod's VM into one run by a vk-cocoon that writes no lifecycle annotations (the ones
 * the boot wrote are dropped) and hibernates as save → push → remove, the VM up for a while after
 * the push.
 */
async function silence(stack: Stack, namespace: string, pod: string): Promise<void> {
  await stack.admin.patch(Pods, namespace, pod, "merge", {
    metadata: {
      annotations: {
        [ANNOTATION_SIM_LIFECYCLE]: "silent",
        [ANNOTATION_SIM_REMOVE_DELAY_MS]: "1500",
        [ANNOTATION_LIFECYCLE_STATE]: null,
        [ANNOTATION_LIFECYCLE_OBSERVED_GENERATION]: null,
        [ANNOTATION_LIFECYCLE_STATE_MESSAGE]: null,
      },
    },
  });
}

function deleteRequests(stack: Stack, vm: string) {
  return stack.proxy.requestsFor(`${stack.prefix}/${vm}`, "DELETE");
}

e2eSuite("snapshot safety", { latencies: { bootMs: 1_500 } }, async (stack, step) => {
  await stack.namespace(NS);

  await step(
    "a request deleted while its pod is gone keeps the released seat's :hibernate",
    async () => {
      let cs = await createSet(stack, NS, "rel", { hibernatePolicy: "release" });
      cs = await waitSet(stack, cs, "Running", inPhase("Running"));
      await createRequest(stack, NS, "keep", "rel-0", "Hibernate");
      await waitRequest(stack, NS, "keep", "Hibernated", (h) => h.status?.phase === "Hibernated");
      // The seat is released with the request's hibernation in the tag: the pod goes.
      cs = await patchSpec(stack, cs, { suspend: true });
      cs = await waitSet(stack, cs, "Suspended", inPhase("Suspended"));
      await waitGone("rel-0", () => stack.admin.get(Pods, NS, "rel-0"));
      const vm = vmOf(NS, "rel", 0);
      const digest = await stack.registry.digestOf(`${stack.prefix}/${vm}`, "hibernate");
      assert.ok(digest, "the released seat's snapshot exists");

      await stack.admin.delete(CocoonHibernations, NS, "keep");
      await waitGone("keep", () => stack.admin.get(CocoonHibernations, NS, "keep"));
      assert.deepEqual(await stack.tagsOf(vm), ["hibernate"], "the set still needs it");
      assert.deepEqual(deleteRequests(stack, vm), [], "no DELETE was sent for it");

      // The unsuspend restores the VM from that very snapshot, then drops it.
      cs = await patchSpec(stack, cs, { suspend: false });
      await waitUntil(async () => (await stack.sim.vm(NS, "rel-0"))?.phase === "running", {
        what: "rel-0 running again",
        timeoutMs: 60_000,
      });
      assert.equal((await stack.sim.vm(NS, "rel-0"))?.restoredFrom, digest);
      await waitUntil(async () => (await stack.tagsOf(vm)).length === 0, {
        what: `${vm}:hibernate dropped after the wake`,
        timeoutMs: 60_000,
      });
    },
  );

  await step(
    "a finished Wake request yields to a retain suspend (one Warning, Blocked, Suspended)",
    async () => {
      let cs = await createSet(stack, NS, "ret", {});
      cs = await waitSet(stack, cs, "Running", inPhase("Running"));
      await createRequest(stack, NS, "woke", "ret-0", "Wake");
      await waitRequest(stack, NS, "woke", "Active", (h) => h.status?.phase === "Active");
      cs = await patchSpec(stack, cs, { suspend: true });
      cs = await waitSet(stack, cs, "Suspended", inPhase("Suspended"));
      const hib = await waitRequest(
        stack,
        NS,
        "woke",
        "Blocked",
        (h) => findStatusCondition(h.status?.conditions, "Blocked")?.status === "True",
      );
      assert.match(
        findStatusCondition(hib.status?.conditions, "Blocked")?.message ?? "",
        /CocoonSet e2e-safety\/ret is suspended/,
      );
      await waitEvent(stack, hib, "YieldedToCocoonSet", /CocoonSet e2e-safety\/ret/);
      // Suspended holds: the request never cleared the suspend's annotation.
      const pod = await stack.admin.get(Pods, NS, "ret-0");
      assert.equal(pod.metadata.annotations?.[ANNOTATION_HIBERNATE], "true");
      assert.deepEqual(await stack.tagsOf(vmOf(NS, "ret", 0)), ["hibernate"]);
      assert.equal(await eventCount(stack, hib, "YieldedToCocoonSet"), 1, "no loop of Warnings");
      assert.equal((await getSet(stack, cs)).status?.phase, "Suspended");
      await stack.admin.delete(CocoonHibernations, NS, "woke");
    },
  );

  await step(
    "a released-seat wake withdraws a hibernate request nobody owns and finishes",
    async () => {
      let cs = await createSet(stack, NS, "orph", { hibernatePolicy: "release" });
      cs = await waitSet(stack, cs, "Running", inPhase("Running"));
      cs = await patchSpec(stack, cs, { suspend: true });
      cs = await waitSet(stack, cs, "Suspended", inPhase("Suspended"));
      await waitGone("orph-0", () => stack.admin.get(Pods, NS, "orph-0"));
      cs = await patchSpec(stack, cs, { suspend: false });
      // The restore pod gets a hibernate request from nobody the operator knows (a stale pass).
      await waitPod(stack, NS, "orph-0", "created", () => true);
      await stack.admin.patch(Pods, NS, "orph-0", "merge", {
        metadata: { annotations: { [ANNOTATION_HIBERNATE]: "true" } },
      });
      await waitEvent(stack, cs, "OrphanHibernateWithdrawn", /orph-0/);
      cs = await waitSet(stack, cs, "Running", inPhase("Running"));
      assert.equal((await stack.sim.vm(NS, "orph-0"))?.phase, "running");
    },
  );

  await step(
    "a migration ends past a Hibernate request that yields to it, which then hibernates",
    async () => {
      let cs = await createSet(stack, NS, "mv", {});
      cs = await waitSet(stack, cs, "Running", inPhase("Running"));
      const from = (await stack.admin.get(Pods, NS, "mv-0")).spec!.nodeName!;
      const to = from === "vk-a" ? "vk-b" : "vk-a";
      cs = await patchSpec(stack, cs, { nodeName: to });
      await waitSet(stack, cs, "Migrating", (c) => c.status?.phase === "Migrating");
      // The request arrives mid-migration: it yields, and must not hold the migration's tag.
      await createRequest(stack, NS, "mvh", "mv-0", "Hibernate");
      cs = await waitSet(
        stack,
        cs,
        `Running on ${to}`,
        (c) => inPhase("Running")(c) && c.spec.nodeName === to,
        120_000,
      );
      await waitPod(stack, NS, "mv-0", `on ${to}`, (p) => p.spec?.nodeName === to);
      // Then the request has its turn: vk-cocoon pushes a fresh :hibernate of the moved VM.
      await waitRequest(stack, NS, "mvh", "Hibernated", (h) => h.status?.phase === "Hibernated");
      assert.deepEqual(await stack.tagsOf(vmOf(NS, "mv", 0)), ["hibernate"]);
      await stack.admin.delete(CocoonHibernations, NS, "mvh");
      await waitGone("mvh", () => stack.admin.get(CocoonHibernations, NS, "mvh"));
    },
  );

  await step(
    "VM name collision: e2e-col-x/prod comes second to e2e-col/x-prod and creates no pod",
    async () => {
      let first = await createSet(stack, "e2e-col", "x-prod", {});
      first = await waitSet(stack, first, "Running", inPhase("Running"));
      const second = await createSet(stack, "e2e-col-x", "prod", {});
      const lost = await waitSet(
        stack,
        second,
        "Ready=False VMNameConflict",
        (c) => conditionOf(c, "Ready")?.reason === "VMNameConflict",
      );
      assert.equal(conditionOf(lost, "Ready")?.status, "False");
      await waitEvent(
        stack,
        lost,
        "VMNameConflict",
        /vk-e2e-col-x-prod-0.*e2e-col\/x-prod.*e2e-col-x\/prod/,
      );
      await assert.rejects(
        () => stack.admin.get(Pods, "e2e-col-x", "prod-0"),
        (err) => isNotFound(err),
        "no second VM under the shared name",
      );
      assert.equal((await stack.sim.vm("e2e-col", "x-prod-0"))?.phase, "running");
      await stack.admin.delete(CocoonSets, "e2e-col-x", "prod");
      await waitGone("prod", () => stack.admin.get(CocoonSets, "e2e-col-x", "prod"));
      await stack.admin.delete(CocoonSets, "e2e-col", "x-prod");
      await waitGone("x-prod", () => stack.admin.get(CocoonSets, "e2e-col", "x-prod"));
    },
  );

  await step(
    "tenancy: teardown deletes no tag under a name from delete-vm-names alone",
    async () => {
      const victim = vmOf("e2e-victim", "app", 0);
      await stack.namespace("e2e-victim");
      await stack.registry.pushManifest(`${stack.prefix}/${victim}`, "hibernate", '{"v":1}');
      let cs = await createSet(stack, NS, "thief", {});
      cs = await waitSet(stack, cs, "Running", inPhase("Running"));
      cs = await stack.admin.patch(CocoonSets, NS, "thief", "merge", {
        metadata: {
          // Both editable: a name list naming another namespace's VM, and no ledger (which
          // makes teardown try every tag of every listed name).
          annotations: {
            "cocoonset.cocoonstack.io/delete-vm-names": `${victim}`,
            [ANNOTATION_SNAPSHOT_LEDGER]: null,
          },
        },
      });
      await stack.admin.delete(CocoonSets, NS, "thief");
      await waitEvent(stack, cs, "SnapshotDeleteRefused", new RegExp(victim));
      await waitGone("thief", () => stack.admin.get(CocoonSets, NS, "thief"));
      assert.deepEqual(await stack.tagsOf(victim), ["hibernate"]);
      assert.deepEqual(deleteRequests(stack, victim), []);
    },
  );

  await step(
    "tenancy: a request acts only under its own pod's name; team/x-prod-0 vs team-x/prod collide",
    async () => {
      // A pod whose editable annotation names another namespace's VM.
      const victim = vmOf("e2e-victim", "app", 0);
      await stack.admin.create(Pods, {
        metadata: { name: "bare-0", namespace: NS, annotations: { [ANNOTATION_VM_NAME]: victim } },
        spec: { containers: [{ name: "c", image: "x" }], nodeName: "no-such-node" },
      });
      await createRequest(stack, NS, "steal", "bare-0", "Wake");
      const refused = await waitRequest(
        stack,
        NS,
        "steal",
        "Failed",
        (h) => h.status?.phase === "Failed",
      );
      await waitEvent(stack, refused, "VMNameRefused", new RegExp(victim));
      assert.deepEqual(await stack.tagsOf(victim), ["hibernate"]);

      // Two namespaces derive vk-e2e-team-x-prod-0: e2e-team / x-prod-0 and e2e-team-x / prod-0.
      await stack.namespace("e2e-team");
      let cs = await createSet(stack, "e2e-team-x", "prod", {});
      cs = await waitSet(stack, cs, "Running", inPhase("Running"));
      const shared = vmOf("e2e-team-x", "prod", 0);
      await stack.admin.create(Pods, {
        metadata: {
          name: "x-prod-0",
          namespace: "e2e-team",
          annotations: { [ANNOTATION_VM_NAME]: shared },
        },
        spec: { containers: [{ name: "c", image: "x" }], nodeName: "no-such-node" },
      });
      await stack.registry.pushManifest(`${stack.prefix}/${shared}`, "hibernate", '{"s":1}');
      await createRequest(stack, "e2e-team", "shared", "x-prod-0", "Hibernate");
      const collided = await waitRequest(
        stack,
        "e2e-team",
        "shared",
        "Failed",
        (h) => h.status?.phase === "Failed",
      );
      await waitEvent(stack, collided, "VMNameRefused", /CocoonSet e2e-team-x\/prod/);
      const setPod = await stack.admin.get(Pods, "e2e-team-x", "prod-0");
      assert.equal(setPod.metadata.annotations?.[ANNOTATION_HIBERNATE], undefined);
      // No ledger: teardown tries every tag of the set's VMs.
      await stack.admin.patch(CocoonSets, "e2e-team-x", "prod", "merge", {
        metadata: { annotations: { [ANNOTATION_SNAPSHOT_LEDGER]: null } },
      });
      await stack.admin.delete(CocoonSets, "e2e-team-x", "prod");
      await waitEvent(stack, cs, "SnapshotDeleteRefused", /Pod e2e-team\/x-prod-0/);
      await waitGone("prod", () => stack.admin.get(CocoonSets, "e2e-team-x", "prod"));
      assert.ok((await stack.tagsOf(shared)).includes("hibernate"));
      assert.deepEqual(deleteRequests(stack, shared), []);
      for (const [ns, name] of [[NS, "steal"], ["e2e-team", "shared"]]) {
        await stack.admin.delete(CocoonHibernations, ns, name).catch((err) => {
          if (!isNotFound(err)) throw err;
        });
      }
    },
  );

  await step(
    "with a vk-cocoon that writes no lifecycle annotations a retain suspend, a release suspend and a Hibernate request end",
    async () => {
      let retain = await createSet(stack, NS, "quiet", {});
      let release = await createSet(stack, NS, "quietrel", { hibernatePolicy: "release" });
      const byHand = await createSet(stack, NS, "quiethib", {});
      retain = await waitSet(stack, retain, "Running", inPhase("Running"));
      release = await waitSet(stack, release, "Running", inPhase("Running"));
      await waitSet(stack, byHand, "Running", inPhase("Running"));
      for (const pod of ["quiet-0", "quietrel-0", "quiethib-0"]) await silence(stack, NS, pod);

      retain = await patchSpec(stack, retain, { suspend: true });
      release = await patchSpec(stack, release, { suspend: true });
      await createRequest(stack, NS, "quiet-hib", "quiethib-0", "Hibernate");

      await waitSet(stack, retain, "Suspended", inPhase("Suspended"));
      assert.equal((await stack.sim.vm(NS, "quiet-0"))?.phase, "hibernated");
      assert.deepEqual(await stack.tagsOf(vmOf(NS, "quiet", 0)), ["hibernate"]);
      const quiet = await stack.admin.get(Pods, NS, "quiet-0");
      assert.equal(quiet.metadata.annotations?.[ANNOTATION_LIFECYCLE_STATE], undefined, "silent");

      await waitSet(stack, release, "Suspended", inPhase("Suspended"));
      await waitGone("quietrel-0", () => stack.admin.get(Pods, NS, "quietrel-0"));
      assert.deepEqual(await stack.tagsOf(vmOf(NS, "quietrel", 0)), ["hibernate"]);

      await waitRequest(
        stack,
        NS,
        "quiet-hib",
        "Hibernated",
        (h) => h.status?.phase === "Hibernated",
      );
      assert.equal((await stack.sim.vm(NS, "quiethib-0"))?.phase, "hibernated");
      assert.deepEqual(await stack.tagsOf(vmOf(NS, "quiethib", 0)), ["hibernate"]);
      await stack.admin.delete(CocoonHibernations, NS, "quiet-hib");
    },
  );

  await step(
    "a suspend does not hibernate a VM whose name another namespace derives",
    async () => {
      // e2e-team / x-late-0 and e2e-team-x / late-0 both derive vk-e2e-team-x-late-0.
      await stack.namespace("e2e-team");
      let cs = await createSet(stack, "e2e-team-x", "late", {});
      cs = await waitSet(stack, cs, "Running", inPhase("Running"));
      const shared = vmOf("e2e-team-x", "late", 0);
      await stack.admin.create(Pods, {
        metadata: {
          name: "x-late-0",
          namespace: "e2e-team",
          annotations: { [ANNOTATION_VM_NAME]: shared },
        },
        spec: { containers: [{ name: "c", image: "x" }], nodeName: "no-such-node" },
      });
      cs = await patchSpec(stack, cs, { suspend: true });
      await waitEvent(
        stack,
        cs,
        "HibernateRefused",
        /CocoonSet e2e-team-x\/late.*Pod e2e-team\/x-late-0/,
      );
      cs = await waitSet(stack, cs, "Suspending", inPhase("Suspending"));
      const main = await stack.admin.get(Pods, "e2e-team-x", "late-0");
      assert.equal(main.metadata.annotations?.[ANNOTATION_HIBERNATE], undefined);
      assert.equal((await stack.sim.vm("e2e-team-x", "late-0"))?.phase, "running");
      assert.deepEqual(await stack.tagsOf(shared), [], "nothing was pushed under the shared name");
      // Once the other namespace's pod is gone, the same suspend goes through.
      await stack.admin.delete(Pods, "e2e-team", "x-late-0", { gracePeriodSeconds: 0 });
      await waitSet(stack, cs, "Suspended", inPhase("Suspended"));
    },
  );

  await step(
    "a first comer suspends although a later set of the other namespace derives its name",
    async () => {
      // e2e-fc-x / early came first; e2e-fc / x-early, created later, derives the same VM name,
      // creates no pod (VMNameConflict) and so holds nothing under it.
      let first = await createSet(stack, "e2e-fc-x", "early", {});
      first = await waitSet(stack, first, "Running", inPhase("Running"));
      const second = await createSet(stack, "e2e-fc", "x-early", {});
      await waitSet(
        stack,
        second,
        "Ready=False VMNameConflict",
        (c) => conditionOf(c, "Ready")?.reason === "VMNameConflict",
      );
      first = await patchSpec(stack, first, { suspend: true });
      await waitSet(stack, first, "Suspended", inPhase("Suspended"));
      const shared = vmOf("e2e-fc-x", "early", 0);
      assert.ok((await stack.tagsOf(shared)).includes("hibernate"), "the first comer pushed");
      await stack.admin.delete(CocoonSets, "e2e-fc", "x-early");
      await waitGone("x-early", () => stack.admin.get(CocoonSets, "e2e-fc", "x-early"));
      await stack.admin.delete(CocoonSets, "e2e-fc-x", "early");
      await waitGone("early", () => stack.admin.get(CocoonSets, "e2e-fc-x", "early"));
    },
  );
});
