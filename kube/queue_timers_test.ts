import assert from "node:assert/strict";
import { EarliestDeadlineTimer, UnfinishedWorkTicker } from "./queue_timers.ts";
import { FakeClock } from "./testing/fake_clock.ts";

Deno.test("the deadline timer keeps one timer, moving it only earlier", () => {
  const clock = new FakeClock(0);
  const fired: number[] = [];
  const timer = new EarliestDeadlineTimer(clock, () => fired.push(clock.now()));
  timer.arm(100);
  timer.arm(300);
  assert.equal(clock.pendingTimers(), 1);
  timer.arm(50);
  assert.equal(clock.pendingTimers(), 1, "the earlier deadline replaced the timer");
  clock.advance(60);
  assert.deepEqual(fired, [50]);
  assert.equal(clock.pendingTimers(), 0, "a fired timer is not re-armed by itself");
});

Deno.test("the deadline timer with nothing to wait for cancels", () => {
  const clock = new FakeClock(0);
  let fired = 0;
  const timer = new EarliestDeadlineTimer(clock, () => fired++);
  timer.arm(100);
  timer.arm(undefined);
  assert.equal(clock.pendingTimers(), 0);
  timer.arm(10);
  timer.cancel();
  clock.advance(1_000);
  assert.equal(fired, 0);
});

Deno.test("the deadline timer waits for a far deadline in steps within the timer range", () => {
  const clock = new FakeClock(0);
  const maxTimerMs = 2 ** 31 - 1;
  let fired = 0;
  const far = 3 * maxTimerMs;
  const timer = new EarliestDeadlineTimer(clock, () => {
    fired++;
    if (clock.now() < far) timer.arm(far);
  });
  timer.arm(far);
  clock.advance(maxTimerMs - 1);
  assert.equal(fired, 0, "no early fire from an overflowing timeout");
  clock.advance(1);
  assert.equal(fired, 1, "the first step ends at the timer range");
  // A deadline later than the running step keeps it.
  timer.arm(far + 10);
  assert.equal(clock.pendingTimers(), 1);
  clock.advance(2 * maxTimerMs);
  assert.equal(fired, 3);
  assert.equal(clock.pendingTimers(), 0);
});

Deno.test("the unfinished-work ticker refreshes while work is in flight, once more, then stops", () => {
  const clock = new FakeClock(0);
  const gauges = {
    inFlight: 1,
    refreshes: 0,
    updateUnfinishedWork() {
      this.refreshes++;
    },
  };
  const ticker = new UnfinishedWorkTicker(gauges, clock, 500);
  assert.equal(clock.pendingTimers(), 0, "idle: no timer until something is handed out");
  ticker.schedule();
  ticker.schedule();
  assert.equal(clock.pendingTimers(), 1, "one timer however many keys are handed out");
  clock.advance(1_000);
  assert.equal(gauges.refreshes, 2);
  gauges.inFlight = 0;
  clock.advance(500);
  assert.equal(gauges.refreshes, 3, "one more refresh brings the gauges back to 0");
  assert.equal(clock.pendingTimers(), 0, "nothing in flight: the timer stops");
  ticker.schedule();
  ticker.stop();
  assert.equal(clock.pendingTimers(), 0, "stop clears the timer");
  ticker.schedule();
  assert.equal(clock.pendingTimers(), 0, "a stopped ticker is not restarted");
});
