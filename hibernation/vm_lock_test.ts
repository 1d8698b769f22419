import assert from "node:assert/strict";
import { StripedLock, VM_LOCK_STRIPES } from "./vm_lock.ts";

Deno.test("keys on one stripe take turns in arrival order; other stripes run freely", async () => {
  const lock = new StripedLock();
  const order: string[] = [];
  const r1 = await lock.lock("vm-a");
  const second = lock.lock("vm-a").then((release) => {
    order.push("second");
    return release;
  });
  const third = lock.lock("vm-a").then((release) => {
    order.push("third");
    release();
  });
  // A key on a different stripe is not held up.
  let other = "";
  for (let i = 0; i < 1000 && !other; i++) {
    if (lock.stripeOf(`vm-${i}`) !== lock.stripeOf("vm-a")) other = `vm-${i}`;
  }
  (await lock.lock(other))();
  assert.deepEqual(order, []);
  r1();
  (await second)();
  await third;
  assert.deepEqual(order, ["second", "third"]);
});

Deno.test("an aborted waiter leaves the queue and the next waiter still gets the stripe", async () => {
  const lock = new StripedLock();
  const r1 = await lock.lock("vm");
  const ac = new AbortController();
  const aborted = lock.lock("vm", ac.signal);
  const next = lock.lock("vm");
  ac.abort(new Error("stop"));
  await assert.rejects(aborted, /stop/);
  r1();
  (await next)();
  const r = await lock.lock("vm");
  r();
  r(); // idempotent
});

Deno.test("stripes are bounded and deterministic", () => {
  const lock = new StripedLock();
  assert.equal(lock.stripes, VM_LOCK_STRIPES);
  const seen = new Set<number>();
  for (let i = 0; i < 5000; i++) {
    const s = lock.stripeOf(`vk-ns-demo-${i}`);
    assert.ok(s >= 0 && s < VM_LOCK_STRIPES);
    seen.add(s);
  }
  assert.equal(seen.size, VM_LOCK_STRIPES, "names spread over every stripe");
  assert.equal(lock.stripeOf("vk-ns-demo-0"), new StripedLock().stripeOf("vk-ns-demo-0"));
  assert.throws(() => new StripedLock(0));
});
