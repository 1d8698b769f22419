/**
 * The idle-CPU figure of a steady-state window, whole and split into its segments. A converged
 * operator is not idle at once: V8's memory reducer runs its full collections in the first ~30 s
 * after allocation goes quiet (measured per thread from /proc at 100 sets: ~160 ms in the first
 * 30 s of the window, on the main thread and V8's worker threads, then nothing in 10 ms ticks), so
 * one figure over the whole window mixes that once-only cost with the rate that lasts. The
 * segments show both; the last one is the rate an operator left alone keeps.
 *
 * @module
 */

/** The operator's cumulative CPU seconds read at a moment (performance.now() ms). */
export interface CpuSample {
  atMs: number;
  cpuSeconds: number;
}

/** CPU ms per wall-clock second between two samples (2 decimals; 0 for an empty span). */
export function cpuMsPerSecond(from: CpuSample, to: CpuSample): number {
  const wallMs = to.atMs - from.atMs;
  if (wallMs <= 0) return 0;
  return +((to.cpuSeconds - from.cpuSeconds) * 1e6 / wallMs).toFixed(2);
}

/** The whole window's rate and each consecutive segment's, from samples in time order. */
export function idleCpuFigures(samples: readonly CpuSample[]): {
  msPerSecond: number;
  segmentsMsPerSecond: number[];
} {
  if (samples.length < 2) return { msPerSecond: 0, segmentsMsPerSecond: [] };
  const segments: number[] = [];
  for (let i = 1; i < samples.length; i++) {
    segments.push(cpuMsPerSecond(samples[i - 1], samples[i]));
  }
  return {
    msPerSecond: cpuMsPerSecond(samples[0], samples[samples.length - 1]),
    segmentsMsPerSecond: segments,
  };
}
