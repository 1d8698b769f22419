import assert from "node:assert/strict";
import type { Pod } from "../../kube/core.ts";
import type { AgentSpec, ToolboxSpec } from "../apis/v1/cocoonset_types.ts";
import {
  AGENT_MODE_CLONE,
  AGENT_MODE_RUN,
  BACKEND_CLOUD_HYPERVISOR,
  BACKEND_FIRECRACKER,
  CONN_TYPE_RDP,
  CONN_TYPE_SSH,
  OS_LINUX,
  OS_WINDOWS,
  SNAPSHOT_POLICY_ALWAYS,
  SNAPSHOT_POLICY_MAIN_ONLY,
  SNAPSHOT_POLICY_NEVER,
  TOOLBOX_MODE_CLONE,
  TOOLBOX_MODE_RUN,
  TOOLBOX_MODE_STATIC,
} from "../apis/v1/enums.ts";
import {
  ANNOTATION_BACKEND,
  ANNOTATION_CONN_TYPE,
  ANNOTATION_FORCE_PULL,
  ANNOTATION_FORK_FROM,
  ANNOTATION_IMAGE,
  ANNOTATION_MANAGED,
  ANNOTATION_MODE,
  ANNOTATION_NETWORK,
  ANNOTATION_NO_DIRECT_IO,
  ANNOTATION_OS,
  ANNOTATION_PROBE_PORT,
  ANNOTATION_SNAPSHOT_POLICY,
  ANNOTATION_STORAGE,
  ANNOTATION_VM_NAME,
  ROLE_MAIN,
  ROLE_SUB_AGENT,
  ROLE_TOOLBOX,
} from "./keys.ts";
import {
  applyVMSpec,
  fromAgentSpec,
  fromToolboxSpec,
  parseVMSpec,
  shouldSnapshotVM,
  vmSpec,
  vmSpecEqual,
} from "./vmspec.ts";

Deno.test("applyVMSpec writes the annotation keys and parseVMSpec reads them back", () => {
  const pod: Pod = { metadata: {} };
  const spec = vmSpec({
    vmName: "vk-prod-demo-0",
    image: "ghcr.io/cocoonstack/cocoon/ubuntu:24.04",
    mode: "clone",
    os: "linux",
    storage: "100G",
    network: "default",
    snapshotPolicy: "always",
    forkFrom: "vk-prod-demo-main-0",
    managed: true,
    forcePull: true,
    noDirectIO: true,
    connType: "rdp",
    backend: "firecracker",
    probePort: "8080",
  });
  applyVMSpec(spec, pod);
  // Pin the keys themselves: a round trip alone would pass with a wrong key on both sides.
  assert.deepEqual(pod.metadata.annotations, {
    [ANNOTATION_VM_NAME]: spec.vmName,
    [ANNOTATION_IMAGE]: spec.image,
    [ANNOTATION_MODE]: spec.mode,
    [ANNOTATION_OS]: spec.os,
    [ANNOTATION_STORAGE]: spec.storage,
    [ANNOTATION_NETWORK]: spec.network,
    [ANNOTATION_SNAPSHOT_POLICY]: spec.snapshotPolicy,
    [ANNOTATION_FORK_FROM]: spec.forkFrom,
    [ANNOTATION_MANAGED]: "true",
    [ANNOTATION_FORCE_PULL]: "true",
    [ANNOTATION_NO_DIRECT_IO]: "true",
    [ANNOTATION_CONN_TYPE]: spec.connType,
    [ANNOTATION_BACKEND]: spec.backend,
    [ANNOTATION_PROBE_PORT]: "8080",
  });
  assert.deepEqual(parseVMSpec(pod), spec);
  assert.ok(vmSpecEqual(parseVMSpec(pod), spec));
});

Deno.test("fromAgentSpec", () => {
  const agent: AgentSpec = {
    image: "ghcr.io/cocoonstack/cocoon/ubuntu:24.04",
    mode: AGENT_MODE_RUN,
    os: OS_WINDOWS,
    backend: BACKEND_FIRECRACKER,
    connType: CONN_TYPE_RDP,
    network: "default",
    forcePull: true,
    noDirectIO: true,
    storage: "100G",
  };
  assert.deepEqual(
    fromAgentSpec(agent, "vk-prod-demo-0", SNAPSHOT_POLICY_ALWAYS, "vk-prod-demo-main-0"),
    vmSpec({
      vmName: "vk-prod-demo-0",
      image: agent.image,
      mode: "run",
      os: "windows",
      storage: "100G",
      network: "default",
      snapshotPolicy: "always",
      forkFrom: "vk-prod-demo-main-0",
      managed: true,
      forcePull: true,
      noDirectIO: true,
      connType: "rdp",
      backend: "firecracker",
    }),
  );
});

Deno.test("fromAgentSpec applies enum defaults", () => {
  const got = fromAgentSpec({ image: "img" }, "vm-0", "", "");
  assert.equal(got.mode, AGENT_MODE_CLONE);
  assert.equal(got.os, OS_LINUX);
  assert.equal(got.backend, BACKEND_CLOUD_HYPERVISOR);
  assert.equal(got.snapshotPolicy, SNAPSHOT_POLICY_ALWAYS);
  assert.equal(got.managed, true);
  assert.equal(got.storage, "");
  assert.equal(got.probePort, "");
});

Deno.test("fromAgentSpec canonicalises storage like Quantity.String", async (t) => {
  const cases: [string | number, string][] = [
    ["100Gi", "100Gi"],
    ["100G", "100G"],
    ["1024Mi", "1Gi"],
    ["0.5Gi", "512Mi"],
    [1073741824, "1073741824"],
    ["1000M", "1G"],
  ];
  for (const [storage, want] of cases) {
    await t.step(String(storage), () => {
      assert.equal(fromAgentSpec({ image: "i", storage }, "vm", "", "").storage, want);
    });
  }
});

Deno.test("fromAgentSpec formats the probe port and skips zero", () => {
  assert.equal(fromAgentSpec({ image: "i", probePort: 22 }, "vm", "", "").probePort, "22");
  assert.equal(fromAgentSpec({ image: "i", probePort: 0 }, "vm", "", "").probePort, "");
});

Deno.test("fromToolboxSpec", () => {
  const tb: ToolboxSpec = {
    name: "shell",
    image: "ghcr.io/cocoonstack/cocoon/toolbox:latest",
    mode: TOOLBOX_MODE_CLONE,
    backend: BACKEND_CLOUD_HYPERVISOR,
    connType: CONN_TYPE_SSH,
    network: "default",
    noDirectIO: true,
  };
  assert.deepEqual(
    fromToolboxSpec(tb, "vk-prod-demo-shell", SNAPSHOT_POLICY_MAIN_ONLY),
    vmSpec({
      vmName: "vk-prod-demo-shell",
      image: tb.image,
      mode: "clone",
      os: "linux",
      network: "default",
      snapshotPolicy: "main-only",
      managed: true,
      noDirectIO: true,
      connType: "ssh",
      backend: "cloud-hypervisor",
    }),
  );
});

Deno.test("fromToolboxSpec: managed unless static", async (t) => {
  const cases: [ToolboxSpec["mode"], boolean][] = [
    [TOOLBOX_MODE_RUN, true],
    [TOOLBOX_MODE_CLONE, true],
    [TOOLBOX_MODE_STATIC, false],
    [undefined, true],
  ];
  for (const [mode, managed] of cases) {
    await t.step(String(mode), () => {
      const got = fromToolboxSpec({ name: "tb", mode }, "vm", SNAPSHOT_POLICY_ALWAYS);
      assert.equal(got.managed, managed);
      assert.equal(got.mode, mode ?? TOOLBOX_MODE_RUN);
      assert.equal(got.image, "");
    });
  }
});

Deno.test("VMSpec round trip: agent spec → pod → VMSpec", () => {
  const want = fromAgentSpec(
    { image: "img", storage: "20Gi", os: OS_WINDOWS, probePort: 3389 },
    "vk-ns-cs-1",
    SNAPSHOT_POLICY_NEVER,
    "vk-ns-cs-0",
  );
  const pod: Pod = { metadata: { name: "cs-1", namespace: "ns" } };
  applyVMSpec(want, pod);
  assert.deepEqual(parseVMSpec(pod), want);
});

Deno.test("VMSpec round trip: static toolbox spec → pod → VMSpec (unmanaged stays absent)", () => {
  const want = fromToolboxSpec({ name: "tb", mode: TOOLBOX_MODE_STATIC }, "vk-ns-tb", "");
  const pod: Pod = { metadata: {} };
  applyVMSpec(want, pod);
  assert.equal(pod.metadata.annotations?.[ANNOTATION_MANAGED], undefined);
  assert.deepEqual(parseVMSpec(pod), want);
});

Deno.test("applyVMSpec skips empty fields and never clears existing ones", () => {
  const pod: Pod = { metadata: { annotations: { [ANNOTATION_IMAGE]: "preset" } } };
  applyVMSpec(vmSpec({ vmName: "vk-x-0" }), pod);
  assert.deepEqual(pod.metadata.annotations, {
    [ANNOTATION_IMAGE]: "preset",
    [ANNOTATION_VM_NAME]: "vk-x-0",
  });
});

Deno.test("applyVMSpec managed flag", () => {
  const a: Pod = { metadata: {} };
  applyVMSpec(vmSpec({ managed: true }), a);
  assert.equal(a.metadata.annotations?.[ANNOTATION_MANAGED], "true");
  const b: Pod = { metadata: {} };
  applyVMSpec(vmSpec({ managed: false }), b);
  assert.equal(b.metadata.annotations?.[ANNOTATION_MANAGED], undefined);
});

Deno.test("applyVMSpec with managed=false does not clobber an existing managed annotation", () => {
  const pod: Pod = { metadata: { annotations: { [ANNOTATION_MANAGED]: "true" } } };
  applyVMSpec(vmSpec({ vmName: "vk-x-0", managed: false }), pod);
  assert.equal(pod.metadata.annotations?.[ANNOTATION_MANAGED], "true");
});

Deno.test("vmSpecEqual compares every field", () => {
  assert.ok(vmSpecEqual(vmSpec(), vmSpec()));
  assert.ok(!vmSpecEqual(vmSpec(), vmSpec({ probePort: "1" })));
  assert.ok(!vmSpecEqual(vmSpec(), vmSpec({ noDirectIO: true })));
});

Deno.test("shouldSnapshotVM", async (t) => {
  const cases: [string, string, string, boolean][] = [
    ["always/main", SNAPSHOT_POLICY_ALWAYS, ROLE_MAIN, true],
    ["always/sub-agent", SNAPSHOT_POLICY_ALWAYS, ROLE_SUB_AGENT, true],
    ["always/toolbox", SNAPSHOT_POLICY_ALWAYS, ROLE_TOOLBOX, true],
    ["always/empty-role", SNAPSHOT_POLICY_ALWAYS, "", true],
    ["empty-policy-defaults-to-always", "", ROLE_TOOLBOX, true],
    ["never/main", SNAPSHOT_POLICY_NEVER, ROLE_MAIN, false],
    ["never/sub-agent", SNAPSHOT_POLICY_NEVER, ROLE_SUB_AGENT, false],
    ["never/toolbox", SNAPSHOT_POLICY_NEVER, ROLE_TOOLBOX, false],
    ["never/empty-role", SNAPSHOT_POLICY_NEVER, "", false],
    ["main-only/main", SNAPSHOT_POLICY_MAIN_ONLY, ROLE_MAIN, true],
    ["main-only/sub-agent", SNAPSHOT_POLICY_MAIN_ONLY, ROLE_SUB_AGENT, false],
    ["main-only/toolbox", SNAPSHOT_POLICY_MAIN_ONLY, ROLE_TOOLBOX, false],
    ["main-only/empty-role", SNAPSHOT_POLICY_MAIN_ONLY, "", false],
  ];
  for (const [name, policy, role, want] of cases) {
    await t.step(name, () => {
      assert.equal(shouldSnapshotVM(vmSpec({ snapshotPolicy: policy }), role), want);
    });
  }
});

Deno.test("fromAgentSpec without an image writes no image annotation (Go's zero string)", () => {
  const spec = JSON.parse('{"replicas":1,"image":null}') as AgentSpec;
  const pod: Pod = { metadata: {} };
  applyVMSpec(fromAgentSpec(spec, "vk-ns-cs-0", undefined, ""), pod);
  assert.equal(Object.hasOwn(pod.metadata.annotations ?? {}, ANNOTATION_IMAGE), false);
  assert.equal(parseVMSpec(pod).image, "");
});
