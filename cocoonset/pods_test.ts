import assert from "node:assert/strict";
import { type Pod, Pods } from "../kube/core.ts";
import type { CocoonSet, ToolboxSpec } from "../common/apis/v1/cocoonset_types.ts";
import {
  AgentModeClone,
  OSLinux,
  ToolboxModeRun,
  ToolboxModeStatic,
} from "../common/apis/v1/enums.ts";
import {
  AnnotationCocoonSetGeneration,
  AnnotationForkFrom,
  AnnotationIP,
  AnnotationManaged,
  AnnotationMode,
  AnnotationOS,
  AnnotationStorage,
  AnnotationVMID,
  AnnotationVMName,
  AnnotationVNCPort,
  KindCocoonSet,
  LabelNodePool,
  LabelRole,
  LabelSlot,
  LabelSnapshotCompatibilityClass,
  RoleMain,
  RoleSubAgent,
  TolerationKey,
} from "../common/meta/mod.ts";
import {
  actionsOf,
  livePod,
  newCocoonSet,
  newTestEnv,
  podSeed,
  reconcileSet,
  setSeed,
  testUID,
  withReplicas,
} from "./_test_support.ts";
import {
  buildAgentPod,
  buildToolboxPod,
  classifyPods,
  LabelHostname,
  podSpecMatchesAgent,
  podSpecMatchesToolbox,
} from "./pods.ts";

const toolboxImage = "ghcr.io/cocoonstack/cocoon/toolbox:latest";

function staticToolbox(fields: Partial<ToolboxSpec> = {}): ToolboxSpec {
  return {
    name: "tb",
    mode: ToolboxModeStatic,
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
  assert.equal(pod.metadata.labels?.[LabelRole], RoleMain);
  assert.equal(pod.metadata.labels?.[LabelSlot], "0");
  assert.equal(pod.metadata.annotations?.[AnnotationVMName], "vk-ns-demo-0");
  assert.equal(pod.metadata.annotations?.[AnnotationForkFrom], undefined);
});

Deno.test("a sub-agent forks from the main VM and is bound to the main's node", () => {
  const cs = newCocoonSet("demo", withReplicas(2));
  const pod = buildAgentPod(cs, 1, "vk-ns-demo-0", "cocoonset-node-2");
  assert.equal(pod.metadata.name, "demo-1");
  assert.equal(pod.metadata.labels?.[LabelRole], RoleSubAgent);
  assert.equal(pod.metadata.annotations?.[AnnotationForkFrom], "vk-ns-demo-0");
  assert.equal(pod.spec?.nodeName, "cocoonset-node-2");
});

Deno.test("an agent pod carries the defaults: mode clone, os linux, managed", () => {
  const pod = buildAgentPod(newCocoonSet("demo"), 0);
  assert.equal(pod.metadata.annotations?.[AnnotationMode], AgentModeClone);
  assert.equal(pod.metadata.annotations?.[AnnotationOS], OSLinux);
  assert.equal(pod.metadata.annotations?.[AnnotationManaged], "true");
});

Deno.test("the agent's storage reaches the pod as annotation and ephemeral-storage", () => {
  const cs = newCocoonSet("demo", (c) => {
    c.spec.agent.storage = "100Gi";
  });
  const pod = buildAgentPod(cs, 0);
  assert.equal(pod.metadata.annotations?.[AnnotationStorage], "100Gi");
  const resources = pod.spec?.containers[0].resources;
  assert.equal(resources?.requests?.["ephemeral-storage"], "100Gi");
  assert.equal(resources?.limits?.["ephemeral-storage"], "100Gi");
});

Deno.test("a static toolbox is not managed and carries its VM's id, IP and VNC port", () => {
  const pod = buildToolboxPod(newCocoonSet("demo"), staticToolbox());
  assert.equal(pod.metadata.name, "demo-tb");
  assert.notEqual(pod.metadata.annotations?.[AnnotationManaged], "true");
  assert.equal(pod.metadata.annotations?.[AnnotationVMID], "qemu-1");
  assert.equal(pod.metadata.annotations?.[AnnotationIP], "10.0.0.1");
  assert.equal(pod.metadata.annotations?.[AnnotationVNCPort], "5901");
});

Deno.test("a run-mode toolbox is managed", () => {
  const pod = buildToolboxPod(newCocoonSet("demo"), {
    name: "tb",
    mode: ToolboxModeRun,
    image: toolboxImage,
  });
  assert.equal(pod.metadata.annotations?.[AnnotationManaged], "true");
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
  badSlot.metadata.labels![LabelSlot] = "two";
  const got = classifyPods([terminating, badSlot]);
  assert.equal(got.sub.size, 0);
  assert.deepEqual([...got.allByName.keys()], ["demo-2"]);
});

// ---- the parts every managed pod shares ----

Deno.test("a managed pod is controlled by its CocoonSet", () => {
  const pod = buildAgentPod(newCocoonSet("demo"), 0);
  const refs = pod.metadata.ownerReferences ?? [];
  assert.equal(refs.length, 1);
  assert.equal(refs[0].kind, KindCocoonSet);
  assert.equal(refs[0].name, "demo");
  assert.equal(refs[0].uid, testUID);
  assert.equal(refs[0].controller, true);
});

Deno.test("a managed pod selects the set's pool and snapshot compatibility class", () => {
  const cs = newCocoonSet("demo", (c) => {
    c.spec.nodePool = "purpose-a";
    c.spec.snapshotCompatibilityClass = "n2-cascade-lake-v1";
  });
  const pod = buildAgentPod(cs, 0);
  assert.equal(pod.spec?.nodeSelector?.[LabelNodePool], "purpose-a");
  assert.equal(pod.spec?.nodeSelector?.[LabelSnapshotCompatibilityClass], "n2-cascade-lake-v1");
});

Deno.test("a set without a compatibility class gets no class selector (default pool only)", () => {
  const pod = buildAgentPod(newCocoonSet("demo"), 0);
  assert.deepEqual(pod.spec?.nodeSelector, { [LabelNodePool]: "default" });
});

Deno.test("a managed pod tolerates the virtual-kubelet provider taint", () => {
  const pod = buildAgentPod(newCocoonSet("demo"), 0);
  assert.ok(pod.spec?.tolerations?.some((t) => t.key === TolerationKey));
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
  assert.equal(pod.metadata.annotations?.[AnnotationCocoonSetGeneration], "42");
});

Deno.test("the VM spec annotations do not replace the agent pod's generation stamp", () => {
  const cs = newCocoonSet("demo", (c) => {
    c.metadata.generation = 11;
  });
  const pod = buildAgentPod(cs, 0);
  assert.equal(pod.metadata.annotations?.[AnnotationCocoonSetGeneration], "11");
  assert.equal(pod.metadata.annotations?.[AnnotationVMName], "vk-ns-demo-0");
});

Deno.test("the VM spec annotations do not replace the toolbox pod's generation stamp", () => {
  const cs = newCocoonSet("demo", (c) => {
    c.metadata.generation = 13;
  });
  const pod = buildToolboxPod(cs, { name: "tb", image: toolboxImage });
  assert.equal(pod.metadata.annotations?.[AnnotationCocoonSetGeneration], "13");
  assert.equal(pod.metadata.annotations?.[AnnotationVMName], "vk-ns-demo-tb");
});

// ---- agent drift ----

Deno.test("a freshly built main matches its own spec", () => {
  const cs = newCocoonSet("demo");
  assert.ok(podSpecMatchesAgent(buildAgentPod(cs, 0), cs, 0));
});

Deno.test("an agent image change is drift", () => {
  const pod = buildAgentPod(newCocoonSet("demo"), 0);
  const updated = newCocoonSet("demo", (c) => {
    c.spec.agent.image = "ghcr.io/cocoonstack/cocoon/ubuntu:26.04";
  });
  assert.equal(podSpecMatchesAgent(pod, updated, 0), false);
});

Deno.test("an agent backend change is drift", () => {
  const pod = buildAgentPod(newCocoonSet("demo"), 0);
  const updated = newCocoonSet("demo", (c) => {
    c.spec.agent.backend = "firecracker";
  });
  assert.equal(podSpecMatchesAgent(pod, updated, 0), false);
});

Deno.test("an agent resource change is drift", () => {
  const requests = (cpu: string, memory: string) => (c: CocoonSet) => {
    c.spec.agent.resources = { requests: { cpu, memory } };
  };
  const pod = buildAgentPod(newCocoonSet("demo", requests("1", "1Gi")), 0);
  assert.equal(podSpecMatchesAgent(pod, newCocoonSet("demo", requests("2", "2Gi")), 0), false);
});

Deno.test("resources compare by value, and missing requests default to the limits", () => {
  const cs = newCocoonSet("demo", (c) => {
    c.spec.agent.resources = { limits: { cpu: "1", memory: "1Gi" } };
    c.spec.agent.storage = "10Gi";
  });
  const pod = buildAgentPod(cs, 0);
  // The server's Guaranteed-QoS defaulting copies the limits into the requests.
  pod.spec!.containers[0].resources!.requests = {
    ...pod.spec!.containers[0].resources!.requests,
    cpu: "1000m",
    memory: "1024Mi",
  };
  assert.ok(podSpecMatchesAgent(pod, cs, 0));
  pod.spec!.containers[0].resources!.requests!.cpu = "500m";
  assert.equal(podSpecMatchesAgent(pod, cs, 0), false);
});

/**
 * The pod as the API server stores it: for every resource with a limit and no request, the
 * request defaults to that limit (per resource, not only when requests are empty).
 */
function serverDefaulted(pod: Pod): Pod {
  const r = pod.spec!.containers[0].resources!;
  if (r.limits) r.requests = { ...r.limits, ...r.requests };
  return pod;
}

Deno.test("a request the spec leaves out defaults to its limit, also when other requests are set", () => {
  const cs = newCocoonSet("demo", (c) => {
    c.spec.agent.resources = { requests: { cpu: "1" }, limits: { cpu: "2", memory: "4Gi" } };
  });
  const pod = serverDefaulted(buildAgentPod(cs, 0));
  assert.equal(pod.spec!.containers[0].resources!.requests!.memory, "4Gi");
  assert.ok(podSpecMatchesAgent(pod, cs, 0));
  const tb: ToolboxSpec = {
    name: "tb",
    image: toolboxImage,
    mode: ToolboxModeRun,
    resources: { requests: { memory: "1Gi" }, limits: { cpu: "1", memory: "2Gi" } },
  };
  assert.ok(podSpecMatchesToolbox(serverDefaulted(buildToolboxPod(cs, tb)), cs, tb));
  // A request the spec does name is still compared with it.
  pod.spec!.containers[0].resources!.requests!.cpu = "2";
  assert.equal(podSpecMatchesAgent(pod, cs, 0), false);
});

/** The pod after a namespace LimitRange filled in the values its container leaves out. */
function limitRanged(pod: Pod, limits: Record<string, string>, requests: Record<string, string>) {
  const r = pod.spec!.containers[0].resources ??= {};
  r.limits = { ...limits, ...r.limits };
  r.requests = { ...requests, ...r.requests };
  return pod;
}

Deno.test("values a namespace LimitRange fills in where the spec names none are not drift", () => {
  const defaults = [{ cpu: "1", memory: "512Mi" }, { cpu: "500m", memory: "256Mi" }] as const;
  // No resources at all: every value comes from the LimitRange.
  const bare = newCocoonSet("demo");
  assert.ok(podSpecMatchesAgent(limitRanged(buildAgentPod(bare, 0), ...defaults), bare, 0));
  // Only a memory limit: cpu comes from the LimitRange, the memory request from the limit.
  const memOnly = newCocoonSet("demo", (c) => {
    c.spec.agent.resources = { limits: { memory: "4Gi" } };
  });
  const pod = limitRanged(serverDefaulted(buildAgentPod(memOnly, 0)), ...defaults);
  assert.equal(pod.spec!.containers[0].resources!.limits!.cpu, "1");
  assert.equal(pod.spec!.containers[0].resources!.requests!.memory, "4Gi");
  assert.ok(podSpecMatchesAgent(pod, memOnly, 0));
  const tb: ToolboxSpec = { name: "tb", image: toolboxImage, mode: ToolboxModeRun };
  assert.ok(
    podSpecMatchesToolbox(limitRanged(buildToolboxPod(bare, tb), ...defaults), bare, tb),
  );
  // What the spec does name is still compared: a new memory limit is drift.
  const bigger = newCocoonSet("demo", (c) => {
    c.spec.agent.resources = { limits: { memory: "8Gi" } };
  });
  assert.equal(podSpecMatchesAgent(pod, bigger, 0), false);
  // So is a limit added where the LimitRange had filled one in.
  const cpuLimit = newCocoonSet("demo", (c) => {
    c.spec.agent.resources = { limits: { cpu: "2", memory: "4Gi" } };
  });
  assert.equal(podSpecMatchesAgent(pod, cpuLimit, 0), false);
});

Deno.test("a running main whose spec sets some requests and more limits is not deleted as drifted", async () => {
  const cs = newCocoonSet("demo", (c) => {
    c.metadata.generation = 1;
    c.spec.agent.resources = { requests: { cpu: "1" }, limits: { cpu: "2", memory: "4Gi" } };
  });
  const env = newTestEnv([setSeed(cs), podSeed(serverDefaulted(livePod(buildAgentPod(cs, 0))))]);

  assert.deepEqual(await reconcileSet(env, "demo"), {});
  assert.deepEqual(actionsOf(env, "delete", Pods), []);
});

Deno.test("setting an agent probe port is drift", () => {
  const pod = buildAgentPod(newCocoonSet("demo"), 0);
  const updated = newCocoonSet("demo", (c) => {
    c.spec.agent.probePort = 8080;
  });
  assert.equal(podSpecMatchesAgent(pod, updated, 0), false);
});

Deno.test("an unchanged sub-agent keeps matching with its fork-from", () => {
  const cs = newCocoonSet("demo", withReplicas(1));
  assert.ok(podSpecMatchesAgent(buildAgentPod(cs, 1, "vk-ns-demo-0"), cs, 1));
});

Deno.test("a fork-from written by hand on the main is drift", () => {
  const cs = newCocoonSet("demo");
  const pod = buildAgentPod(cs, 0);
  pod.metadata.annotations![AnnotationForkFrom] = "vk-ns-other-0";
  assert.equal(podSpecMatchesAgent(pod, cs, 0), false);
});

Deno.test("a service account change is drift", () => {
  const sa = (name: string) => (c: CocoonSet) => {
    c.spec.agent.serviceAccountName = name;
  };
  const pod = buildAgentPod(newCocoonSet("demo", sa("sa-old")), 0);
  assert.equal(podSpecMatchesAgent(pod, newCocoonSet("demo", sa("sa-new")), 0), false);
});

Deno.test("the server's default service account matches an agent that names none", () => {
  const cs = newCocoonSet("demo");
  const pod = buildAgentPod(cs, 0);
  pod.spec!.serviceAccountName = "default";
  assert.ok(podSpecMatchesAgent(pod, cs, 0));
});

Deno.test("an envFrom change is drift", () => {
  const envFrom = (cm: string) => (c: CocoonSet) => {
    c.spec.agent.envFrom = [{ configMapRef: { name: cm } }];
  };
  const pod = buildAgentPod(newCocoonSet("demo", envFrom("cm-a")), 0);
  assert.equal(podSpecMatchesAgent(pod, newCocoonSet("demo", envFrom("cm-b")), 0), false);
});

/** The stored pod's envFrom: the server's encoder leaves out empty prefixes and names. */
function storedEnvFrom(pod: Pod): Pod {
  pod.spec!.containers[0].envFrom = [{ configMapRef: { name: "cm" } }];
  return pod;
}

Deno.test("an empty envFrom prefix in the spec matches the stored pod, which leaves it out", () => {
  const cs = newCocoonSet("demo", (c) => {
    c.spec.agent.envFrom = [{ prefix: "", configMapRef: { name: "cm" } }];
  });
  assert.ok(podSpecMatchesAgent(storedEnvFrom(buildAgentPod(cs, 0)), cs, 0));
  const prefixed = newCocoonSet("demo", (c) => {
    c.spec.agent.envFrom = [{ prefix: "APP_", configMapRef: { name: "cm" } }];
  });
  assert.equal(podSpecMatchesAgent(storedEnvFrom(buildAgentPod(cs, 0)), prefixed, 0), false);
});

Deno.test("a running main whose spec has an empty envFrom prefix is not deleted as drifted", async () => {
  const cs = newCocoonSet("demo", (c) => {
    c.metadata.generation = 1;
    c.spec.agent.envFrom = [{ prefix: "", configMapRef: { name: "cm" } }];
  });
  const env = newTestEnv([setSeed(cs), podSeed(storedEnvFrom(livePod(buildAgentPod(cs, 0))))]);

  assert.deepEqual(await reconcileSet(env, "demo"), {});
  assert.deepEqual(actionsOf(env, "delete", Pods), []);
});

Deno.test("a node pool change is drift for an agent", () => {
  const pool = (p: string) => (c: CocoonSet) => {
    c.spec.nodePool = p;
  };
  const pod = buildAgentPod(newCocoonSet("demo", pool("gpu")), 0);
  assert.equal(podSpecMatchesAgent(pod, newCocoonSet("demo", pool("cpu")), 0), false);
});

Deno.test("a pod in the default pool matches a set that names no pool", () => {
  const cs = newCocoonSet("demo");
  assert.ok(podSpecMatchesAgent(buildAgentPod(cs, 0), cs, 0));
  const explicit = newCocoonSet("demo", (c) => {
    c.spec.nodePool = "default";
  });
  assert.ok(podSpecMatchesAgent(buildAgentPod(cs, 0), explicit, 0));
});

Deno.test("a wrong snapshot compatibility selector is drift for an agent", () => {
  const cs = newCocoonSet("demo", (c) => {
    c.spec.snapshotCompatibilityClass = "n2-cascade-lake-v1";
  });
  const pod = buildAgentPod(cs, 0);
  pod.spec!.nodeSelector![LabelSnapshotCompatibilityClass] = "n4-emerald-rapids-v1";
  assert.equal(podSpecMatchesAgent(pod, cs, 0), false);
});

Deno.test("a live agent without the class selector is adopted; a terminal one is recreated", () => {
  const cs = newCocoonSet("demo", (c) => {
    c.spec.snapshotCompatibilityClass = "n2-cascade-lake-v1";
  });
  const pod = buildAgentPod(cs, 0);
  delete pod.spec!.nodeSelector![LabelSnapshotCompatibilityClass];
  assert.ok(podSpecMatchesAgent(pod, cs, 0), "live pre-feature pod is adopted");
  pod.status = { phase: "Failed" };
  assert.equal(podSpecMatchesAgent(pod, cs, 0), false, "terminal pre-feature pod is recreated");
});

// ---- toolbox drift ----

Deno.test("setting a toolbox probe port is drift", () => {
  const cs = newCocoonSet("demo");
  const tb: ToolboxSpec = { name: "tb", image: toolboxImage, mode: ToolboxModeRun };
  const pod = buildToolboxPod(cs, tb);
  assert.equal(podSpecMatchesToolbox(pod, cs, { ...tb, probePort: 9090 }), false);
});

Deno.test("a freshly built toolbox matches its own spec", () => {
  const cs = newCocoonSet("demo");
  const tb: ToolboxSpec = { name: "tb", image: toolboxImage, mode: ToolboxModeRun };
  assert.ok(podSpecMatchesToolbox(buildToolboxPod(cs, tb), cs, tb));
});

Deno.test("a toolbox image change is drift", () => {
  const cs = newCocoonSet("demo");
  const pod = buildToolboxPod(cs, { name: "tb", image: "ghcr.io/cocoonstack/cocoon/toolbox:v1" });
  const updated: ToolboxSpec = { name: "tb", image: "ghcr.io/cocoonstack/cocoon/toolbox:v2" };
  assert.equal(podSpecMatchesToolbox(pod, cs, updated), false);
});

Deno.test("a static toolbox VM id change is drift", () => {
  const cs = newCocoonSet("demo");
  const pod = buildToolboxPod(cs, staticToolbox());
  assert.equal(podSpecMatchesToolbox(pod, cs, staticToolbox({ staticVMID: "qemu-2" })), false);
});

Deno.test("a static toolbox IP change is drift", () => {
  const cs = newCocoonSet("demo");
  const pod = buildToolboxPod(cs, staticToolbox());
  assert.equal(podSpecMatchesToolbox(pod, cs, staticToolbox({ staticIP: "10.0.0.2" })), false);
});

Deno.test("a static toolbox VNC port change is drift", () => {
  const cs = newCocoonSet("demo");
  const pod = buildToolboxPod(cs, staticToolbox());
  assert.equal(podSpecMatchesToolbox(pod, cs, staticToolbox({ vncPort: 5902 })), false);
});

Deno.test("a freshly built static toolbox matches its own spec", () => {
  const cs = newCocoonSet("demo");
  assert.ok(podSpecMatchesToolbox(buildToolboxPod(cs, staticToolbox()), cs, staticToolbox()));
});

Deno.test("a node pool change is drift for a toolbox", () => {
  const pool = (p: string) => (c: CocoonSet) => {
    c.spec.nodePool = p;
  };
  const tb: ToolboxSpec = { name: "tb", image: toolboxImage, mode: ToolboxModeRun };
  const pod = buildToolboxPod(newCocoonSet("demo", pool("gpu")), tb);
  assert.equal(podSpecMatchesToolbox(pod, newCocoonSet("demo", pool("cpu")), tb), false);
});

Deno.test("a toolbox without the class selector is adopted", () => {
  const cs = newCocoonSet("demo", (c) => {
    c.spec.snapshotCompatibilityClass = "n2-cascade-lake-v1";
  });
  const tb: ToolboxSpec = { name: "tb", image: "image", mode: ToolboxModeRun };
  const pod = buildToolboxPod(cs, tb);
  delete pod.spec!.nodeSelector![LabelSnapshotCompatibilityClass];
  assert.ok(podSpecMatchesToolbox(pod, cs, tb));
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
    matchExpressions: [{ key: LabelHostname, operator: "In", values: ["node-b"] }],
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

Deno.test("pinning a set is not drift for a main built before the pin", () => {
  const pod = buildAgentPod(newCocoonSet("demo"), 0);
  const pinned = newCocoonSet("demo", (c) => {
    c.spec.nodeName = "node-b";
  });
  assert.ok(podSpecMatchesAgent(pod, pinned, 0));
});

// ---- builders own their objects ----

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
      image: toolboxImage,
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
  second.spec!.nodeSelector![LabelNodePool] = "changed";
  second.metadata.ownerReferences![0].name = "changed";
  second.metadata.labels![LabelRole] = "changed";
  second.metadata.annotations![AnnotationMode] = "changed";
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
    c.spec.toolboxes = [{ name: "tb", image: toolboxImage, resources: { limits: { cpu: "1" } } }];
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
