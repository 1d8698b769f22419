import assert from "node:assert/strict";
import {
  COCOON_HIBERNATION_PHASE_HIBERNATING,
  COCOON_HIBERNATION_PHASE_WAKING,
  type CocoonHibernation,
  type CocoonHibernationPhase,
} from "../common/apis/v1/mod.ts";
import { at, ready, request, T0 } from "./_fixtures.ts";
import {
  goDuration,
  HIBERNATE_TIMEOUT_MS,
  phaseDeadlineExceeded,
  WAKE_TIMEOUT_MS,
} from "./timers.ts";

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
