import assert from "node:assert/strict";
import { ConfigMaps, type Pod, Pods } from "../core.ts";
import { isNotFound, newApiError } from "../errors.ts";
import { FakeClient } from "./fake.ts";
import { staleCache } from "./stale_cache.ts";

const pod = (name: string, phase: NonNullable<Pod["status"]>["phase"]): Pod => ({
  metadata: { name, namespace: "ns" },
  spec: { containers: [{ name: "c" }] },
  status: { phase },
});

Deno.test("staleCache answers the chosen gets from its view, a fresh copy each time", async () => {
  const fake = new FakeClient();
  await fake.create(Pods, pod("p", "Running"));
  await fake.create(ConfigMaps, { metadata: { name: "cm", namespace: "ns" }, data: { a: "1" } });
  const shown = pod("p", "Pending");
  const cache = staleCache(fake, { get: (rt) => rt === Pods ? shown : undefined });

  const first = await cache.get(Pods, "ns", "p");
  assert.equal(first.status?.phase, "Pending", "the stale view, not the stored pod");
  first.status!.phase = "Failed";
  assert.equal((await cache.get(Pods, "ns", "p")).status?.phase, "Pending", "a copy per read");
  assert.deepEqual((await cache.get(ConfigMaps, "ns", "cm")).data, { a: "1" }, "others pass");
  assert.equal(fake.actions.filter((a) => a.verb === "get").length, 1, "only the pass-through");
});

Deno.test("staleCache lets a get hook derive its copy from the real read, or fail the read", async () => {
  const fake = new FakeClient();
  await fake.create(Pods, pod("p", "Running"));
  const derived = staleCache(fake, {
    get: async (_rt, _ns, _name, read) => ({ ...(await read()), status: { phase: "Unknown" } }),
  });
  const got = await derived.get(Pods, "ns", "p");
  assert.equal(got.metadata.name, "p");
  assert.equal((got as Pod).status?.phase, "Unknown");

  const missing = staleCache(fake, {
    get: () => {
      throw newApiError(404, "NotFound", { resource: "pods" }, "not in cache");
    },
  });
  await assert.rejects(missing.get(Pods, "ns", "p"), isNotFound);
});

Deno.test("staleCache answers the chosen lists and passes writes and other calls through", async () => {
  const fake = new FakeClient();
  const cache = staleCache(fake, {
    list: (rt) => rt === Pods ? [pod("old", "Running")] : undefined,
  });
  await cache.create(Pods, pod("new", "Pending"));
  const listed = await cache.list(Pods);
  assert.deepEqual(
    listed.items.map((p) => p.metadata.name),
    ["old"],
    "the cache missed the create",
  );
  assert.deepEqual(listed.metadata, {});
  assert.deepEqual((await fake.list(Pods)).items.map((p) => p.metadata.name), ["new"]);
  assert.deepEqual((await cache.list(ConfigMaps)).items, []);
  assert.equal((await cache.get(Pods, "ns", "new")).metadata.name, "new", "no get hook: real read");
});
