import assert from "node:assert/strict";
import { type Pod, Pods } from "../kube/mod.ts";
import type { ToolboxSpec } from "../common/apis/v1/cocoonset_types.ts";
import {
  AGENT_MODE_CLONE,
  OS_LINUX,
  TOOLBOX_MODE_RUN,
  TOOLBOX_MODE_STATIC,
} from "../common/apis/v1/enums.ts";
import {
  ANNOTATION_COCOON_SET_GENERATION,
  ANNOTATION_FORK_FROM,
  ANNOTATION_IP,
  ANNOTATION_MANAGED,
  ANNOTATION_MODE,
  ANNOTATION_OS,
  ANNOTATION_STORAGE,
  ANNOTATION_VM_NAME,
  ANNOTATION_VMID,
  ANNOTATION_VNC_PORT,
  KIND_COCOON_SET,
  LABEL_NODE_POOL,
  LABEL_ROLE,
  LABEL_SLOT,
  LABEL_SNAPSHOT_COMPATIBILITY_CLASS,
  ROLE_MAIN,
  ROLE_SUB_AGENT,
  TOLERATION_KEY,
} from "../common/meta/mod.ts";
import {
  actionsOf,
  findSet,
  newCocoonSet,
  newTestEnv,
  reconcileSet,
  seedSet,
  TEST_NAMESPACE,
  TEST_UID,
  withFinalizer,
  withReplicas,
} from "./_test_support.ts";
import {
  buildAgentPod,
  buildToolboxPod,
  classifyPods,
  LABEL_HOSTNAME,
  listOwnedPods,
} from "./pods.ts";
import { CocoonSets } from "../common/apis/v1/resources.ts";

const TOOLBOX_IMAGE = "ghcr.io/cocoonstack/cocoon/toolbox:latest";

function staticToolbox(fields: Partial<ToolboxSpec> = {}): ToolboxSpec {
  return {
    name: "tb",
    mode: TOOLBOX_MODE_STATIC,
    staticVMID: "qemu-1",
    staticIP: "10.0.0.1",
    vncPort: 5901,
    ...fields,
  };
}

// ---- builders ----

Deno.test("slot 0 builds the main agent: name, role and slot labels, VM name, no fork-from", () => {
  const pod = buildAgentPod(newCocoonSet("demo"), 0);
  assert.equal(pod.metadata.name, "demo-0");
  assert.equal(pod.metadata.labels?.[LABEL_ROLE], ROLE_MAIN);
  assert.equal(pod.metadata.labels?.[LABEL_SLOT], "0");
  assert.equal(pod.metadata.annotations?.[ANNOTATION_VM_NAME], "vk-ns-demo-0");
  assert.equal(pod.metadata.annotations?.[ANNOTATION_FORK_FROM], undefined);
});

Deno.test("a sub-agent forks from the main VM and is bound to the main's node", () => {
  const cs = newCocoonSet("demo", withReplicas(2));
  const pod = buildAgentPod(cs, 1, "vk-ns-demo-0", "cocoonset-node-2");
  assert.equal(pod.metadata.name, "demo-1");
  assert.equal(pod.metadata.labels?.[LABEL_ROLE], ROLE_SUB_AGENT);
  assert.equal(pod.metadata.annotations?.[ANNOTATION_FORK_FROM], "vk-ns-demo-0");
  assert.equal(pod.spec?.nodeName, "cocoonset-node-2");
});

Deno.test("an agent pod carries the defaults: mode clone, os linux, managed", () => {
  const pod = buildAgentPod(newCocoonSet("demo"), 0);
  assert.equal(pod.metadata.annotations?.[ANNOTATION_MODE], AGENT_MODE_CLONE);
  assert.equal(pod.metadata.annotations?.[ANNOTATION_OS], OS_LINUX);
  assert.equal(pod.metadata.annotations?.[ANNOTATION_MANAGED], "true");
});

Deno.test("the agent's storage reaches the pod as annotation and ephemeral-storage", () => {
  const cs = newCocoonSet("demo", (c) => {
    c.spec.agent.storage = "100Gi";
  });
  const pod = buildAgentPod(cs, 0);
  assert.equal(pod.metadata.annotations?.[ANNOTATION_STORAGE], "100Gi");
  const resources = pod.spec?.containers[0].resources;
  assert.equal(resources?.requests?.["ephemeral-storage"], "100Gi");
  assert.equal(resources?.limits?.["ephemeral-storage"], "100Gi");
});

Deno.test("a static toolbox is not managed and carries its VM's id, IP and VNC port", () => {
  const pod = buildToolboxPod(newCocoonSet("demo"), staticToolbox());
  assert.equal(pod.metadata.name, "demo-tb");
  assert.notEqual(pod.metadata.annotations?.[ANNOTATION_MANAGED], "true");
  assert.equal(pod.metadata.annotations?.[ANNOTATION_VMID], "qemu-1");
  assert.equal(pod.metadata.annotations?.[ANNOTATION_IP], "10.0.0.1");
  assert.equal(pod.metadata.annotations?.[ANNOTATION_VNC_PORT], "5901");
});

Deno.test("a run-mode toolbox is managed", () => {
  const pod = buildToolboxPod(newCocoonSet("demo"), {
    name: "tb",
    mode: TOOLBOX_MODE_RUN,
    image: TOOLBOX_IMAGE,
  });
  assert.equal(pod.metadata.annotations?.[ANNOTATION_MANAGED], "true");
});

// ---- classification ----

Deno.test("classifyPods groups main, sub-agents by slot and toolboxes by name", () => {
  const cs = newCocoonSet("demo");
  const pods = [
    buildAgentPod(cs, 0),
    buildAgentPod(cs, 1, "vk-ns-demo-0"),
    buildAgentPod(cs, 2, "vk-ns-demo-0"),
    buildToolboxPod(cs, { name: "tb", image: "x" }),
  ];
  const got = classifyPods(pods);
  assert.equal(got.main?.metadata.name, "demo-0");
  assert.deepEqual([...got.sub.keys()].sort(), [1, 2]);
  assert.equal(got.sub.get(1)?.metadata.name, "demo-1");
  assert.deepEqual([...got.toolbox.keys()], ["tb"]);
  assert.equal(got.allByName.size, 4);
});

Deno.test("a pod without a role label stays out of every role but remains in allByName", () => {
  const stranger: Pod = { metadata: { name: "stranger", labels: {} } };
  const got = classifyPods([stranger]);
  assert.equal(got.main, undefined);
  assert.equal(got.sub.size, 0);
  assert.equal(got.toolbox.size, 0);
  assert.equal(got.allByName.get("stranger"), stranger);
});

Deno.test("classifyPods leaves terminating pods out, and sub-agents with a bad slot out of sub", () => {
  const cs = newCocoonSet("demo");
  const terminating = buildAgentPod(cs, 1, "vk-ns-demo-0");
  terminating.metadata.deletionTimestamp = "2026-05-14T00:00:00Z";
  const badSlot = buildAgentPod(cs, 2, "vk-ns-demo-0");
  badSlot.metadata.labels![LABEL_SLOT] = "two";
  const got = classifyPods([terminating, badSlot]);
  assert.equal(got.sub.size, 0);
  assert.deepEqual([...got.allByName.keys()], ["demo-2"]);
});

// ---- the parts every managed pod shares ----

Deno.test("a managed pod is controlled by its CocoonSet", () => {
  const pod = buildAgentPod(newCocoonSet("demo"), 0);
  const refs = pod.metadata.ownerReferences ?? [];
  assert.equal(refs.length, 1);
  assert.equal(refs[0].kind, KIND_COCOON_SET);
  assert.equal(refs[0].name, "demo");
  assert.equal(refs[0].uid, TEST_UID);
  assert.equal(refs[0].controller, true);
});

Deno.test("a managed pod selects the set's pool and snapshot compatibility class", () => {
  const cs = newCocoonSet("demo", (c) => {
    c.spec.nodePool = "purpose-a";
    c.spec.snapshotCompatibilityClass = "n2-cascade-lake-v1";
  });
  const pod = buildAgentPod(cs, 0);
  assert.equal(pod.spec?.nodeSelector?.[LABEL_NODE_POOL], "purpose-a");
  assert.equal(pod.spec?.nodeSelector?.[LABEL_SNAPSHOT_COMPATIBILITY_CLASS], "n2-cascade-lake-v1");
});

Deno.test("a set without a compatibility class gets no class selector (default pool only)", () => {
  const pod = buildAgentPod(newCocoonSet("demo"), 0);
  assert.deepEqual(pod.spec?.nodeSelector, { [LABEL_NODE_POOL]: "default" });
});

Deno.test("a managed pod tolerates the virtual-kubelet provider taint", () => {
  const pod = buildAgentPod(newCocoonSet("demo"), 0);
  assert.ok(pod.spec?.tolerations?.some((t) => t.key === TOLERATION_KEY));
});

Deno.test("a managed pod tolerates not-ready and unreachable nodes forever", () => {
  const pod = buildAgentPod(newCocoonSet("demo"), 0);
  for (const key of ["node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable"]) {
    const tol = pod.spec?.tolerations?.find((t) => t.key === key);
    assert.ok(tol, `toleration ${key}`);
    assert.equal(tol.operator, "Exists");
    assert.equal(tol.effect, "NoExecute");
    assert.equal(tol.tolerationSeconds, undefined, "eviction must never fire");
  }
});

Deno.test("a managed pod is stamped with the CocoonSet generation", () => {
  const cs = newCocoonSet("demo", (c) => {
    c.metadata.generation = 42;
  });
  const pod = buildAgentPod(cs, 0);
  assert.equal(pod.metadata.annotations?.[ANNOTATION_COCOON_SET_GENERATION], "42");
});

Deno.test("the VM spec annotations do not replace the agent pod's generation stamp", () => {
  const cs = newCocoonSet("demo", (c) => {
    c.metadata.generation = 11;
  });
  const pod = buildAgentPod(cs, 0);
  assert.equal(pod.metadata.annotations?.[ANNOTATION_COCOON_SET_GENERATION], "11");
  assert.equal(pod.metadata.annotations?.[ANNOTATION_VM_NAME], "vk-ns-demo-0");
});

Deno.test("the VM spec annotations do not replace the toolbox pod's generation stamp", () => {
  const cs = newCocoonSet("demo", (c) => {
    c.metadata.generation = 13;
  });
  const pod = buildToolboxPod(cs, { name: "tb", image: TOOLBOX_IMAGE });
  assert.equal(pod.metadata.annotations?.[ANNOTATION_COCOON_SET_GENERATION], "13");
  assert.equal(pod.metadata.annotations?.[ANNOTATION_VM_NAME], "vk-ns-demo-tb");
});

// ---- placement ----

Deno.test("a main of a pinned set gets a required hostname affinity, not a node binding", () => {
  const cs = newCocoonSet("demo", (c) => {
    c.spec.nodeName = "node-b";
  });
  const pod = buildAgentPod(cs, 0);
  assert.equal(pod.spec?.nodeName, undefined);
  const terms = pod.spec?.affinity?.nodeAffinity?.requiredDuringSchedulingIgnoredDuringExecution
    ?.nodeSelectorTerms;
  assert.deepEqual(terms, [{
    matchExpressions: [{ key: LABEL_HOSTNAME, operator: "In", values: ["node-b"] }],
  }]);
});

Deno.test("a main of an unpinned set gets no affinity", () => {
  const pod = buildAgentPod(newCocoonSet("demo"), 0);
  assert.equal(pod.spec?.affinity, undefined);
});

Deno.test("a sub-agent of a pinned set is bound to the main's node without an affinity", () => {
  const cs = newCocoonSet("demo", withReplicas(2), (c) => {
    c.spec.nodeName = "node-b";
  });
  const pod = buildAgentPod(cs, 1, "vk-ns-demo-0", "node-a");
  assert.equal(pod.spec?.nodeName, "node-a");
  assert.equal(pod.spec?.affinity, undefined);
});

Deno.test("builders never mutate the CocoonSet and never share objects between pods", () => {
  const cs = newCocoonSet("demo", withReplicas(3), (c) => {
    c.metadata.generation = 4;
    c.spec.nodePool = "gpu";
    c.spec.snapshotCompatibilityClass = "n2-cascade-lake-v1";
    c.spec.agent.storage = "20Gi";
    c.spec.agent.resources = {
      limits: { cpu: "2", memory: "4Gi" },
      requests: { cpu: "1", memory: "2Gi" },
      claims: [{ name: "gpu" }],
    };
    c.spec.agent.envFrom = [{ configMapRef: { name: "cm" } }];
    c.spec.toolboxes = [{
      name: "tb",
      image: TOOLBOX_IMAGE,
      storage: "5Gi",
      resources: { limits: { cpu: "1" } },
    }];
  });
  const before = structuredClone(cs);
  const pods = [
    buildAgentPod(cs, 0),
    buildAgentPod(cs, 1, "vk-ns-demo-0", "node-a"),
    buildAgentPod(cs, 2, "vk-ns-demo-0", "node-a"),
    buildAgentPod(cs, 3, "vk-ns-demo-0", "node-a"),
    buildToolboxPod(cs, cs.spec.toolboxes![0]),
    buildToolboxPod(cs, cs.spec.toolboxes![0]),
  ];
  assert.deepEqual(cs, before, "building pods must leave the CocoonSet as it was");
  // The storage landed in the pods, not in the spec the pods were built from.
  assert.equal(cs.spec.agent.resources?.limits?.["ephemeral-storage"], undefined);

  const [first, second] = pods;
  const firstBefore = structuredClone(first);
  const c2 = second.spec!.containers[0];
  c2.resources!.limits!.cpu = "64";
  c2.resources!.requests!.memory = "1Ti";
  (c2.resources as { claims?: { name: string }[] }).claims![0].name = "changed";
  c2.envFrom![0].configMapRef!.name = "changed";
  second.spec!.tolerations![0].key = "changed";
  second.spec!.nodeSelector![LABEL_NODE_POOL] = "changed";
  second.metadata.ownerReferences![0].name = "changed";
  second.metadata.labels![LABEL_ROLE] = "changed";
  second.metadata.annotations![ANNOTATION_MODE] = "changed";
  assert.deepEqual(first, firstBefore, "one pod's objects must not be another pod's");
  assert.deepEqual(cs, before, "mutating a pod must not reach the CocoonSet");

  const [tb1, tb2] = pods.slice(4);
  tb2.spec!.containers[0].resources!.limits!["ephemeral-storage"] = "1Ti";
  assert.equal(tb1.spec!.containers[0].resources!.limits!["ephemeral-storage"], "5Gi");
  assert.deepEqual(cs, before);
});

Deno.test("without storage the pods still get their own resource maps", () => {
  const cs = newCocoonSet("demo", withReplicas(2), (c) => {
    c.spec.agent.resources = { limits: { cpu: "2" }, requests: { cpu: "1" } };
    c.spec.toolboxes = [{ name: "tb", image: TOOLBOX_IMAGE, resources: { limits: { cpu: "1" } } }];
  });
  const before = structuredClone(cs);
  const [a, b] = [buildAgentPod(cs, 1, "vk-ns-demo-0"), buildAgentPod(cs, 2, "vk-ns-demo-0")];
  const [t1, t2] = [
    buildToolboxPod(cs, cs.spec.toolboxes![0]),
    buildToolboxPod(cs, cs.spec.toolboxes![0]),
  ];
  for (const pod of [b, t2]) {
    const r = pod.spec!.containers[0].resources!;
    r.limits!.cpu = "64";
    r.limits!["ephemeral-storage"] = "1Ti";
    if (r.requests) r.requests.cpu = "32";
  }
  assert.deepEqual(a.spec!.containers[0].resources, {
    limits: { cpu: "2" },
    requests: { cpu: "1" },
  });
  assert.deepEqual(t1.spec!.containers[0].resources, { limits: { cpu: "1" } });
  assert.deepEqual(cs, before);
});

/** 64 characters: a valid object name, one more than a label value may hold. */
const longName = `long-${"x".repeat(59)}`;

Deno.test("a set named longer than a label value owns no pod, and no list is sent", async () => {
  const env = newTestEnv();
  const cs = seedSet(env, newCocoonSet(longName, withFinalizer));
  assert.deepEqual(await listOwnedPods(env.fake, cs), []);
  assert.equal(actionsOf(env, "list", Pods).length, 0, "the selector would be refused");
});

Deno.test("a deleted set named longer than a label value is torn down", async () => {
  // The name is valid for the set but no pod can carry it as a label: a selector on it is
  // refused, and teardown must not wait on a list that cannot be made.
  const env = newTestEnv();
  const cs = newCocoonSet(longName, withFinalizer);
  cs.metadata.annotations = { "cocoonset.cocoonstack.io/delete-vm-names": `vk-ns-${longName}-0` };
  seedSet(env, cs);
  await env.fake.delete(CocoonSets, TEST_NAMESPACE, longName);

  assert.deepEqual(await reconcileSet(env, longName), {});
  assert.equal(await findSet(env.fake, longName), undefined, "the finalizer was released");
  assert.deepEqual(
    env.registry.callsOf("deleteManifest").map((c) => `${c.name}:${c.reference}`),
    [`vk-ns-${longName}-0:hibernate`],
    "its :hibernate was dropped (policy always keeps :latest)",
  );
});
