import assert from "node:assert/strict";
import { FakeClock } from "./fake_clock.ts";

Deno.test("FakeClock fires due timers in deadline order, including ones scheduled meanwhile", () => {
  const clock = new FakeClock(1000);
  const fired: string[] = [];
  clock.setTimeout(() => fired.push(`b@${clock.now()}`), 20);
  clock.setTimeout(() => {
    fired.push(`a@${clock.now()}`);
    clock.setTimeout(() => fired.push(`c@${clock.now()}`), 5);
  }, 10);
  const cancelled = clock.setTimeout(() => fired.push("never"), 15);
  clock.clearTimeout(cancelled);
  clock.setTimeout(() => fired.push("late"), 100);
  clock.advance(30);
  assert.deepEqual(fired, ["a@1010", "c@1015", "b@1020"]);
  assert.equal(clock.now(), 1030);
  assert.equal(clock.pendingTimers(), 1);
  assert.equal(clock.nextDeadline(), 1100);
});
