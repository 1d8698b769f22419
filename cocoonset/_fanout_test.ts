import assert from "node:assert/strict";
import { forEachLimited } from "./_fanout.ts";

Deno.test("forEachLimited keeps at most limit calls in flight and runs them all", async () => {
  let inFlight = 0;
  let peak = 0;
  const seen: number[] = [];
  await forEachLimited([...Array(20).keys()], 8, new AbortController().signal, async (i) => {
    inFlight++;
    peak = Math.max(peak, inFlight);
    await new Promise((r) => setTimeout(r, 1));
    seen.push(i);
    inFlight--;
  });
  assert.equal(peak, 8);
  assert.deepEqual(seen.sort((a, b) => a - b), [...Array(20).keys()]);
});

Deno.test("forEachLimited stops starting calls after the first error and throws it", async () => {
  const started: number[] = [];
  let abortedSeen = false;
  await assert.rejects(
    forEachLimited([0, 1, 2, 3, 4, 5], 2, new AbortController().signal, async (i, signal) => {
      started.push(i);
      if (i === 0) throw new Error("boom 0");
      await new Promise((r) => setTimeout(r, 5));
      abortedSeen ||= signal.aborted;
    }),
    /boom 0/,
  );
  assert.deepEqual(started, [0, 1]);
  assert.equal(abortedSeen, true);
});
