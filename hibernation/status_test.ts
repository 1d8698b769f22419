import assert from "node:assert/strict";
import {
  COCOON_HIBERNATION_PHASE_ACTIVE,
  COCOON_HIBERNATION_PHASE_FAILED,
  COCOON_HIBERNATION_PHASE_HIBERNATED,
  COCOON_HIBERNATION_PHASE_HIBERNATING,
  COCOON_HIBERNATION_PHASE_PENDING,
  COCOON_HIBERNATION_PHASE_WAKING,
  type CocoonHibernation,
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
import {
  goDuration,
  HIBERNATE_TIMEOUT_MS,
  nextStatus,
  phaseDeadlineExceeded,
  readyCondition,
  WAKE_TIMEOUT_MS,
} from "./status.ts";
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

// --- writes ------------------------------------------------------------------------------------

Deno.test("a pass in the same phase rewrites observedGeneration, keeps the clock, announces nothing", async () => {
  const registry = new FakeRegistry();
  registry.put(VM, "hibernate");
  const h = Harness.create([
    request("hib", "Hibernate", {
      generation: 7,
      status: {
        phase: COCOON_HIBERNATION_PHASE_HIBERNATED,
        vmName: VM,
        observedGeneration: 6,
        conditions: [ready("True", "Done", at(-1000), "Hibernated")],
      },
    }),
    vmPod({ hibernate: true, lifecycle: HIBERNATED_LIFECYCLE }),
  ], { registry });
  await h.reconcile("hib");
  const got = await h.hib("hib");
  assert.equal(got.status?.observedGeneration, 7);
  assert.equal(readyOf(got.status)?.lastTransitionTime, at(-1000), "no flip, same clock");
  assert.deepEqual(await h.reasons("hib"), [], "no transition, no Event");
  await h.close();
});

Deno.test("a status write carries the resourceVersion it was computed from", async () => {
  const h = Harness.create([request("hib", "Hibernate")]);
  await h.reconcile("hib");
  assert.equal((await h.hib("hib")).status?.phase, COCOON_HIBERNATION_PHASE_PENDING);
  const patch = h.api.actions.find((a) => a.verb === "patch" && a.subresource === "status");
  const body = patch?.patch as { metadata?: { resourceVersion?: string } };
  assert.ok(body.metadata?.resourceVersion, "optimistic lock sent");
  await h.close();
});

// --- deadlines -----------------------------------------------------------------------------------

function inPhase(phase: CocoonHibernationPhase | undefined, enteredAt?: string): CocoonHibernation {
  return request("hib", "Hibernate", {
    status: {
      ...(phase ? { phase } : {}),
      ...(enteredAt ? { conditions: [ready("False", "Pending", enteredAt)] } : {}),
    },
  });
}

Deno.test("the Hibernating deadline: not started, within budget, past budget", () => {
  const p = COCOON_HIBERNATION_PHASE_HIBERNATING;
  assert.equal(phaseDeadlineExceeded(inPhase(undefined), p, HIBERNATE_TIMEOUT_MS, T0), false);
  assert.equal(phaseDeadlineExceeded(inPhase(p, at(0)), p, HIBERNATE_TIMEOUT_MS, T0), false);
  assert.equal(
    phaseDeadlineExceeded(inPhase(p, at(-2 * HIBERNATE_TIMEOUT_MS)), p, HIBERNATE_TIMEOUT_MS, T0),
    true,
  );
  // Another phase's clock never counts, nor does a missing one.
  assert.equal(
    phaseDeadlineExceeded(
      inPhase(COCOON_HIBERNATION_PHASE_WAKING, at(-HIBERNATE_TIMEOUT_MS * 2)),
      p,
      1,
      T0,
    ),
    false,
  );
  assert.equal(phaseDeadlineExceeded(inPhase(p), p, 1, T0), false);
});

Deno.test("the Waking deadline: not started, within budget, past budget", () => {
  const p = COCOON_HIBERNATION_PHASE_WAKING;
  assert.equal(phaseDeadlineExceeded(inPhase(undefined), p, WAKE_TIMEOUT_MS, T0), false);
  assert.equal(phaseDeadlineExceeded(inPhase(p, at(0)), p, WAKE_TIMEOUT_MS, T0), false);
  assert.equal(
    phaseDeadlineExceeded(inPhase(p, at(-2 * WAKE_TIMEOUT_MS)), p, WAKE_TIMEOUT_MS, T0),
    true,
  );
});

Deno.test("goDuration prints like Go's time.Duration for whole seconds", () => {
  assert.equal(goDuration(HIBERNATE_TIMEOUT_MS), "3m0s");
  assert.equal(goDuration(WAKE_TIMEOUT_MS), "5m0s");
  assert.equal(goDuration(45_000), "45s");
  assert.equal(goDuration(3_725_000), "1h2m5s");
});
