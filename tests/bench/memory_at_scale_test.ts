import assert from "node:assert/strict";
import { type FleetFigures, fleetSlope, leastSquares } from "./memory_at_scale.ts";

Deno.test("leastSquares: the line through points on a line, and the best line through scattered ones", () => {
  assert.deepEqual(leastSquares([{ x: 1, y: 3 }, { x: 2, y: 5 }, { x: 4, y: 9 }]), {
    slope: 2,
    intercept: 1,
  });
  // (0,0), (1,1), (2,1): slope 1/2, intercept 1/6.
  const fit = leastSquares([{ x: 0, y: 0 }, { x: 1, y: 1 }, { x: 2, y: 1 }]);
  assert.ok(Math.abs(fit.slope - 0.5) < 1e-12 && Math.abs(fit.intercept - 1 / 6) < 1e-12);
  assert.throws(() => leastSquares([{ x: 1, y: 1 }, { x: 1, y: 2 }]), /two different x/);
  assert.throws(() => leastSquares([{ x: 1, y: 1 }]), /two different x/);
});

Deno.test("fleetSlope: MiB per 1 000 managed pods for the peak and the settled resident set", () => {
  const size = (sets: number, peak: number, settled: number) =>
    ({ sets, pods: sets * 5, peakRssMiB: peak, settled: { rssMiB: settled } }) as FleetFigures;
  const slope = fleetSlope([size(1_000, 100, 80), size(5_000, 200, 150), size(10_000, 325, 237.5)]);
  assert.deepEqual(slope, {
    sets: [1_000, 5_000, 10_000],
    pods: [5_000, 25_000, 50_000],
    peakRssMiB: { mibPer1000Pods: 5, mibAtZeroPods: 75 },
    settledRssMiB: { mibPer1000Pods: 3.5, mibAtZeroPods: 62.5 },
  });
});
