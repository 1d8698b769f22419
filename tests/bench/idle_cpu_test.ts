import assert from "node:assert/strict";
import { cpuMsPerSecond, idleCpuFigures } from "./idle_cpu.ts";

Deno.test("idle_cpu: CPU ms per wall second between two samples", () => {
  assert.equal(cpuMsPerSecond({ atMs: 0, cpuSeconds: 1 }, { atMs: 60_000, cpuSeconds: 1.06 }), 1);
  assert.equal(cpuMsPerSecond({ atMs: 5, cpuSeconds: 1 }, { atMs: 5, cpuSeconds: 2 }), 0);
});

Deno.test("idle_cpu: a settling burst shows in the first segment, not in the last", () => {
  const samples = [
    { atMs: 0, cpuSeconds: 2 },
    { atMs: 30_000, cpuSeconds: 2.16 },
    { atMs: 60_000, cpuSeconds: 2.16 },
  ];
  const figures = idleCpuFigures(samples);
  assert.equal(figures.msPerSecond, 2.67);
  assert.deepEqual(figures.segmentsMsPerSecond, [5.33, 0]);
  assert.deepEqual(idleCpuFigures(samples.slice(0, 1)), {
    msPerSecond: 0,
    segmentsMsPerSecond: [],
  });
});
