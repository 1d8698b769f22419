import assert from "node:assert/strict";
import * as e from "./enums.ts";

function checkValid(name: string, isValid: (v: unknown) => boolean, cases: [string, boolean][]) {
  Deno.test(`${name} validity`, () => {
    for (const [value, want] of cases) assert.equal(isValid(value), want, `${name}(${value})`);
    assert.equal(isValid(undefined), false);
  });
}

checkValid("AgentMode", e.isValidAgentMode, [["clone", true], ["run", true], ["", false], [
  "unknown",
  false,
]]);
checkValid("ToolboxMode", e.isValidToolboxMode, [
  ["run", true],
  ["clone", true],
  ["static", true],
  ["", false],
  ["unknown", false],
]);
checkValid("OSType", e.isValidOSType, [
  ["linux", true],
  ["windows", true],
  ["android", true],
  ["macos", true],
  ["", false],
  ["freebsd", false],
]);
checkValid("SnapshotPolicy", e.isValidSnapshotPolicy, [
  ["always", true],
  ["main-only", true],
  ["never", true],
  ["", false],
  ["sometimes", false],
]);
checkValid("HibernatePolicy", e.isValidHibernatePolicy, [
  ["retain", true],
  ["release", true],
  ["", false],
  ["relase", false],
]);
checkValid("ConnType", e.isValidConnType, [
  ["ssh", true],
  ["rdp", true],
  ["vnc", true],
  ["adb", true],
  ["", false],
  ["telnet", false],
]);
checkValid("Backend", e.isValidBackend, [
  ["cloud-hypervisor", true],
  ["firecracker", true],
  ["", false],
  ["qemu", false],
]);
checkValid("HibernationDesire", e.isValidHibernationDesire, [
  ["Hibernate", true],
  ["Wake", true],
  ["", false],
  ["unknown", false],
]);
checkValid("CocoonSetPhase", e.isValidCocoonSetPhase, [["Running", true], ["running", false]]);
checkValid("CocoonHibernationPhase", e.isValidCocoonHibernationPhase, [
  ["Hibernated", true],
  ["Suspended", false],
]);

Deno.test("enum defaults: empty gives the default, a set value passes through", async (t) => {
  await t.step("AgentMode", () => {
    assert.equal(e.agentModeOrDefault(""), e.AgentModeClone);
    assert.equal(e.agentModeOrDefault(undefined), e.AgentModeClone);
    assert.equal(e.agentModeOrDefault(e.AgentModeRun), e.AgentModeRun);
  });
  await t.step("ToolboxMode", () => {
    assert.equal(e.toolboxModeOrDefault(""), e.ToolboxModeRun);
    assert.equal(e.toolboxModeOrDefault(e.ToolboxModeStatic), e.ToolboxModeStatic);
  });
  await t.step("OSType", () => {
    assert.equal(e.osTypeOrDefault(""), e.OSLinux);
    assert.equal(e.osTypeOrDefault(e.OSWindows), e.OSWindows);
  });
  await t.step("SnapshotPolicy", () => {
    assert.equal(e.snapshotPolicyOrDefault(""), e.SnapshotPolicyAlways);
    assert.equal(e.snapshotPolicyOrDefault(e.SnapshotPolicyNever), e.SnapshotPolicyNever);
  });
  await t.step("HibernatePolicy", () => {
    assert.equal(e.hibernatePolicyOrDefault(""), e.HibernatePolicyRetain);
    assert.equal(e.hibernatePolicyOrDefault(e.HibernatePolicyRelease), e.HibernatePolicyRelease);
  });
  await t.step("Backend", () => {
    assert.equal(e.backendOrDefault(""), e.BackendCloudHypervisor);
    assert.equal(e.backendOrDefault(e.BackendFirecracker), e.BackendFirecracker);
  });
  await t.step("unknown values are not replaced (Go's cmp.Or)", () => {
    assert.equal(e.snapshotPolicyOrDefault("sometimes"), "sometimes");
  });
});

Deno.test("enum sets and defaults are the API's", () => {
  assert.deepEqual(e.AgentModes, ["clone", "run"]);
  assert.deepEqual(e.ToolboxModes, ["run", "clone", "static"]);
  assert.deepEqual(e.OSTypes, ["linux", "windows", "android", "macos"]);
  assert.deepEqual(e.SnapshotPolicies, ["always", "main-only", "never"]);
  assert.deepEqual(e.HibernatePolicies, ["retain", "release"]);
  assert.deepEqual(e.ConnTypes, ["ssh", "rdp", "vnc", "adb"]);
  assert.deepEqual(e.Backends, ["cloud-hypervisor", "firecracker"]);
  assert.deepEqual(e.CocoonSetPhases, [
    "Pending",
    "Running",
    "Scaling",
    "Suspending",
    "Suspended",
    "Waking",
    "Migrating",
    "Failed",
  ]);
  assert.deepEqual(e.HibernationDesires, ["Hibernate", "Wake"]);
  assert.deepEqual(e.CocoonHibernationPhases, [
    "Pending",
    "Hibernating",
    "Hibernated",
    "Waking",
    "Active",
    "Failed",
  ]);
  assert.deepEqual(
    [
      e.DefaultAgentMode,
      e.DefaultToolboxMode,
      e.DefaultOSType,
      e.DefaultSnapshotPolicy,
      e.DefaultHibernatePolicy,
      e.DefaultBackend,
    ],
    ["clone", "run", "linux", "always", "retain", "cloud-hypervisor"],
  );
});
