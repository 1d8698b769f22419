import assert from "node:assert/strict";
import { defaultItemRateLimiter, ItemExponentialFailureRateLimiter } from "./rate_limiter.ts";

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

Deno.test("defaultItemRateLimiter: 5 ms doubling to 1000 s per item, no bucket", () => {
  const rl = defaultItemRateLimiter();
  assert.deepEqual([rl.when("a"), rl.when("a"), rl.when("a"), rl.when("a")], [5, 10, 20, 40]);
  // Past client-go's 100-token burst its overall bucket would answer 100 ms.
  for (let i = 0; i < 200; i++) assert.equal(rl.when(`other${i}`), 5);
  for (let i = 0; i < 40; i++) rl.when("a");
  assert.equal(rl.when("a"), 1_000_000);
});
