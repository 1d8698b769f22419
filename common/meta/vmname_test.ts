import assert from "node:assert/strict";
import type { Pod } from "../../kube/core.ts";
import { KIND_COCOON_SET, ROLE_MAIN, ROLE_SUB_AGENT, ROLE_TOOLBOX } from "./keys.ts";
import {
  agentVMNamePrefix,
  extractAgentSlot,
  inferRoleFromAgentSlot,
  roleForPod,
  vmNameForDeployment,
  vmNameForPod,
} from "./vmname.ts";

Deno.test("vmNameForDeployment and vmNameForPod build vk- names", () => {
  assert.equal(vmNameForDeployment("prod", "demo", 2), "vk-prod-demo-2");
  assert.equal(vmNameForPod("prod", "toolbox"), "vk-prod-toolbox");
  assert.equal(agentVMNamePrefix("prod", "demo"), "vk-prod-demo-");
});

Deno.test("extractAgentSlot", async (t) => {
  const cases: [string, string, string, string, number][] = [
    ["main agent", "prod", "demo", "vk-prod-demo-0", 0],
    ["sub-agent", "prod", "demo", "vk-prod-demo-3", 3],
    // Splitting at the last dash would read this toolbox as slot 2.
    ["toolbox with trailing digit is not an agent slot", "prod", "demo", "vk-prod-demo-db-2", -1],
    ["toolbox without trailing digit", "prod", "demo", "vk-prod-demo-toolbox", -1],
    ["different cocoonset", "prod", "demo", "vk-prod-other-0", -1],
    ["different namespace", "prod", "demo", "vk-staging-demo-0", -1],
    ["non-vk prefix", "prod", "demo", "prod-demo-0", -1],
    ["empty suffix", "prod", "demo", "vk-prod-demo-", -1],
    ["leading zeros parse like Atoi", "prod", "demo", "vk-prod-demo-007", 7],
    ["beyond int64 is not a slot", "prod", "demo", "vk-prod-demo-99999999999999999999", -1],
  ];
  for (const [name, ns, cs, vm, want] of cases) {
    await t.step(name, () => assert.equal(extractAgentSlot(ns, cs, vm), want));
  }
});

Deno.test("inferRoleFromAgentSlot", () => {
  assert.equal(inferRoleFromAgentSlot(0), ROLE_MAIN);
  assert.equal(inferRoleFromAgentSlot(7), ROLE_SUB_AGENT);
  assert.equal(inferRoleFromAgentSlot(-1), ROLE_TOOLBOX);
});

Deno.test("roleForPod", async (t) => {
  const owned = (): Pod => ({
    metadata: {
      namespace: "ns",
      ownerReferences: [{ apiVersion: "x/v1", kind: KIND_COCOON_SET, name: "cs", uid: "u" }],
    },
  });
  await t.step(
    "agent slot 0 is main",
    () => assert.equal(roleForPod(owned(), "vk-ns-cs-0"), ROLE_MAIN),
  );
  await t.step("agent slot 2 is sub-agent", () => {
    assert.equal(roleForPod(owned(), "vk-ns-cs-2"), ROLE_SUB_AGENT);
  });
  // Toolbox "app-0" gets VM name "vk-ns-cs-app-0": it must not be read as agent slot 0.
  await t.step("toolbox named app-0 is not main", () => {
    assert.equal(roleForPod(owned(), "vk-ns-cs-app-0"), ROLE_TOOLBOX);
  });
  await t.step("no CocoonSet owner is toolbox", () => {
    assert.equal(roleForPod({ metadata: { namespace: "ns" } }, "vk-ns-cs-0"), ROLE_TOOLBOX);
  });
});
