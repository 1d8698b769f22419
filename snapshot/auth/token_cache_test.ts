import assert from "node:assert/strict";
import { TokenCache } from "./token_cache.ts";

Deno.test("token cache keeps a token until shortly before expires_in", () => {
  let now = 1_000_000;
  const cache = new TokenCache(() => now);
  cache.set(["repository:p/vm:pull"], "t1", 300);
  assert.equal(cache.get(["repository:p/vm:pull"]), "t1");
  assert.equal(cache.get(["repository:p/vm:push,pull,delete"]), undefined);
  now += 294_000;
  assert.equal(cache.get(["repository:p/vm:pull"]), "t1");
  now += 2_000; // inside the 5 s margin
  assert.equal(cache.get(["repository:p/vm:pull"]), undefined);
});

Deno.test("token cache defaults to 60 s when expires_in is missing or bogus", () => {
  let now = 0;
  const cache = new TokenCache(() => now);
  cache.set(["a"], "t", undefined);
  cache.set(["b"], "t", -3);
  now = 54_000;
  assert.equal(cache.get(["a"]), "t");
  assert.equal(cache.get(["b"]), "t");
  now = 56_000;
  assert.equal(cache.get(["a"]), undefined);
  assert.equal(cache.get(["b"]), undefined);
});

Deno.test("token cache keys are order-insensitive and invalidate drops one entry", () => {
  const cache = new TokenCache(() => 0);
  cache.set(["x", "y"], "xy", 100);
  cache.set(["z"], "z", 100);
  assert.equal(cache.get(["y", "x"]), "xy");
  cache.invalidate(["x", "y"]);
  assert.equal(cache.get(["x", "y"]), undefined);
  assert.equal(cache.get(["z"]), "z");
  cache.clear();
  assert.equal(cache.get(["z"]), undefined);
});

Deno.test("token cache shares one fetch between concurrent misses and caches the result", async () => {
  const cache = new TokenCache(() => 0);
  let calls = 0;
  let release!: () => void;
  const gate = new Promise<void>((r) => (release = r));
  const fetchToken = async () => {
    calls++;
    await gate;
    return { token: "shared", expiresIn: 100 };
  };
  const a = cache.getOrFetch(["s"], fetchToken);
  const b = cache.getOrFetch(["s"], fetchToken);
  release();
  assert.deepEqual(await Promise.all([a, b]), ["shared", "shared"]);
  assert.equal(await cache.getOrFetch(["s"], fetchToken), "shared");
  assert.equal(calls, 1);
});

Deno.test("token cache does not keep a failed fetch", async () => {
  const cache = new TokenCache(() => 0);
  await assert.rejects(cache.getOrFetch(["s"], () => Promise.reject(new Error("down"))), /down/);
  assert.equal(await cache.getOrFetch(["s"], () => Promise.resolve({ token: "ok" })), "ok");
});

Deno.test("token cache drops expired tokens of scopes nobody asks for again (VM churn)", () => {
  let now = 0;
  const cache = new TokenCache(() => now);
  for (let i = 0; i < 500; i++) cache.set([`repository:p/vm-${i}:pull`], `t${i}`, 60);
  assert.equal(cache.size, 500);
  now = 10 * 60_000;
  cache.set(["repository:p/new:pull"], "fresh", 60);
  assert.equal(cache.size, 1);
  assert.equal(cache.get(["repository:p/new:pull"]), "fresh");
});
