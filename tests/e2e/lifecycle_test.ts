/**
 * A CocoonSet's whole life on the real system (control plane, registry, simulator and a
 * sandboxed operator, each its own process): created with a main, three sub-agents and two
 * toolboxes until Running, with the pod shapes of the contract; scaled down and up (extra slots
 * deleted, new slots forked from the main and bound to its node); deleted with its finalizer
 * held until the pods are gone; and, for each snapshot policy, the registry left with exactly
 * the tags the policy keeps.
 */
import assert from "node:assert/strict";
import type { CocoonSet } from "../../common/apis/v1/cocoonset_types.ts";
import { CocoonSets } from "../../common/apis/v1/resources.ts";
import {
  ANNOTATION_BACKEND,
  ANNOTATION_COCOON_SET_GENERATION,
  ANNOTATION_CONN_TYPE,
  ANNOTATION_FORK_FROM,
  ANNOTATION_IMAGE,
  ANNOTATION_IP,
  ANNOTATION_MANAGED,
  ANNOTATION_MODE,
  ANNOTATION_OS,
  ANNOTATION_SNAPSHOT_POLICY,
  ANNOTATION_STORAGE,
  ANNOTATION_VM_NAME,
  ANNOTATION_VMID,
  ANNOTATION_VNC_PORT,
  LABEL_COCOON_SET,
  LABEL_ROLE,
  LABEL_SLOT,
} from "../../common/meta/keys.ts";
import { isPodReady } from "../../common/meta/pod.ts";
import { type Pod, Pods } from "../../kube/core.ts";
import { recordTimeline } from "../harness/timeline.ts";
import { waitUntil } from "../harness/wait.ts";
import type { Stack } from "../harness/stack.ts";
import {
  conditionOf,
  createSet,
  getSet,
  IMAGE,
  inPhase,
  livePodsOf,
  patchSpec,
  podsOf,
  vmOf,
  waitGone,
  waitMetric,
  waitSet,
} from "../harness/stack_objects.ts";
import { e2eSuite } from "./_support.ts";

const NS = "e2e-lifecycle";
const TOOLS_IMAGE = "ghcr.io/cocoonstack/cocoon/toolbox:1";
const FINALIZER = "cocoonset.cocoonstack.io/finalizer";

/** Running for this generation with every agent and toolbox ready. */
function settled(agents: number, toolboxes: number): (cs: CocoonSet) => boolean {
  return (cs) =>
    inPhase("Running")(cs) && cs.status?.readyAgents === agents &&
    cs.status.desiredAgents === agents && cs.status.readyToolboxes === toolboxes &&
    cs.status.desiredToolboxes === toolboxes;
}

/** The contract's pod shape (digest §1.2) for one pod of `cs`. */
function assertPodShape(pod: Pod, cs: CocoonSet, role: string, slot: string): void {
  const name = cs.metadata.name!;
  const what = pod.metadata.name;
  assert.deepEqual(pod.metadata.labels, {
    [LABEL_COCOON_SET]: name,
    [LABEL_ROLE]: role,
    [LABEL_SLOT]: slot,
    "app.kubernetes.io/name": name,
  }, `${what}: labels`);
  assert.deepEqual(
    pod.metadata.ownerReferences?.map((o) => [o.kind, o.name, o.uid, o.controller]),
    [["CocoonSet", name, cs.metadata.uid, true]],
    `${what}: one controller reference to the set`,
  );
  const a = pod.metadata.annotations ?? {};
  assert.equal(a[ANNOTATION_COCOON_SET_GENERATION], String(cs.metadata.generation), what);
  assert.equal(a[ANNOTATION_VM_NAME], vmOf(NS, name, slot), what);
  assert.equal(a[ANNOTATION_OS], "linux", what);
  assert.equal(a[ANNOTATION_MANAGED], "true", what);
  assert.equal(a[ANNOTATION_SNAPSHOT_POLICY], "always", what);
  assert.equal(a[ANNOTATION_BACKEND], "cloud-hypervisor", what);
  assert.equal(pod.spec?.terminationGracePeriodSeconds, 1, what);
  assert.deepEqual(pod.spec?.tolerations, [
    { key: "virtual-kubelet.io/provider", operator: "Exists" },
    { key: "node.kubernetes.io/not-ready", operator: "Exists", effect: "NoExecute" },
    { key: "node.kubernetes.io/unreachable", operator: "Exists", effect: "NoExecute" },
  ], `${what}: tolerations`);
  assert.deepEqual(pod.spec?.nodeSelector, { "cocoonstack.io/pool": "default" }, what);
  assert.equal(pod.spec?.affinity, undefined, `${what}: no affinity`);
  assert.deepEqual(pod.spec?.containers.map((c) => [c.name, c.image]), [[
    "agent",
    "ghcr.io/cocoonstack/placeholder:latest",
  ]], what);
}

/** Everything step 1 learned, for the later steps. */
interface World {
  cs: CocoonSet;
  mainNode: string;
  uids: Map<string, string>;
}

async function createFullSet(stack: Stack): Promise<World> {
  const created = await createSet(stack, NS, "full", {
    agent: {
      replicas: 3,
      storage: "10Gi",
      // Some requests and more limits, and an empty envFrom prefix: the API server defaults
      // the missing memory request from its limit and leaves the empty prefix out, and neither
      // may read as drift (the "at rest" step below would see the pods replaced on every pass).
      resources: { requests: { cpu: "1" }, limits: { cpu: "2", memory: "4Gi" } },
      envFrom: [{ prefix: "", configMapRef: { name: "agent-env", optional: true } }],
    },
    toolboxes: [
      { name: "tools", image: TOOLS_IMAGE },
      { name: "desk", image: TOOLS_IMAGE, connType: "vnc" },
    ],
  });
  const cs = await waitSet(stack, created, "Running with 4 agents, 2 toolboxes", settled(4, 2));
  const st = cs.status!;
  assert.equal(cs.metadata.generation, 1, "adding the finalizer does not touch the spec");
  assert.deepEqual(cs.metadata.finalizers, [FINALIZER]);

  const pods = await livePodsOf(stack, cs);
  assert.deepEqual([...pods.keys()], [
    "full-0",
    "full-1",
    "full-2",
    "full-3",
    "full-desk",
    "full-tools",
  ]);
  const main = pods.get("full-0")!;
  const mainNode = main.spec?.nodeName ?? "";
  assert.ok(mainNode.startsWith("vk-"), "the main is bound to a simulator node");

  // Pods: the contract's shape, sub-agents forked from the main and bound to its node.
  assertPodShape(main, cs, "main", "0");
  assert.equal(main.metadata.annotations?.[ANNOTATION_FORK_FROM], undefined, "main forks nothing");
  assert.equal(main.metadata.annotations?.[ANNOTATION_IMAGE], IMAGE);
  assert.equal(main.metadata.annotations?.[ANNOTATION_MODE], "clone");
  assert.equal(main.metadata.annotations?.[ANNOTATION_STORAGE], "10Gi");
  assert.deepEqual(main.spec?.containers[0].resources?.limits, {
    cpu: "2",
    memory: "4Gi",
    "ephemeral-storage": "10Gi",
  });
  assert.deepEqual(main.spec?.containers[0].resources?.requests, {
    cpu: "1",
    memory: "4Gi",
    "ephemeral-storage": "10Gi",
  }, "the memory request defaulted from its limit by the server");
  assert.deepEqual(main.spec?.containers[0].envFrom, [
    { configMapRef: { name: "agent-env", optional: true } },
  ], "the empty prefix left out by the server");
  for (const slot of [1, 2, 3]) {
    const sub = pods.get(`full-${slot}`)!;
    assertPodShape(sub, cs, "sub-agent", String(slot));
    assert.equal(sub.metadata.annotations?.[ANNOTATION_FORK_FROM], vmOf(NS, "full", 0));
    assert.equal(sub.spec?.nodeName, mainNode, `${sub.metadata.name} is bound to the main's node`);
    assert.equal((await stack.sim.vm(NS, `full-${slot}`))?.node, mainNode);
  }
  for (const tb of ["tools", "desk"]) {
    const pod = pods.get(`full-${tb}`)!;
    assertPodShape(pod, cs, "toolbox", tb);
    assert.equal(pod.metadata.annotations?.[ANNOTATION_IMAGE], TOOLS_IMAGE);
    assert.equal(pod.metadata.annotations?.[ANNOTATION_MODE], "run");
    assert.equal(pod.metadata.annotations?.[ANNOTATION_FORK_FROM], undefined);
  }
  assert.equal(pods.get("full-desk")!.metadata.annotations?.[ANNOTATION_CONN_TYPE], "vnc");

  // Status: counts, one entry per agent and toolbox with the runtime facts, both conditions.
  assert.equal(st.observedGeneration, 1);
  assert.deepEqual(
    st.agents?.map((a) => [a.slot, a.role, a.podName, a.vmName, a.forkedFrom ?? "", a.phase]),
    [
      [0, "main", "full-0", vmOf(NS, "full", 0), "", "Running"],
      [1, "sub-agent", "full-1", vmOf(NS, "full", 1), vmOf(NS, "full", 0), "Running"],
      [2, "sub-agent", "full-2", vmOf(NS, "full", 2), vmOf(NS, "full", 0), "Running"],
      [3, "sub-agent", "full-3", vmOf(NS, "full", 3), vmOf(NS, "full", 0), "Running"],
    ],
  );
  for (const a of st.agents ?? []) {
    const pod = pods.get(a.podName ?? "")!;
    assert.equal(a.vmID, pod.metadata.annotations?.[ANNOTATION_VMID]);
    assert.equal(a.ip, pod.metadata.annotations?.[ANNOTATION_IP]);
    assert.ok(a.vmID, `${a.podName} reports its VM id`);
  }
  assert.deepEqual(st.toolboxes?.map((t) => [t.name, t.podName, t.vmName, t.connType, t.phase]), [
    ["desk", "full-desk", vmOf(NS, "full", "desk"), "vnc", "Running"],
    ["tools", "full-tools", vmOf(NS, "full", "tools"), "ssh", "Running"],
  ]);
  const desk = pods.get("full-desk")!;
  assert.equal(st.toolboxes?.[0].vncPort, Number(desk.metadata.annotations?.[ANNOTATION_VNC_PORT]));
  assert.ok((st.toolboxes?.[0].vncPort ?? 0) > 0, "the VNC toolbox reports its port");
  const ready = conditionOf(cs, "Ready");
  assert.deepEqual([ready?.status, ready?.reason, ready?.message], [
    "True",
    "AllAgentsReady",
    "4/4 agents ready, 2/2 toolboxes ready",
  ]);
  const progressing = conditionOf(cs, "Progressing");
  assert.deepEqual([progressing?.status, progressing?.reason], ["False", "Stable"]);
  assert.deepEqual(
    (await stack.events(cs)).filter((e) => e.type === "Warning").map((e) => e.reason),
    [],
    "a healthy create raises no Warning",
  );
  return {
    cs,
    mainNode,
    uids: new Map([...pods].map(([name, pod]) => [name, pod.metadata.uid ?? ""])),
  };
}

/**
 * One small set per snapshot policy: main, one sub-agent and one toolbox. Each starts under
 * `always`; main-only and never switch to their policy while running, so the pods replaced for
 * the change leave a `:latest` of every VM behind (pushed under `always` when they were deleted):
 * teardown must drop the ones the final policy does not keep.
 */
async function gcRound(stack: Stack, policy: "always" | "main-only" | "never"): Promise<void> {
  const ns = `e2e-gc-${policy}`;
  const vms = { main: vmOf(ns, "gc", 0), sub: vmOf(ns, "gc", 1), tb: vmOf(ns, "gc", "tb") };
  const all = Object.values(vms);
  let cs = await createSet(stack, ns, "gc", {
    snapshotPolicy: "always",
    agent: { replicas: 1 },
    toolboxes: [{ name: "tb", image: TOOLS_IMAGE }],
  });
  cs = await waitSet(stack, cs, "Running", settled(2, 1));
  if (policy !== "always") {
    cs = await patchSpec(stack, cs, { snapshotPolicy: policy });
    cs = await waitSet(stack, cs, `Running under ${policy}`, settled(2, 1));
    for (const pod of (await livePodsOf(stack, cs)).values()) {
      assert.equal(pod.metadata.annotations?.[ANNOTATION_SNAPSHOT_POLICY], policy);
    }
    for (const vm of all) {
      assert.deepEqual(await stack.tagsOf(vm), ["latest"], `${policy}: ${vm} after the switch`);
    }
  }

  // A retain suspend and resume leave each VM's :hibernate behind (retain never deletes it).
  cs = await patchSpec(stack, cs, { suspend: true });
  cs = await waitSet(stack, cs, "Suspended", inPhase("Suspended"));
  cs = await patchSpec(stack, cs, { suspend: false });
  cs = await waitSet(stack, cs, "Running again", settled(2, 1));
  for (const vm of all) {
    assert.ok((await stack.tagsOf(vm)).includes("hibernate"), `${policy}: ${vm} after the resume`);
  }

  const before = (await stack.sim.events()).next - 1;
  await stack.admin.delete(CocoonSets, ns, "gc");
  await waitGone(`${ns}/gc`, () => stack.admin.get(CocoonSets, ns, "gc"));
  assert.deepEqual(await podsOf(stack, cs), [], `${policy}: no pod left`);

  // The simulator snapshots on delete the roles the final policy names; the operator then drops
  // every :hibernate and each :latest the policy does not keep.
  const pushed = (await stack.sim.events(before)).events
    .filter((e) => e.namespace === ns && e.type === "pushed" && e.detail?.endsWith(":latest"));
  const ofPolicy = policy === "always" ? all : policy === "main-only" ? [vms.main] : [];
  assert.deepEqual(
    pushed.map((e) => e.vmName).sort(),
    [...ofPolicy].sort(),
    `${policy}: :latest pushed on delete`,
  );
  for (const vm of all) {
    const want = ofPolicy.includes(vm) ? ["latest"] : [];
    assert.deepEqual(await stack.tagsOf(vm), want, `${policy}: tags of ${vm}`);
    if (want.length > 0) {
      assert.equal(
        await stack.registry.digestOf(`${stack.prefix}/${vm}`, "latest"),
        pushed.find((e) => e.vmName === vm)?.digest,
        `${policy}: ${vm}:latest is the final delete's snapshot`,
      );
    }
  }
}

e2eSuite(
  "CocoonSet lifecycle: create, scale down and up, delete with registry GC per snapshot policy",
  { nodes: [{ name: "vk-a", seats: 16 }, { name: "vk-b", seats: 16 }] },
  async (stack, step) => {
    await stack.namespace(NS);
    const sets = await recordTimeline(stack.admin, CocoonSets, NS);
    const podLog = await recordTimeline(stack.admin, Pods, NS);
    let w: World | undefined;
    try {
      await step(
        "1 main + 3 sub-agents + 2 toolboxes → Running, in the contract's shape",
        async () => {
          w = await createFullSet(stack);
        },
      );

      await step("at rest: passes write nothing (no status rewrite, no pod write)", async () => {
        const { cs } = w!;
        const rv = (await getSet(stack, cs)).metadata.resourceVersion;
        const podWrites = podLog.sightings.length;
        const passes = await stack.metric("controller_runtime_reconcile_total", {
          controller: "cocoonset",
        });
        // A label change on a pod of the set wakes the reconciler (the pod predicate passes it).
        for (let i = 0; i < 2; i++) {
          await stack.admin.patch(Pods, NS, "full-0", "merge", {
            metadata: { labels: { "e2e.cocoonstack.io/nudge": String(i) } },
          });
        }
        await waitMetric(
          stack,
          "controller_runtime_reconcile_total",
          { controller: "cocoonset" },
          (v) => v >= passes + 2,
        );
        assert.equal((await getSet(stack, cs)).metadata.resourceVersion, rv, "status unchanged");
        await waitUntil(() => podLog.sightings.length >= podWrites + 2, {
          what: "the two nudges seen",
          timeoutMs: 10_000,
        });
        assert.deepEqual(
          podLog.sightings.slice(podWrites).map((s) =>
            s.object.metadata.labels?.["e2e.cocoonstack.io/nudge"]
          ),
          ["0", "1"],
          "only the test's own writes",
        );
      });

      await step("scale 3 → 1: slots 2 and 3 deleted, slot 1 and the toolboxes kept", async () => {
        const { cs, uids } = w!;
        await patchSpec(stack, cs, { agent: { replicas: 1 } });
        const after = await waitSet(stack, cs, "Running with 2 agents", settled(2, 2));
        const pods = await livePodsOf(stack, after);
        assert.deepEqual([...pods.keys()], ["full-0", "full-1", "full-desk", "full-tools"]);
        for (const [name, pod] of pods) {
          assert.equal(pod.metadata.uid, uids.get(name), `${name} was not recreated`);
        }
        assert.deepEqual(after.status?.agents?.map((a) => a.slot), [0, 1]);
        // Extra slots go lowest first.
        const deleted = (name: string) =>
          podLog.first((s) =>
            s.object.metadata.name === name && s.object.metadata.uid === uids.get(name) &&
            !!s.object.metadata.deletionTimestamp
          );
        assert.ok(deleted("full-2")!.rv < deleted("full-3")!.rv, "slot 2 before slot 3");
      });

      await step("scale 1 → 5: new slots forked from the main, bound to its node", async () => {
        const { cs, uids, mainNode } = w!;
        await patchSpec(stack, cs, { agent: { replicas: 5 } });
        const after = await waitSet(stack, cs, "Running with 6 agents", settled(6, 2));
        const pods = await livePodsOf(stack, after);
        assert.equal(pods.get("full-0")?.metadata.uid, uids.get("full-0"));
        assert.equal(pods.get("full-1")?.metadata.uid, uids.get("full-1"));
        for (const slot of [2, 3, 4, 5]) {
          const sub = pods.get(`full-${slot}`);
          assert.ok(sub && isPodReady(sub), `full-${slot} runs`);
          assert.notEqual(sub.metadata.uid, uids.get(`full-${slot}`), `full-${slot} is new`);
          assert.equal(sub.metadata.annotations?.[ANNOTATION_FORK_FROM], vmOf(NS, "full", 0));
          assert.equal(sub.metadata.annotations?.[ANNOTATION_COCOON_SET_GENERATION], "3");
          assert.equal(sub.spec?.nodeName, mainNode);
        }
        assert.deepEqual(after.status?.agents?.map((a) => a.forkedFrom ?? ""), [
          "",
          ...Array(5).fill(vmOf(NS, "full", 0)),
        ]);
        for (const pod of pods.values()) {
          assert.equal(pod.metadata.annotations?.[ANNOTATION_COCOON_SET_GENERATION], "3");
        }
      });

      await step("delete: the finalizer holds until every pod is gone, then goes", async () => {
        const { cs } = w!;
        await stack.admin.delete(CocoonSets, NS, "full");
        const deleting = await getSet(stack, cs).catch(() => undefined);
        if (deleting) {
          assert.ok(deleting.metadata.deletionTimestamp);
          assert.deepEqual(deleting.metadata.finalizers, [FINALIZER]);
        }
        await waitGone(`${NS}/full`, () => getSet(stack, cs));
        assert.deepEqual(await podsOf(stack, cs), [], "no pod outlives its set");
        // By the API server's order: every pod was gone before the set (its finalizer held it).
        await waitUntil(() => sets.first((s) => s.type === "DELETED"), {
          what: "the set's deletion seen",
          timeoutMs: 10_000,
        });
        const setGone = sets.first((s) => s.type === "DELETED")!;
        const podsGone = podLog.sightings.filter((s) => s.type === "DELETED");
        assert.equal(new Set(podsGone.map((s) => s.object.metadata.name)).size, 8);
        for (const p of podsGone) {
          assert.ok(p.rv < setGone.rv, `${p.object.metadata.name} was gone before the set`);
        }
        // Policy always: every VM keeps the :latest it pushed on delete, no :hibernate.
        for (const member of [0, 1, 2, 3, 4, 5, "tools", "desk"]) {
          assert.deepEqual(await stack.tagsOf(vmOf(NS, "full", member)), ["latest"]);
        }
      });

      await step("registry GC per snapshot policy: always, main-only, never", async () => {
        await Promise.all([
          gcRound(stack, "always"),
          gcRound(stack, "main-only"),
          gcRound(stack, "never"),
        ]);
      });
    } finally {
      await sets.stop();
      await podLog.stop();
    }
  },
);
