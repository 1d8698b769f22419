/** What counts as drift of a live pod from the spec (drift.ts). */
import assert from "node:assert/strict";
import { Pods } from "../kube/mod.ts";
import type { Pod } from "../kube/mod.ts";
import type { CocoonSet, ToolboxSpec } from "../common/apis/v1/cocoonset_types.ts";
import { TOOLBOX_MODE_RUN, TOOLBOX_MODE_STATIC } from "../common/apis/v1/enums.ts";
import { ANNOTATION_FORK_FROM, LABEL_SNAPSHOT_COMPATIBILITY_CLASS } from "../common/meta/mod.ts";
import {
  actionsOf,
  livePod,
  newCocoonSet,
  newTestEnv,
  podSeed,
  reconcileSet,
  setSeed,
  withReplicas,
} from "./_test_support.ts";
import { buildAgentPod, buildToolboxPod } from "./pods.ts";
import { podSpecMatchesAgent, podSpecMatchesToolbox } from "./drift.ts";

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
    image: TOOLBOX_IMAGE,
    mode: TOOLBOX_MODE_RUN,
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
  const tb: ToolboxSpec = { name: "tb", image: TOOLBOX_IMAGE, mode: TOOLBOX_MODE_RUN };
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
  pod.metadata.annotations![ANNOTATION_FORK_FROM] = "vk-ns-other-0";
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
  pod.spec!.nodeSelector![LABEL_SNAPSHOT_COMPATIBILITY_CLASS] = "n4-emerald-rapids-v1";
  assert.equal(podSpecMatchesAgent(pod, cs, 0), false);
});

Deno.test("a live agent without the class selector is adopted; a terminal one is recreated", () => {
  const cs = newCocoonSet("demo", (c) => {
    c.spec.snapshotCompatibilityClass = "n2-cascade-lake-v1";
  });
  const pod = buildAgentPod(cs, 0);
  delete pod.spec!.nodeSelector![LABEL_SNAPSHOT_COMPATIBILITY_CLASS];
  assert.ok(podSpecMatchesAgent(pod, cs, 0), "live pre-feature pod is adopted");
  pod.status = { phase: "Failed" };
  assert.equal(podSpecMatchesAgent(pod, cs, 0), false, "terminal pre-feature pod is recreated");
});

// ---- toolbox drift ----

Deno.test("setting a toolbox probe port is drift", () => {
  const cs = newCocoonSet("demo");
  const tb: ToolboxSpec = { name: "tb", image: TOOLBOX_IMAGE, mode: TOOLBOX_MODE_RUN };
  const pod = buildToolboxPod(cs, tb);
  assert.equal(podSpecMatchesToolbox(pod, cs, { ...tb, probePort: 9090 }), false);
});

Deno.test("a freshly built toolbox matches its own spec", () => {
  const cs = newCocoonSet("demo");
  const tb: ToolboxSpec = { name: "tb", image: TOOLBOX_IMAGE, mode: TOOLBOX_MODE_RUN };
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
  const tb: ToolboxSpec = { name: "tb", image: TOOLBOX_IMAGE, mode: TOOLBOX_MODE_RUN };
  const pod = buildToolboxPod(newCocoonSet("demo", pool("gpu")), tb);
  assert.equal(podSpecMatchesToolbox(pod, newCocoonSet("demo", pool("cpu")), tb), false);
});

Deno.test("a toolbox without the class selector is adopted", () => {
  const cs = newCocoonSet("demo", (c) => {
    c.spec.snapshotCompatibilityClass = "n2-cascade-lake-v1";
  });
  const tb: ToolboxSpec = { name: "tb", image: "image", mode: TOOLBOX_MODE_RUN };
  const pod = buildToolboxPod(cs, tb);
  delete pod.spec!.nodeSelector![LABEL_SNAPSHOT_COMPATIBILITY_CLASS];
  assert.ok(podSpecMatchesToolbox(pod, cs, tb));
});

// ---- placement ----

Deno.test("pinning a set is not drift for a main built before the pin", () => {
  const pod = buildAgentPod(newCocoonSet("demo"), 0);
  const pinned = newCocoonSet("demo", (c) => {
    c.spec.nodeName = "node-b";
  });
  assert.ok(podSpecMatchesAgent(pod, pinned, 0));
});

// ---- builders own their objects ----
