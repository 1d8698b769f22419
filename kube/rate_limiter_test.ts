import assert from "node:assert/strict";
import { FakeClock } from "./testing/fake_clock.ts";
import {
  BucketRateLimiter,
  defaultControllerRateLimiter,
  defaultItemRateLimiter,
  ItemExponentialFailureRateLimiter,
  MaxOfRateLimiter,
} from "./rate_limiter.ts";

Deno.test("exponential backoff doubles from 5 ms and caps at 1000 s", () => {
  const rl = new ItemExponentialFailureRateLimiter(5, 1_000_000);
  const delays = Array.from({ length: 20 }, () => rl.when("k"));
  assert.deepEqual(delays.slice(0, 6), [5, 10, 20, 40, 80, 160]);
  // 5·2^17 = 655 360 ms is the last step under the cap.
  assert.equal(delays[17], 655_360);
  assert.equal(delays[18], 1_000_000);
  assert.equal(delays[19], 1_000_000);
  assert.equal(rl.numRequeues("k"), 20);
  // Far past any float range the cap still holds.
  for (let i = 0; i < 2000; i++) rl.when("k");
  assert.equal(rl.when("k"), 1_000_000);
});

Deno.test("exponential backoff is per item and forget resets it", () => {
  const rl = new ItemExponentialFailureRateLimiter(5, 1_000_000);
  rl.when("a");
  rl.when("a");
  assert.equal(rl.when("b"), 5, "b has its own count");
  assert.equal(rl.when("a"), 20);
  rl.forget("a");
  assert.equal(rl.numRequeues("a"), 0);
  assert.equal(rl.when("a"), 5);
});

Deno.test("bucket: burst 100 immediately, then 100 ms spacing, refilled by time", () => {
  const clock = new FakeClock(50_000);
  const rl = new BucketRateLimiter(10, 100, clock);
  const burst = Array.from({ length: 100 }, (_, i) => rl.when(`k${i}`));
  assert.ok(burst.every((d) => d === 0));
  assert.deepEqual([rl.when("x"), rl.when("y"), rl.when("z")], [100, 200, 300]);
  // 1 s refills 10 tokens, paying back the 3 borrowed ones with 7 to spare.
  clock.advance(1000);
  const after = Array.from({ length: 8 }, () => rl.when("w"));
  assert.deepEqual(after, [0, 0, 0, 0, 0, 0, 0, 100]);
  assert.equal(rl.numRequeues("w"), 0);
});

Deno.test("max-of: exponential per item combined with the shared bucket", () => {
  const clock = new FakeClock();
  const rl = new MaxOfRateLimiter(
    new ItemExponentialFailureRateLimiter(5, 1_000_000),
    new BucketRateLimiter(10, 100, clock),
  );
  // 100 distinct failing keys: the bucket absorbs them, the per-item backoff rules.
  const first = Array.from({ length: 100 }, (_, i) => rl.when(`k${i}`));
  assert.ok(first.every((d) => d === 5));
  // From the 101st failure the bucket's spacing dominates.
  assert.equal(rl.when("k100"), 100);
  assert.equal(rl.when("k101"), 200);
  assert.equal(rl.numRequeues("k0"), 1);
  rl.forget("k0");
  assert.equal(rl.numRequeues("k0"), 0);
});

Deno.test("defaultControllerRateLimiter: 5 ms, 10 ms ... and the 10 qps bucket", () => {
  const clock = new FakeClock();
  const rl = defaultControllerRateLimiter(clock);
  assert.deepEqual([rl.when("a"), rl.when("a"), rl.when("a"), rl.when("a")], [5, 10, 20, 40]);
  for (let i = 0; i < 96; i++) rl.when(`other${i}`);
  assert.equal(rl.when("b"), 100);
});

Deno.test("defaultItemRateLimiter: 5 ms doubling to 1000 s per item, no bucket", () => {
  const rl = defaultItemRateLimiter();
  assert.deepEqual([rl.when("a"), rl.when("a"), rl.when("a"), rl.when("a")], [5, 10, 20, 40]);
  // Past the 100-token burst the bucket of defaultControllerRateLimiter would answer 100 ms.
  for (let i = 0; i < 200; i++) assert.equal(rl.when(`other${i}`), 5);
  for (let i = 0; i < 40; i++) rl.when("a");
  assert.equal(rl.when("a"), 1_000_000);
});
