import assert from "node:assert/strict";
import { flushMicrotasks } from "../kube/testing/mod.ts";
import { forEachLimited } from "./_fanout.ts";

/** A promise the test settles by hand. */
function gate(): { wait: Promise<void>; open: () => void } {
  let open = () => {};
  const wait = new Promise<void>((resolve) => open = resolve);
  return { wait, open };
}

Deno.test("forEachLimited keeps at most limit calls in flight and runs them all", async () => {
  const gates = [...Array(20)].map(gate);
  const started: number[] = [];
  const done: number[] = [];
  const run = forEachLimited(gates.map((_, i) => i), 8, new AbortController().signal, async (i) => {
    started.push(i);
    await gates[i].wait;
    done.push(i);
  });

  await flushMicrotasks();
  assert.deepEqual(started, [0, 1, 2, 3, 4, 5, 6, 7], "eight start, the ninth waits");
  gates[3].open();
  await flushMicrotasks();
  assert.deepEqual(started.slice(8), [8], "a finished call frees exactly one place");
  for (const g of gates) g.open();
  await run;
  assert.deepEqual(done.sort((a, b) => a - b), [...Array(20).keys()]);
});

Deno.test("forEachLimited stops starting calls after the first error and throws it", async () => {
  const held = gate();
  const started: number[] = [];
  let abortSeenInFlight = false;
  const run = forEachLimited([0, 1, 2, 3, 4, 5], 2, new AbortController().signal, async (i, s) => {
    started.push(i);
    if (i === 0) throw new Error("boom 0");
    await held.wait;
    abortSeenInFlight ||= s.aborted;
  });
  const outcome = assert.rejects(run, /boom 0/);

  await flushMicrotasks();
  held.open();
  await outcome;
  assert.deepEqual(started, [0, 1], "nothing starts after the failure");
  assert.equal(abortSeenInFlight, true, "the call in flight sees the group's signal aborted");
});

Deno.test("forEachLimited pulls work from an iterable as places free up, never ahead", async () => {
  let pulled = 0;
  function* endless(): Generator<number> {
    for (let i = 0;; i++) {
      pulled++;
      yield i;
    }
  }
  const stop = new AbortController();
  const g = gate();
  let calls = 0;
  const run = forEachLimited(endless(), 8, stop.signal, async () => {
    calls++;
    await g.wait;
    if (calls >= 20) throw new Error("enough");
  });
  await flushMicrotasks();
  assert.equal(pulled, 8, "eight items taken for eight places, the rest never built");
  g.open();
  await assert.rejects(run, /enough/);
  assert.ok(pulled <= 20 + 8, `${pulled} pulled`);
});
