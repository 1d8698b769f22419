/**
 * Suspend and resume with the retain policy on the real system. A set reads Suspended only once
 * every managed VM has reported `hibernated` for the new generation AND its `:hibernate` manifest
 * is in the registry; resuming wakes every VM from its snapshot and keeps the tags (retain never
 * deletes them).
 *
 * Both halves of the gate are exercised so that skipping either would fail: a leftover
 * `:hibernate` from an earlier cycle plus a slow VM make "the manifests exist" true before one
 * VM's lifecycle pair arrives; a registry the operator cannot reach (the proxy's outage) and a
 * manifest lost after the pair arrived make "every pair is in" true before the manifests are.
 * Order is checked on the API server's own write order (resourceVersions) and on the registry
 * requests the operator made.
 */
import assert from "node:assert/strict";
import type { CocoonSet } from "../../common/apis/v1/cocoonset_types.ts";
import { CocoonSets } from "../../common/apis/v1/resources.ts";
import {
  ANNOTATION_COCOON_SET_GENERATION,
  ANNOTATION_HIBERNATE,
  ANNOTATION_LIFECYCLE_OBSERVED_GENERATION,
  ANNOTATION_LIFECYCLE_STATE,
} from "../../common/meta/keys.ts";
import { type Pod, Pods } from "../../kube/core.ts";
import { ANNOTATION_SIM_HIBERNATE_DELAY_MS } from "../../sim/knobs.ts";
import type { Stack } from "../harness/stack.ts";
import { recordTimeline, type Timeline } from "../harness/timeline.ts";
import { waitUntil } from "../harness/wait.ts";
import {
  createSet,
  getSet,
  inPhase,
  livePodsOf,
  patchSpec,
  vmOf,
  waitSet,
} from "../harness/stack_objects.ts";
import { e2eSuite } from "./_support.ts";

const NS = "e2e-suspend";
const MEMBERS = [0, 1, 2, "tb"] as const;
const PODS = MEMBERS.map((m) => `sus-${m}`);
const VMS = MEMBERS.map((m) => vmOf(NS, "sus", m));
const TOOLS = "ghcr.io/cocoonstack/cocoon/toolbox:1";
const TOOLBOXES = [{ name: "tb", image: TOOLS }];

function hibernatedAt(pod: Pod, generation: number): boolean {
  const a = pod.metadata.annotations ?? {};
  return a[ANNOTATION_LIFECYCLE_STATE] === "hibernated" &&
    Number(a[ANNOTATION_LIFECYCLE_OBSERVED_GENERATION] ?? "0") >= generation;
}

/** Waits until every pod of the set reports hibernated at `generation`. */
async function waitAllHibernated(stack: Stack, cs: CocoonSet, generation: number): Promise<void> {
  await waitUntil(async () => {
    const pods = await livePodsOf(stack, cs);
    return PODS.every((name) => {
      const pod = pods.get(name);
      return pod !== undefined && hibernatedAt(pod, generation);
    });
  }, { what: `every VM hibernated at generation ${generation}`, timeoutMs: 30_000 });
}

/**
 * Suspended was written after every pod's lifecycle pair for `generation` (write order on the
 * API server), and after the operator saw each VM's manifest in the registry.
 */
function assertSuspendedAfterPairsAndManifests(
  stack: Stack,
  sets: Timeline<CocoonSet>,
  pods: Timeline<Pod>,
  generation: number,
  manifestsSince: number,
): void {
  const suspended = sets.first((s) =>
    s.object.status?.phase === "Suspended" && s.object.status.observedGeneration === generation
  );
  assert.ok(suspended, `Suspended at generation ${generation} was seen`);
  for (const name of PODS) {
    const pair = pods.first((s) =>
      s.object.metadata.name === name && hibernatedAt(s.object, generation)
    );
    assert.ok(pair, `${name} reported hibernated at ${generation}`);
    assert.ok(
      pair.rv < suspended.rv,
      `${name}'s lifecycle pair (rv ${pair.rv}) precedes Suspended (rv ${suspended.rv})`,
    );
  }
  for (const vm of VMS) {
    const probe = stack.proxy.requestsFor(`${stack.prefix}/${vm}`, "HEAD").find((r) =>
      r.path.endsWith("/manifests/hibernate") && r.status === 200 && r.at >= manifestsSince
    );
    assert.ok(probe, `the operator found ${vm}:hibernate in the registry`);
    assert.ok(probe.at <= suspended.at, `${vm}:hibernate was confirmed before Suspended`);
  }
}

/** Resumes and checks every VM came back from its snapshot, with the tags kept. */
async function resume(stack: Stack, cs: CocoonSet): Promise<CocoonSet> {
  const digests = new Map<string, string | undefined>();
  for (const vm of VMS) {
    digests.set(vm, await stack.registry.digestOf(`${stack.prefix}/${vm}`, "hibernate"));
  }
  cs = await patchSpec(stack, cs, { suspend: false });
  cs = await waitSet(
    stack,
    cs,
    "Running",
    (c) => inPhase("Running")(c) && c.status?.readyAgents === 3,
  );
  const pods = await livePodsOf(stack, cs);
  for (const [i, name] of PODS.entries()) {
    const pod = pods.get(name)!;
    assert.equal(pod.metadata.annotations?.[ANNOTATION_HIBERNATE], undefined, `${name} woken`);
    const vm = await stack.sim.vm(NS, name);
    assert.equal(vm?.phase, "running");
    assert.equal(vm?.restoredFrom, digests.get(VMS[i]), `${name} woke from its snapshot`);
  }
  for (const vm of VMS) {
    assert.deepEqual(await stack.tagsOf(vm), ["hibernate"], `${vm}: retain keeps the tag`);
    assert.equal(
      await stack.registry.digestOf(`${stack.prefix}/${vm}`, "hibernate"),
      digests.get(vm),
    );
  }
  assert.deepEqual(
    stack.proxy.requests.filter((r) => r.method === "DELETE"),
    [],
    "retain never deletes a snapshot",
  );
  return cs;
}

/** Touches an annotation of a pod, which wakes the set's reconciler. */
async function nudge(stack: Stack, pod: string, n: number): Promise<void> {
  await stack.admin.patch(Pods, NS, pod, "merge", {
    metadata: { annotations: { "e2e.cocoonstack.io/nudge": String(n) } },
  });
}

e2eSuite("suspend and resume with the retain policy", {}, async (stack, step) => {
  await stack.namespace(NS);
  const sets = await recordTimeline(stack.admin, CocoonSets, NS);
  const pods = await recordTimeline(stack.admin, Pods, NS);
  let cs = await createSet(stack, NS, "sus", {
    agent: { replicas: 2 },
    toolboxes: TOOLBOXES,
  });
  try {
    await step("a running set: main, two sub-agents, a toolbox", async () => {
      cs = await waitSet(
        stack,
        cs,
        "Running",
        (c) => inPhase("Running")(c) && c.status?.readyAgents === 3,
      );
    });

    await step(
      "Suspended only after every VM's lifecycle pair for the new generation (a stale tag does not count)",
      async () => {
        // A :hibernate left from an earlier cycle, and a VM that takes its time: the manifests
        // all exist while sus-2 has not hibernated yet.
        await stack.registry.pushManifest(`${stack.prefix}/${VMS[2]}`, "hibernate", '{"old":1}');
        await stack.admin.patch(Pods, NS, "sus-2", "merge", {
          metadata: { annotations: { [ANNOTATION_SIM_HIBERNATE_DELAY_MS]: "2500" } },
        });
        const since = Date.now();
        cs = await patchSpec(stack, cs, { suspend: true });
        const generation = cs.metadata.generation!;
        cs = await waitSet(stack, cs, "Suspended", inPhase("Suspended"));
        assertSuspendedAfterPairsAndManifests(stack, sets, pods, generation, since);
        const stamped = await livePodsOf(stack, cs);
        for (const name of PODS) {
          const pod = stamped.get(name)!;
          assert.equal(pod.metadata.annotations?.[ANNOTATION_HIBERNATE], "true");
          assert.equal(
            pod.metadata.annotations?.[ANNOTATION_COCOON_SET_GENERATION],
            String(generation),
          );
          assert.equal(pod.spec?.nodeName !== undefined, true, `${name} keeps its seat`);
        }
        for (const vm of VMS) assert.deepEqual(await stack.tagsOf(vm), ["hibernate"]);
        assert.notEqual(
          await stack.registry.digestOf(`${stack.prefix}/${VMS[2]}`, "hibernate"),
          undefined,
        );
      },
    );

    await step(
      "a spec edit while Suspended: Suspending again until every VM echoes the new generation",
      async () => {
        const since = Date.now();
        // A new toolbox (created only after the resume): nothing running drifts.
        cs = await patchSpec(stack, cs, {
          toolboxes: [...TOOLBOXES, { name: "extra", image: TOOLS }],
        });
        const generation = cs.metadata.generation!;
        cs = await waitSet(stack, cs, "Suspended again", inPhase("Suspended"));
        const reopened = sets.first((s) =>
          s.object.status?.phase === "Suspending" &&
          s.object.status.observedGeneration === generation
        );
        assert.ok(reopened, "Suspending was written for the new generation");
        assertSuspendedAfterPairsAndManifests(stack, sets, pods, generation, since);
        const now = await livePodsOf(stack, cs);
        assert.deepEqual([...now.keys()], PODS, "nothing is created while suspended");
        for (const name of PODS) {
          assert.equal(
            now.get(name)?.metadata.annotations?.[ANNOTATION_COCOON_SET_GENERATION],
            String(generation),
          );
        }
      },
    );

    await step("resume → Running, every VM woken from its snapshot, tags kept", async () => {
      cs = await resume(stack, cs);
    });

    await step(
      "Suspended only once every manifest is confirmed (registry down, then one manifest lost)",
      async () => {
        stack.proxy.down = true;
        cs = await patchSpec(stack, cs, { suspend: true });
        const generation = cs.metadata.generation!;
        await waitAllHibernated(stack, cs, generation);
        // Every pair is in, but the operator cannot see a single manifest.
        assert.equal((await getSet(stack, cs)).status?.phase, "Suspending");
        assert.ok(await stack.registry.deleteTag(`${stack.prefix}/${VMS[1]}`, "hibernate"));
        const up = Date.now();
        stack.proxy.down = false;
        const lost = `${stack.prefix}/${VMS[1]}`;
        const misses = () =>
          stack.proxy.requestsFor(lost, "HEAD").filter((r) => r.at >= up && r.status === 404);
        // Two probes that found nothing: the pass of the first has finished when the second runs.
        await waitUntil(async () => {
          if (misses().length >= 2) return true;
          await nudge(stack, "sus-0", misses().length);
          return false;
        }, { what: "two probes of the lost manifest", timeoutMs: 30_000, intervalMs: 500 });
        assert.equal(
          (await getSet(stack, cs)).status?.phase,
          "Suspending",
          "a manifest is missing",
        );

        // vk-cocoon pushes it again: now the set is Suspended.
        const repushed = Date.now();
        await stack.registry.pushManifest(lost, "hibernate", '{"again":1}');
        await nudge(stack, "sus-0", 99);
        cs = await waitSet(stack, cs, "Suspended", inPhase("Suspended"));
        assertSuspendedAfterPairsAndManifests(stack, sets, pods, generation, up);
        const found = stack.proxy.requestsFor(lost, "HEAD").find((r) =>
          r.status === 200 && r.at >= repushed
        );
        assert.ok(found, "the re-pushed manifest was what the operator confirmed");
      },
    );

    await step("resume again → Running, tags kept", async () => {
      cs = await resume(stack, cs);
    });
  } finally {
    stack.proxy.down = false;
    await sets.stop();
    await pods.stop();
  }
});
