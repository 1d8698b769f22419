/**
 * Idle is idle: a named queue (one with metrics) arms no timer while nothing is in flight, so
 * an operator with everything converged does not wake up every 500 ms per controller.
 */
import assert from "node:assert/strict";
import { PriorityQueue } from "./priority_queue.ts";
import { FakeClock } from "./testing/fake_clock.ts";
import { metricValue } from "./testing/metrics.ts";
import { WorkQueue } from "./workqueue.ts";

for (const kind of ["plain", "priority"] as const) {
  Deno.test(`${kind} queue: no metrics timer while idle; one while processing, stopping after the last done`, async () => {
    const clock = new FakeClock(1_000_000);
    const name = `idle-${kind}-test`;
    const labels = { name, controller: name };
    let done: () => void;
    let shutDown: () => void;
    if (kind === "plain") {
      const q = new WorkQueue<string>({ name, clock });
      assert.equal(clock.pendingTimers(), 0, "an idle queue has no timer");
      q.add("a");
      const key = (await q.get())!;
      done = () => q.done(key);
      shutDown = () => q.shutDown();
    } else {
      const q = new PriorityQueue<string>({ name, clock });
      assert.equal(clock.pendingTimers(), 0, "an idle queue has no timer");
      q.add("a");
      const key = (await q.get())!;
      done = () => q.done(key);
      shutDown = () => q.shutDown();
    }
    assert.equal(clock.pendingTimers(), 1, "in flight: the refresher runs");
    clock.advance(1000);
    assert.equal(await metricValue("workqueue_unfinished_work_seconds", labels), 1);
    done();
    clock.advance(500);
    assert.equal(await metricValue("workqueue_unfinished_work_seconds", labels), 0);
    assert.equal(clock.pendingTimers(), 0, "nothing in flight: no timer left");
    shutDown();
  });
}
