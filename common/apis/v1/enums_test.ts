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
    assert.equal(e.agentModeOrDefault(""), e.AGENT_MODE_CLONE);
    assert.equal(e.agentModeOrDefault(undefined), e.AGENT_MODE_CLONE);
    assert.equal(e.agentModeOrDefault(e.AGENT_MODE_RUN), e.AGENT_MODE_RUN);
  });
  await t.step("ToolboxMode", () => {
    assert.equal(e.toolboxModeOrDefault(""), e.TOOLBOX_MODE_RUN);
    assert.equal(e.toolboxModeOrDefault(e.TOOLBOX_MODE_STATIC), e.TOOLBOX_MODE_STATIC);
  });
  await t.step("OSType", () => {
    assert.equal(e.osTypeOrDefault(""), e.OS_LINUX);
    assert.equal(e.osTypeOrDefault(e.OS_WINDOWS), e.OS_WINDOWS);
  });
  await t.step("SnapshotPolicy", () => {
    assert.equal(e.snapshotPolicyOrDefault(""), e.SNAPSHOT_POLICY_ALWAYS);
    assert.equal(e.snapshotPolicyOrDefault(e.SNAPSHOT_POLICY_NEVER), e.SNAPSHOT_POLICY_NEVER);
  });
  await t.step("HibernatePolicy", () => {
    assert.equal(e.hibernatePolicyOrDefault(""), e.HIBERNATE_POLICY_RETAIN);
    assert.equal(
      e.hibernatePolicyOrDefault(e.HIBERNATE_POLICY_RELEASE),
      e.HIBERNATE_POLICY_RELEASE,
    );
  });
  await t.step("Backend", () => {
    assert.equal(e.backendOrDefault(""), e.BACKEND_CLOUD_HYPERVISOR);
    assert.equal(e.backendOrDefault(e.BACKEND_FIRECRACKER), e.BACKEND_FIRECRACKER);
  });
  await t.step("unknown values are not replaced (Go's cmp.Or)", () => {
    assert.equal(e.snapshotPolicyOrDefault("sometimes"), "sometimes");
  });
});

Deno.test("enum sets and defaults are the API's", () => {
  assert.deepEqual(e.AGENT_MODES, ["clone", "run"]);
  assert.deepEqual(e.TOOLBOX_MODES, ["run", "clone", "static"]);
  assert.deepEqual(e.OS_TYPES, ["linux", "windows", "android", "macos"]);
  assert.deepEqual(e.SNAPSHOT_POLICIES, ["always", "main-only", "never"]);
  assert.deepEqual(e.HIBERNATE_POLICIES, ["retain", "release"]);
  assert.deepEqual(e.CONN_TYPES, ["ssh", "rdp", "vnc", "adb"]);
  assert.deepEqual(e.BACKENDS, ["cloud-hypervisor", "firecracker"]);
  assert.deepEqual(e.COCOON_SET_PHASES, [
    "Pending",
    "Running",
    "Scaling",
    "Suspending",
    "Suspended",
    "Waking",
    "Migrating",
    "Failed",
  ]);
  assert.deepEqual(e.HIBERNATION_DESIRES, ["Hibernate", "Wake"]);
  assert.deepEqual(e.COCOON_HIBERNATION_PHASES, [
    "Pending",
    "Hibernating",
    "Hibernated",
    "Waking",
    "Active",
    "Failed",
  ]);
  assert.deepEqual(
    [
      e.DEFAULT_AGENT_MODE,
      e.DEFAULT_TOOLBOX_MODE,
      e.DEFAULT_OS_TYPE,
      e.DEFAULT_SNAPSHOT_POLICY,
      e.DEFAULT_HIBERNATE_POLICY,
      e.DEFAULT_BACKEND,
    ],
    ["clone", "run", "linux", "always", "retain", "cloud-hypervisor"],
  );
});
