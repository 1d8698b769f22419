/**
 * The phase-duration histograms (docs/hibernation.md, "Metrics"): how long a request spent
 * Hibernating or Waking, observed once when that phase ends, `ok` (Hibernated, Active) or
 * `timeout`. A request that never passed through the phase observes nothing.
 *
 * @module
 */
import { COCOON_HIBERNATION_PHASE_HIBERNATING } from "../common/apis/v1/mod.ts";
import { hibernatePhaseDurationSeconds, wakePhaseDurationSeconds } from "../metrics/metrics.ts";

/** The phase a written status left, and when that phase had been entered. */
export interface LeftPhase {
  phase: string | undefined;
  enteredAtMs: number | undefined;
}

/**
 * Observes the time spent in phase (Hibernating or Waking) when left is that phase with a known
 * clock; nothing otherwise.
 */
export function observePhaseExit(
  left: LeftPhase,
  phase: string,
  result: "ok" | "timeout",
  nowMs: number,
): void {
  if (left.phase !== phase || left.enteredAtMs === undefined) return;
  const seconds = Math.max(0, (nowMs - left.enteredAtMs) / 1000);
  const histogram = phase === COCOON_HIBERNATION_PHASE_HIBERNATING
    ? hibernatePhaseDurationSeconds
    : wakePhaseDurationSeconds;
  histogram.observe({ result }, seconds);
}
