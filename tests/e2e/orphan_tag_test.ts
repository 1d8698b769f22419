/**
 * A deleted CocoonHibernation's `:hibernate` tag on the real system (operator, simulator,
 * registry and control plane as separate processes): while the pod is still hibernated the tag
 * stays (the VM's state is only there), and once the set has brought the VM back from it the
 * tag goes — with vk-cocoon as it is today (no lifecycle annotations, save → push → remove) and
 * with one that writes the lifecycle annotations.
 */
import assert from "node:assert/strict";
import { CocoonHibernations } from "../../common/apis/v1/mod.ts";
import {
  ANNOTATION_HIBERNATE,
  ANNOTATION_LIFECYCLE_OBSERVED_GENERATION,
  ANNOTATION_LIFECYCLE_STATE,
  ANNOTATION_LIFECYCLE_STATE_MESSAGE,
} from "../../common/meta/keys.ts";
import { ANNOTATION_ORPHAN_HIBERNATE_TAG } from "../../common/meta/orphan_tag.ts";
import {
  ANNOTATION_SIM_BOOT_DELAY_MS,
  ANNOTATION_SIM_LIFECYCLE,
  ANNOTATION_SIM_REMOVE_DELAY_MS,
} from "../../sim/knobs.ts";
import { Pods } from "../../kube/core.ts";
import type { Stack } from "../harness/stack.ts";
import { waitUntil } from "../harness/wait.ts";
import { createSet, inPhase, vmOf, waitGone, waitPod, waitSet } from "../harness/stack_objects.ts";
import { e2eSuite } from "./_support.ts";

const NS = "e2e-orphan";
/** How long the simulated VM takes to come back: the window in which the pod sleeps on. */
const WAKE_MS = "4000";

/** vk-cocoon as it is today for this pod: no lifecycle annotations, a slow removal. */
async function silence(stack: Stack, pod: string): Promise<void> {
  await stack.admin.patch(Pods, NS, pod, "merge", {
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

/**
 * Hibernates slot `slot` of a new set through a request, deletes the request, and follows the tag
 * to its end. A sub-agent matters apart: with its main Ready the set has no look-again of its own,
 * so only the request's deletion brings its pass.
 */
async function deletedRequestsTag(
  stack: Stack,
  set: string,
  silent: boolean,
  slot = 0,
): Promise<void> {
  let cs = await createSet(stack, NS, set, { agent: { replicas: slot } });
  cs = await waitSet(stack, cs, "Running", inPhase("Running"));
  const pod = `${set}-${slot}`;
  const vm = vmOf(NS, set, slot);
  if (silent) await silence(stack, pod);
  await stack.admin.create(CocoonHibernations, {
    apiVersion: "cocoonset.cocoonstack.io/v1",
    kind: "CocoonHibernation",
    metadata: { name: `${set}-sleep`, namespace: NS },
    spec: { podRef: { name: pod }, desire: "Hibernate" },
  });
  await waitUntil(async () => {
    const h = await stack.admin.get(CocoonHibernations, NS, `${set}-sleep`);
    return h.status?.phase === "Hibernated" ? h : undefined;
  }, { what: `${set}-sleep Hibernated`, timeoutMs: 60_000, intervalMs: 100 });
  const digest = await stack.registry.digestOf(`${stack.prefix}/${vm}`, "hibernate");
  assert.ok(digest, "the request's snapshot was pushed");
  // The VM will take a while to come back: long enough to see the pod sleep on.
  await stack.admin.patch(Pods, NS, pod, "merge", {
    metadata: { annotations: { [ANNOTATION_SIM_BOOT_DELAY_MS]: WAKE_MS } },
  });

  await stack.admin.delete(CocoonHibernations, NS, `${set}-sleep`);
  await waitGone(`${set}-sleep`, () => stack.admin.get(CocoonHibernations, NS, `${set}-sleep`));
  // The set withdraws the hibernate request nobody owns; the VM is on its way back.
  const waking = await waitPod(
    stack,
    NS,
    pod,
    "withdrawn, tag marked orphaned",
    (p) =>
      p.metadata.annotations?.[ANNOTATION_HIBERNATE] === undefined &&
      p.metadata.annotations?.[ANNOTATION_ORPHAN_HIBERNATE_TAG] !== undefined,
  );
  assert.equal(waking.metadata.annotations?.["vm.cocoonstack.io/id"], undefined, "still down");
  assert.deepEqual(await stack.tagsOf(vm), ["hibernate"], "kept while the pod sleeps");

  await waitUntil(async () => (await stack.sim.vm(NS, pod))?.phase === "running", {
    what: `${pod} running again`,
    timeoutMs: 60_000,
  });
  assert.equal((await stack.sim.vm(NS, pod))?.restoredFrom, digest, "restored from that tag");
  await waitUntil(async () => (await stack.tagsOf(vm)).length === 0, {
    what: `${vm}:hibernate dropped once the VM is back`,
    timeoutMs: 30_000,
  });
  await waitPod(
    stack,
    NS,
    pod,
    "orphan mark settled",
    (p) => p.metadata.annotations?.[ANNOTATION_ORPHAN_HIBERNATE_TAG] === undefined,
  );
  assert.equal((await stack.sim.vm(NS, pod))?.phase, "running");
}

e2eSuite(
  "a deleted request's :hibernate tag",
  { latencies: { bootMs: 500 } },
  async (stack, step) => {
    await stack.namespace(NS);
    await step(
      "vk-cocoon of today: kept while the pod sleeps, gone once the VM is back",
      () => deletedRequestsTag(stack, "head", true),
    );
    await step(
      "vk-cocoon with lifecycle annotations: the same",
      () => deletedRequestsTag(stack, "contract", false),
    );
    await step(
      "a sub-agent of a set at rest: woken once the request is gone, then its tag dropped",
      () => deletedRequestsTag(stack, "sub", true, 1),
    );
  },
);
