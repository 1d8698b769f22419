import assert from "node:assert/strict";
import { FakeRegistry } from "./fake.ts";

Deno.test("fake stores, probes and deletes tags; deleting an absent tag succeeds", async () => {
  const reg = new FakeRegistry();
  reg.put("vm", "hibernate");
  reg.put("vm", "latest", "sha256:abc");
  assert.equal(await reg.hasManifest("vm", "hibernate"), true);
  await reg.deleteManifest("vm", "hibernate");
  await reg.deleteManifest("vm", "hibernate");
  await reg.deleteManifest("other", "latest");
  assert.equal(await reg.hasManifest("vm", "hibernate"), false);
  assert.deepEqual(reg.tagsOf("vm"), ["latest"]);
  assert.equal(reg.calls.length, 5);
  assert.deepEqual(reg.callsOf("deleteManifest", "vm").map((c) => c.reference), [
    "hibernate",
    "hibernate",
  ]);
});

Deno.test("fake injects faults per op, per name and for a number of calls", async () => {
  const reg = new FakeRegistry();
  reg.put("a", "hibernate");
  const boom = new Error("boom");
  reg.failNext("hasManifest", boom, { name: "a", times: 2 });
  await assert.rejects(reg.hasManifest("a", "hibernate"), boom);
  assert.equal(await reg.hasManifest("b", "hibernate"), false); // other name unaffected
  await reg.deleteManifest("a", "latest"); // other op unaffected
  await assert.rejects(reg.hasManifest("a", "hibernate"), boom);
  assert.equal(await reg.hasManifest("a", "hibernate"), true); // fault used up

  reg.failNext("deleteManifest", boom, { times: Infinity });
  await assert.rejects(reg.deleteManifest("x", "hibernate"), boom);
  await assert.rejects(reg.deleteManifest("y", "hibernate"), boom);
  reg.clearFaults();
  await reg.deleteManifest("x", "hibernate");
});

Deno.test("fake tracks in-flight calls per VM name while latency holds them", async () => {
  const gates: Array<() => void> = [];
  const reg = new FakeRegistry({
    latency: () => new Promise<void>((resolve) => gates.push(resolve)),
  });
  const p1 = reg.hasManifest("a", "hibernate");
  const p2 = reg.deleteManifest("a", "hibernate");
  const p3 = reg.hasManifest("b", "hibernate");
  await waitFor(() => gates.length === 3);
  assert.equal(reg.inFlight("a"), 2);
  assert.equal(reg.inFlight("b"), 1);
  for (const release of gates) release();
  await Promise.all([p1, p2, p3]);
  assert.equal(reg.inFlight("a"), 0);
  assert.equal(reg.maxInFlight("a"), 2);
  assert.equal(reg.maxInFlight("b"), 1);
  assert.equal(reg.maxInFlightTotal(), 3);
});

Deno.test("fake millisecond latency is abortable", async () => {
  const reg = new FakeRegistry({ latency: 60_000 });
  const ac = new AbortController();
  const p = reg.hasManifest("a", "latest", ac.signal);
  ac.abort(new Error("cancelled"));
  await assert.rejects(p, /cancelled/);
  assert.equal(reg.inFlight("a"), 0);
});

async function waitFor(cond: () => boolean, timeoutMs = 5_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!cond()) {
    if (Date.now() > deadline) throw new Error("condition not met before deadline");
    await new Promise((r) => setTimeout(r, 1));
  }
}
