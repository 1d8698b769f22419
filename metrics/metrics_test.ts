import assert from "node:assert/strict";
import { Registry } from "../kube/prom_client.ts";
import {
  hibernatePhaseDurationSeconds,
  lifecycleStateFailedObservedTotal,
  register,
  slotReleasePodsDeletedTotal,
  slotReleaseWakeTotal,
  slotReleaseWakeUnschedulableTotal,
  subAgentDeadLetterTotal,
  subAgentRebuildTotal,
  wakePhaseDurationSeconds,
} from "./metrics.ts";

// The exposition names are the monitoring contract with the Go operator: byte-for-byte.
Deno.test("metrics: register emits the stable cocoon_operator_* names and labels", async () => {
  const reg = new Registry();
  register(reg);
  register(reg); // idempotent
  subAgentRebuildTotal.inc({ namespace: "ns", cocoonset: "cs" });
  subAgentDeadLetterTotal.inc({ namespace: "ns", cocoonset: "cs" });
  hibernatePhaseDurationSeconds.observe({ result: "ok" }, 1);
  wakePhaseDurationSeconds.observe({ result: "ok" }, 1);
  lifecycleStateFailedObservedTotal.inc({ phase: "Pending" });
  slotReleasePodsDeletedTotal.inc({ namespace: "ns", cocoonset: "cs" });
  slotReleaseWakeTotal.inc({ namespace: "ns", cocoonset: "cs", placement: "hint-node" });
  slotReleaseWakeUnschedulableTotal.inc({ namespace: "ns", cocoonset: "cs" });
  const text = await reg.metrics();
  for (
    const line of [
      'cocoon_operator_subagent_rebuild_total{namespace="ns",cocoonset="cs"} 1',
      'cocoon_operator_subagent_dead_letter_total{namespace="ns",cocoonset="cs"} 1',
      'cocoon_operator_hibernate_phase_duration_seconds_bucket{le="10",result="ok"} 1',
      'cocoon_operator_wake_phase_duration_seconds_count{result="ok"} 1',
      'cocoon_operator_lifecycle_state_failed_observed_total{phase="Pending"} 1',
      'cocoon_operator_slot_release_pods_deleted_total{namespace="ns",cocoonset="cs"} 1',
      'cocoon_operator_slot_release_wake_total{namespace="ns",cocoonset="cs",placement="hint-node"} 1',
      'cocoon_operator_slot_release_wake_unschedulable_total{namespace="ns",cocoonset="cs"} 1',
    ]
  ) {
    assert.ok(text.includes(line), `missing ${line}`);
  }
  for (const le of ["10", "30", "60", "180", "600", "1800", "+Inf"]) {
    assert.ok(
      text.includes(`cocoon_operator_wake_phase_duration_seconds_bucket{le="${le}",result="ok"}`),
    );
  }
});
