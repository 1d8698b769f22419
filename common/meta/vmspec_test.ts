import assert from "node:assert/strict";
import type { Pod } from "../../kube/core.ts";
import type { AgentSpec, ToolboxSpec } from "../apis/v1/cocoonset_types.ts";
import {
  AgentModeClone,
  AgentModeRun,
  BackendCloudHypervisor,
  BackendFirecracker,
  ConnTypeRDP,
  ConnTypeSSH,
  OSLinux,
  OSWindows,
  SnapshotPolicyAlways,
  SnapshotPolicyMainOnly,
  SnapshotPolicyNever,
  ToolboxModeClone,
  ToolboxModeRun,
  ToolboxModeStatic,
} from "../apis/v1/enums.ts";
import {
  AnnotationBackend,
  AnnotationConnType,
  AnnotationForcePull,
  AnnotationForkFrom,
  AnnotationImage,
  AnnotationManaged,
  AnnotationMode,
  AnnotationNetwork,
  AnnotationNoDirectIO,
  AnnotationOS,
  AnnotationProbePort,
  AnnotationSnapshotPolicy,
  AnnotationStorage,
  AnnotationVMName,
  RoleMain,
  RoleSubAgent,
  RoleToolbox,
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
    [AnnotationVMName]: spec.vmName,
    [AnnotationImage]: spec.image,
    [AnnotationMode]: spec.mode,
    [AnnotationOS]: spec.os,
    [AnnotationStorage]: spec.storage,
    [AnnotationNetwork]: spec.network,
    [AnnotationSnapshotPolicy]: spec.snapshotPolicy,
    [AnnotationForkFrom]: spec.forkFrom,
    [AnnotationManaged]: "true",
    [AnnotationForcePull]: "true",
    [AnnotationNoDirectIO]: "true",
    [AnnotationConnType]: spec.connType,
    [AnnotationBackend]: spec.backend,
    [AnnotationProbePort]: "8080",
  });
  assert.deepEqual(parseVMSpec(pod), spec);
  assert.ok(vmSpecEqual(parseVMSpec(pod), spec));
});

Deno.test("fromAgentSpec", () => {
  const agent: AgentSpec = {
    image: "ghcr.io/cocoonstack/cocoon/ubuntu:24.04",
    mode: AgentModeRun,
    os: OSWindows,
    backend: BackendFirecracker,
    connType: ConnTypeRDP,
    network: "default",
    forcePull: true,
    noDirectIO: true,
    storage: "100G",
  };
  assert.deepEqual(
    fromAgentSpec(agent, "vk-prod-demo-0", SnapshotPolicyAlways, "vk-prod-demo-main-0"),
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
  assert.equal(got.mode, AgentModeClone);
  assert.equal(got.os, OSLinux);
  assert.equal(got.backend, BackendCloudHypervisor);
  assert.equal(got.snapshotPolicy, SnapshotPolicyAlways);
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
    mode: ToolboxModeClone,
    backend: BackendCloudHypervisor,
    connType: ConnTypeSSH,
    network: "default",
    noDirectIO: true,
  };
  assert.deepEqual(
    fromToolboxSpec(tb, "vk-prod-demo-shell", SnapshotPolicyMainOnly),
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
    [ToolboxModeRun, true],
    [ToolboxModeClone, true],
    [ToolboxModeStatic, false],
    [undefined, true],
  ];
  for (const [mode, managed] of cases) {
    await t.step(String(mode), () => {
      const got = fromToolboxSpec({ name: "tb", mode }, "vm", SnapshotPolicyAlways);
      assert.equal(got.managed, managed);
      assert.equal(got.mode, mode ?? ToolboxModeRun);
      assert.equal(got.image, "");
    });
  }
});

Deno.test("VMSpec round trip: agent spec → pod → VMSpec", () => {
  const want = fromAgentSpec(
    { image: "img", storage: "20Gi", os: OSWindows, probePort: 3389 },
    "vk-ns-cs-1",
    SnapshotPolicyNever,
    "vk-ns-cs-0",
  );
  const pod: Pod = { metadata: { name: "cs-1", namespace: "ns" } };
  applyVMSpec(want, pod);
  assert.deepEqual(parseVMSpec(pod), want);
});

Deno.test("VMSpec round trip: static toolbox spec → pod → VMSpec (unmanaged stays absent)", () => {
  const want = fromToolboxSpec({ name: "tb", mode: ToolboxModeStatic }, "vk-ns-tb", "");
  const pod: Pod = { metadata: {} };
  applyVMSpec(want, pod);
  assert.equal(pod.metadata.annotations?.[AnnotationManaged], undefined);
  assert.deepEqual(parseVMSpec(pod), want);
});

Deno.test("applyVMSpec skips empty fields and never clears existing ones", () => {
  const pod: Pod = { metadata: { annotations: { [AnnotationImage]: "preset" } } };
  applyVMSpec(vmSpec({ vmName: "vk-x-0" }), pod);
  assert.deepEqual(pod.metadata.annotations, {
    [AnnotationImage]: "preset",
    [AnnotationVMName]: "vk-x-0",
  });
});

Deno.test("applyVMSpec managed flag", () => {
  const a: Pod = { metadata: {} };
  applyVMSpec(vmSpec({ managed: true }), a);
  assert.equal(a.metadata.annotations?.[AnnotationManaged], "true");
  const b: Pod = { metadata: {} };
  applyVMSpec(vmSpec({ managed: false }), b);
  assert.equal(b.metadata.annotations?.[AnnotationManaged], undefined);
});

Deno.test("applyVMSpec with managed=false does not clobber an existing managed annotation", () => {
  const pod: Pod = { metadata: { annotations: { [AnnotationManaged]: "true" } } };
  applyVMSpec(vmSpec({ vmName: "vk-x-0", managed: false }), pod);
  assert.equal(pod.metadata.annotations?.[AnnotationManaged], "true");
});

Deno.test("vmSpecEqual compares every field", () => {
  assert.ok(vmSpecEqual(vmSpec(), vmSpec()));
  assert.ok(!vmSpecEqual(vmSpec(), vmSpec({ probePort: "1" })));
  assert.ok(!vmSpecEqual(vmSpec(), vmSpec({ noDirectIO: true })));
});

Deno.test("shouldSnapshotVM", async (t) => {
  const cases: [string, string, string, boolean][] = [
    ["always/main", SnapshotPolicyAlways, RoleMain, true],
    ["always/sub-agent", SnapshotPolicyAlways, RoleSubAgent, true],
    ["always/toolbox", SnapshotPolicyAlways, RoleToolbox, true],
    ["always/empty-role", SnapshotPolicyAlways, "", true],
    ["empty-policy-defaults-to-always", "", RoleToolbox, true],
    ["never/main", SnapshotPolicyNever, RoleMain, false],
    ["never/sub-agent", SnapshotPolicyNever, RoleSubAgent, false],
    ["never/toolbox", SnapshotPolicyNever, RoleToolbox, false],
    ["never/empty-role", SnapshotPolicyNever, "", false],
    ["main-only/main", SnapshotPolicyMainOnly, RoleMain, true],
    ["main-only/sub-agent", SnapshotPolicyMainOnly, RoleSubAgent, false],
    ["main-only/toolbox", SnapshotPolicyMainOnly, RoleToolbox, false],
    ["main-only/empty-role", SnapshotPolicyMainOnly, "", false],
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
  assert.equal(Object.hasOwn(pod.metadata.annotations ?? {}, AnnotationImage), false);
  assert.equal(parseVMSpec(pod).image, "");
});
