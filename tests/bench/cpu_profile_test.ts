import assert from "node:assert/strict";
import { type CpuProfile, summarizeProfile } from "./cpu_profile.ts";

const ROOT = "file:///repo/";
const frame = (functionName: string, url = "", lineNumber = 0) => ({
  functionName,
  url,
  lineNumber,
});

Deno.test("cpu profile: self, file and inclusive seconds from the samples", () => {
  // root → main.ts:run → kube/a.ts:parse (recursing once) ; root → (idle)
  const profile: CpuProfile = {
    nodes: [
      { id: 1, callFrame: frame("(root)"), children: [2, 5] },
      { id: 2, callFrame: frame("run", `${ROOT}main.ts`, 9), children: [3] },
      { id: 3, callFrame: frame("parse", `${ROOT}kube/a.ts`, 0), children: [4] },
      { id: 4, callFrame: frame("parse", `${ROOT}kube/a.ts`, 0) },
      { id: 5, callFrame: frame("(idle)") },
    ],
    samples: [4, 3, 2, 5, 5],
    timeDeltas: [1_000_000, 500_000, 250_000, 2_000_000, 1_000_000],
  };
  const s = summarizeProfile(profile, { root: ROOT });
  assert.equal(s.totalSeconds, 4.75);
  assert.deepEqual(s.bySelf, [
    ["(idle)", 3],
    ["parse kube/a.ts:1", 1.5],
    ["run main.ts:10", 0.25],
  ]);
  assert.deepEqual(s.byFile, [["(idle)", 3], ["kube/a.ts", 1.5], ["main.ts", 0.25]]);
  // A recursive function counts once per sample; every sample counts toward (root).
  assert.deepEqual(s.inclusive, [
    ["(root)", 4.75],
    ["(idle)", 3],
    ["run main.ts:10", 1.75],
    ["parse kube/a.ts:1", 1.5],
  ]);
});
