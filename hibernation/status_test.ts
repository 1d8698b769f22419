import assert from "node:assert/strict";
import {
  COCOON_HIBERNATION_PHASE_ACTIVE,
  COCOON_HIBERNATION_PHASE_FAILED,
  COCOON_HIBERNATION_PHASE_HIBERNATED,
  COCOON_HIBERNATION_PHASE_HIBERNATING,
  COCOON_HIBERNATION_PHASE_PENDING,
  COCOON_HIBERNATION_PHASE_WAKING,
  type CocoonHibernationPhase,
} from "../common/apis/v1/mod.ts";
import {
  at,
  Harness,
  HIBERNATED_LIFECYCLE,
  ready,
  readyOf,
  request,
  T0,
  VM,
  vmPod,
} from "./_fixtures.ts";
import { nextStatus, readyCondition, sameStatus } from "./status.ts";
import { FakeRegistry } from "../snapshot/testing/fake.ts";

Deno.test("readyCondition maps each phase to Ready's status and reason", () => {
  const cases: [CocoonHibernationPhase, string, string][] = [
    [COCOON_HIBERNATION_PHASE_HIBERNATED, "True", "Done"],
    [COCOON_HIBERNATION_PHASE_ACTIVE, "True", "Done"],
    [COCOON_HIBERNATION_PHASE_FAILED, "False", "Failed"],
    [COCOON_HIBERNATION_PHASE_HIBERNATING, "False", "Pending"],
    [COCOON_HIBERNATION_PHASE_WAKING, "False", "Pending"],
    [COCOON_HIBERNATION_PHASE_PENDING, "False", "Pending"],
  ];
  for (const [phase, status, reason] of cases) {
    const c = readyCondition(phase, 1);
    assert.equal(c.type, "Ready");
    assert.equal(c.status, status, phase);
    assert.equal(c.reason, reason, phase);
    assert.equal(c.message, phase);
    assert.equal(c.observedGeneration, 1);
    assert.equal(c.lastTransitionTime, "", "left for setStatusCondition to fill");
  }
});

Deno.test("nextStatus restarts the clock on entering a deadline phase, not within it", () => {
  const failed = request("hib", "Hibernate", {
    generation: 3,
    status: {
      phase: COCOON_HIBERNATION_PHASE_FAILED,
      conditions: [ready("False", "Failed", at(-60_000))],
    },
  });
  const entered = nextStatus(
    failed,
    { phase: COCOON_HIBERNATION_PHASE_HIBERNATING, vmName: "vm" },
    T0,
  );
  assert.equal(entered.phase, COCOON_HIBERNATION_PHASE_HIBERNATING);
  assert.equal(entered.vmName, "vm");
  assert.equal(entered.observedGeneration, 3);
  assert.equal(entered.conditions?.[0].lastTransitionTime, at(0));
  assert.equal(entered.conditions?.[0].reason, "Pending");

  const hibernating = request("hib", "Hibernate", {
    generation: 3,
    status: { ...entered, conditions: [ready("False", "Pending", at(-1000), "Hibernating")] },
  });
  const again = nextStatus(
    hibernating,
    { phase: COCOON_HIBERNATION_PHASE_HIBERNATING },
    T0 + 9_000,
  );
  assert.equal(again.conditions?.[0].lastTransitionTime, at(-1000));
  assert.equal(again.vmName, "vm", "absent vmName keeps the stored one");
  assert.equal(failed.status?.conditions?.[0].lastTransitionTime, at(-60_000), "input untouched");
});

Deno.test("sameStatus ignores key order and undefined fields", () => {
  assert.equal(
    sameStatus({ phase: "Active", vmName: "v" }, { vmName: "v", phase: "Active" }),
    true,
  );
  assert.equal(sameStatus({ phase: "Active", vmName: undefined }, { phase: "Active" }), true);
  assert.equal(sameStatus({ phase: "Active" }, { phase: "Failed" }), false);
});

// --- conditions follow the phase (Differences from the Go operator) --------------------------

Deno.test("a Ready condition that contradicts the phase is rewritten", async () => {
  const registry = new FakeRegistry();
  registry.put(VM, "hibernate");
  const h = Harness.create([
    request("hib", "Hibernate", {
      status: {
        phase: COCOON_HIBERNATION_PHASE_HIBERNATED,
        vmName: VM,
        observedGeneration: 1,
        conditions: [ready("False", "Pending", at(-60_000), "Hibernating")],
      },
    }),
    vmPod({ hibernate: true, lifecycle: HIBERNATED_LIFECYCLE }),
  ], { registry });
  await h.reconcile("hib");
  const got = await h.hib("hib");
  assert.equal(got.status?.phase, COCOON_HIBERNATION_PHASE_HIBERNATED);
  assert.equal(readyOf(got.status)?.status, "True");
  assert.equal(readyOf(got.status)?.reason, "Done");
  assert.equal(readyOf(got.status)?.message, "Hibernated");
  await h.close();
});
