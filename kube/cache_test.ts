import assert from "node:assert/strict";
import { byObject, type CacheOptions, InformerCache } from "./cache.ts";
import { type ConfigMap, ConfigMaps, Leases, type Pod, Pods } from "./core.ts";
import { isNotFound, newApiError } from "./errors.ts";
import type { KubeObject } from "./object.ts";
import { FakeClient } from "./testing/fake.ts";
import { waitFor } from "./testing/wait.ts";
import { staticShardFilter } from "./sharding/filter.ts";
import { fnv1a64 } from "./sharding/hash.ts";
import { HASH_SPACE_END, hashRange, setContains } from "./sharding/range.ts";

const OWNER = "cocoonset.cocoonstack.io/name";

function pod(name: string, labels: Record<string, string> = {}, namespace = "ns"): Pod {
  return {
    metadata: { name, namespace, labels, managedFields: [{ manager: "kubectl" }] },
    spec: { containers: [{ name: "agent", image: "img" }] },
  };
}

const managed = (name: string, namespace = "ns") => pod(name, { [OWNER]: "demo" }, namespace);

/** A started cache whose pod handlers record "add:name" ("add*" initial), "update:", "delete:". */
async function withScopedCache(
  fake: FakeClient,
  opts: Omit<CacheOptions, "client">,
  fn: (cache: InformerCache, seen: string[]) => Promise<void>,
): Promise<void> {
  const cache = new InformerCache({
    client: fake,
    informerDefaults: { minBackoffMs: 5, maxBackoffMs: 20 },
    ...opts,
  });
  const seen: string[] = [];
  cache.informerFor(Pods).addEventHandler({
    onAdd: (o, initial) => seen.push(`add${initial ? "*" : ""}:${o.metadata.name}`),
    onUpdate: (_o, n) => seen.push(`update:${n.metadata.name}`),
    onDelete: (o) => seen.push(`delete:${o.metadata.name}`),
  });
  const ac = new AbortController();
  cache.start(ac.signal);
  try {
    await cache.waitForSync(AbortSignal.timeout(5000));
    await fn(cache, seen);
  } finally {
    ac.abort();
    await cache.stopped();
  }
}

const names = (items: KubeObject[]) => items.map((o) => o.metadata.name);

Deno.test("cache: a label-scoped kind never stores or delivers objects outside its selector", async () => {
  const fake = new FakeClient();
  await fake.create(Pods, managed("a"));
  await fake.create(Pods, pod("u1"));
  await fake.create(Pods, pod("u2", { [OWNER + "-other"]: "x" }, "elsewhere"));
  await withScopedCache(
    fake,
    { byObject: [byObject(Pods, { labelSelector: OWNER })] },
    async (cache, seen) => {
      assert.deepEqual(seen, ["add*:a"]);
      assert.deepEqual(names([...cache.informerFor(Pods).listStored()]), ["a"]);

      // Changes to unrelated pods, then a managed pod as the marker: the same watch carries
      // them in order, so once the marker is heard the others were dropped, not pending.
      await fake.create(Pods, pod("u3"));
      await fake.patch(Pods, "ns", "u1", "merge", { metadata: { annotations: { x: "1" } } });
      await fake.delete(Pods, "elsewhere", "u2");
      await fake.create(Pods, managed("b", "elsewhere"));
      await waitFor("marker pod heard", () => seen.includes("add:b"));
      assert.deepEqual(seen, ["add*:a", "add:b"]);
      assert.equal(cache.informerFor(Pods).size, 2);

      // The selector went to the server with every list and watch (server-side filtering).
      const calls = fake.actions.filter((x) => x.resource === Pods && x.verb !== "create");
      const listsAndWatches = calls.filter((x) => x.verb === "list" || x.verb === "watch");
      assert.ok(listsAndWatches.length >= 2);
      for (const call of listsAndWatches) assert.equal(call.labelSelector, OWNER, call.verb);

      // Reads answer only from what the cache holds.
      assert.deepEqual(names((await cache.list(Pods)).items), ["b", "a"]);
      await assert.rejects(cache.get(Pods, "ns", "u1"), isNotFound);
      assert.deepEqual((await cache.list(Pods, { labelSelector: `!${OWNER}` })).items, []);
      assert.deepEqual(names((await fake.list(Pods, { labelSelector: `!${OWNER}` })).items), [
        "u1",
        "u3",
      ]);
    },
  );
});

Deno.test("cache: a pod whose label moves into the scope is added, and deleted when it leaves", async () => {
  const fake = new FakeClient();
  await fake.create(Pods, pod("p"));
  await withScopedCache(
    fake,
    { byObject: [byObject(Pods, { labelSelector: `${OWNER},role!=retired` })] },
    async (cache, seen) => {
      assert.equal(seen.length, 0);
      await fake.patch(Pods, "ns", "p", "merge", { metadata: { labels: { [OWNER]: "demo" } } });
      await waitFor("entered the scope", () => seen.includes("add:p"));
      assert.equal((await cache.get(Pods, "ns", "p")).metadata.labels?.[OWNER], "demo");

      await fake.patch(Pods, "ns", "p", "merge", { metadata: { labels: { role: "active" } } });
      await waitFor("changed inside the scope", () => seen.includes("update:p"));

      await fake.patch(Pods, "ns", "p", "merge", { metadata: { labels: { role: "retired" } } });
      await waitFor("left the scope", () => seen.includes("delete:p"));
      assert.deepEqual(seen, ["add:p", "update:p", "delete:p"]);
      await assert.rejects(cache.get(Pods, "ns", "p"), isNotFound);
      assert.equal(cache.informerFor(Pods).size, 0);
      // It still exists on the server.
      assert.equal((await fake.get(Pods, "ns", "p")).metadata.labels?.role, "retired");
    },
  );
});

Deno.test("cache: a pod leaving the scope leaves the field index with it", async () => {
  const fake = new FakeClient();
  await fake.create(Pods, { ...managed("a"), spec: { nodeName: "n1", containers: [] } });
  const cache = new InformerCache({
    client: fake,
    byObject: [byObject(Pods, { labelSelector: OWNER })],
  });
  cache.indexField(Pods, "spec.nodeName", (p) => p.spec?.nodeName ? [p.spec.nodeName] : []);
  const onNode = async () =>
    names((await cache.list(Pods, { matchingFields: { "spec.nodeName": "n1" } })).items);
  const ac = new AbortController();
  cache.start(ac.signal);
  try {
    await cache.waitForSync(AbortSignal.timeout(5000));
    assert.deepEqual(await onNode(), ["a"]);
    await fake.patch(Pods, "ns", "a", "merge", { metadata: { labels: { [OWNER]: null } } });
    await waitFor("left the scope", () => cache.informerFor(Pods).size === 0);
    assert.deepEqual(await onNode(), []);
    assert.deepEqual(cache.informerFor(Pods).byIndex("spec.nodeName", "n1"), []);
    await fake.patch(Pods, "ns", "a", "merge", { metadata: { labels: { [OWNER]: "demo" } } });
    await waitFor("back in the scope", () => cache.informerFor(Pods).size === 1);
    assert.deepEqual(await onNode(), ["a"]);
  } finally {
    ac.abort();
    await cache.stopped();
  }
});

Deno.test("cache: a pod that left the scope while the watch was down is deleted by the relist", async () => {
  const fake = new FakeClient();
  await fake.create(Pods, managed("stays"));
  await fake.create(Pods, managed("leaves"));
  await fake.create(Pods, pod("joins"));
  let blocked = false;
  fake.addReactor((x) =>
    blocked && x.verb === "watch"
      ? newApiError(503, "ServiceUnavailable", { resource: "pods" }, "down")
      : undefined
  );
  await withScopedCache(
    fake,
    { byObject: [byObject(Pods, { labelSelector: OWNER })] },
    async (cache, seen) => {
      // The watch opens after the sync; drop it only once it is open.
      await waitFor("watch open", () => fake.openWatches === 1);
      blocked = true;
      fake.closeWatches();
      await fake.patch(Pods, "ns", "leaves", "merge", { metadata: { labels: { [OWNER]: null } } });
      await fake.patch(Pods, "ns", "joins", "merge", { metadata: { labels: { [OWNER]: "demo" } } });
      fake.compact();
      blocked = false;
      await waitFor("gap delivered", () => seen.length === 4);
      assert.deepEqual(seen.slice(2).sort(), ["add:joins", "delete:leaves"]);
      assert.deepEqual(names((await cache.list(Pods)).items), ["joins", "stays"]);
      assert.equal(cache.informerFor(Pods).stats.relistsAfterGone, 1);
    },
  );
});

Deno.test("cache: a kind's transform runs after managedFields are stripped, on adds and updates", async () => {
  const fake = new FakeClient();
  await fake.create(Pods, managed("a"));
  await fake.create(ConfigMaps, {
    metadata: { name: "c", namespace: "ns", managedFields: [{ manager: "kubectl" }] },
    data: { k: "v" },
  });
  const transformed: string[] = [];
  const scope = byObject(Pods, {
    transform(p: Pod): Pod {
      transformed.push(`${p.metadata.name}:${p.metadata.managedFields ? "with" : "without"}`);
      delete p.spec;
      p.metadata.annotations = { ...p.metadata.annotations, trimmed: "yes" };
      return p;
    },
  });
  await withScopedCache(fake, { byObject: [scope] }, async (cache, seen) => {
    const a = await cache.get(Pods, "ns", "a");
    assert.equal(a.spec, undefined);
    assert.equal(a.metadata.annotations?.trimmed, "yes");
    assert.equal(a.metadata.managedFields, undefined);

    await fake.patch(Pods, "ns", "a", "merge", { metadata: { labels: { v: "2" } } });
    await waitFor("update heard", () => seen.includes("update:a"));
    const updated = await cache.get(Pods, "ns", "a");
    assert.equal(updated.metadata.labels?.v, "2");
    assert.equal(updated.spec, undefined);
    assert.deepEqual(transformed, ["a:without", "a:without"]);

    // Kinds without a scope keep the default: managedFields go, the rest stays.
    const c = await cache.get<ConfigMap>(ConfigMaps, "ns", "c");
    assert.deepEqual(c.data, { k: "v" });
    assert.equal(c.metadata.managedFields, undefined);
  });
});

Deno.test("cache: reads of a scoped kind return copies", async () => {
  const fake = new FakeClient();
  await fake.create(Pods, managed("a"));
  await withScopedCache(
    fake,
    { byObject: [byObject(Pods, { labelSelector: { [OWNER]: "demo" } })] },
    async (cache) => {
      const got = await cache.get(Pods, "ns", "a");
      got.metadata.labels![OWNER] = "mutated";
      const listed = (await cache.list(Pods)).items[0];
      listed.spec!.containers[0].image = "mutated";
      const again = await cache.get(Pods, "ns", "a");
      assert.equal(again.metadata.labels?.[OWNER], "demo");
      assert.equal(again.spec?.containers[0].image, "img");
      assert.equal(cache.informerFor(Pods).getStored("ns", "a")?.metadata.labels?.[OWNER], "demo");
    },
  );
});

Deno.test("cache: a field selector scopes the list and the watch", async () => {
  const fake = new FakeClient();
  await fake.create(Pods, { ...pod("on-n1"), spec: { containers: [], nodeName: "n1" } });
  await fake.create(Pods, { ...pod("on-n2"), spec: { containers: [], nodeName: "n2" } });
  await withScopedCache(
    fake,
    { byObject: [byObject(Pods, { fieldSelector: "spec.nodeName=n1" })] },
    async (cache, seen) => {
      assert.deepEqual(seen, ["add*:on-n1"]);
      await fake.create(Pods, { ...pod("late-n2"), spec: { containers: [], nodeName: "n2" } });
      await fake.create(Pods, { ...pod("late-n1"), spec: { containers: [], nodeName: "n1" } });
      await waitFor("marker heard", () => seen.includes("add:late-n1"));
      assert.deepEqual(seen, ["add*:on-n1", "add:late-n1"]);
      assert.deepEqual(names((await cache.list(Pods)).items), ["late-n1", "on-n1"]);
      const sent = fake.actions.filter((x) => x.verb === "list" || x.verb === "watch");
      for (const call of sent) assert.equal(call.fieldSelector, "spec.nodeName=n1", call.verb);
    },
  );
});

Deno.test("cache: configure is refused once the kind's informer exists, twice, or with bad syntax", () => {
  const cache = new InformerCache({
    client: new FakeClient(),
    byObject: [byObject(Pods, { labelSelector: OWNER })],
  });
  assert.throws(
    () => cache.configure(Pods, { labelSelector: "app=x" }),
    /cache scope of pods already configured/,
  );
  cache.informerFor(ConfigMaps);
  assert.throws(
    () => cache.configure(ConfigMaps, { labelSelector: "app=x" }),
    /cache scope of configmaps set after its informer was created/,
  );
  assert.throws(() => cache.configure(Leases, { labelSelector: "tier in ()" }), /invalid label/);
  // A refused scope leaves the kind unscoped and configurable.
  cache.configure(Leases, { labelSelector: "tier in (a)" });
  assert.throws(
    () =>
      new InformerCache({
        client: new FakeClient(),
        byObject: [byObject(Pods, {}), byObject(Pods, {})],
      }),
    /already configured/,
  );
  assert.throws(
    () =>
      new InformerCache({
        client: new FakeClient(),
        byObject: [byObject(Pods, { fieldSelector: "spec.nodeName" })],
      }),
    /invalid field selector/,
  );
});

Deno.test("cache: reads return copies, answer label selectors and registered field indexes", async () => {
  const fake = new FakeClient();
  await fake.create(Pods, pod("a", { app: "x" }));
  await fake.create(Pods, { ...pod("b", { app: "y" }), spec: { containers: [], nodeName: "n1" } });
  const cache = new InformerCache({ client: fake });
  cache.indexField(Pods, "spec.nodeName", (p) => p.spec?.nodeName ? [p.spec.nodeName] : []);
  const ac = new AbortController();
  cache.start(ac.signal);
  try {
    await cache.waitForSync(AbortSignal.timeout(5000));
    assert.ok(cache.hasSynced());
    const a = await cache.get(Pods, "ns", "a");
    a.metadata.labels!.app = "mutated";
    assert.equal((await cache.get(Pods, "ns", "a")).metadata.labels?.app, "x");
    const byLabel = await cache.list(Pods, { namespace: "ns", labelSelector: { app: "y" } });
    assert.deepEqual(byLabel.items.map((p) => p.metadata.name), ["b"]);
    const byNode = await cache.list(Pods, { matchingFields: { "spec.nodeName": "n1" } });
    assert.deepEqual(byNode.items.map((p) => p.metadata.name), ["b"]);
    const byName = await cache.list(Pods, { matchingFields: { "metadata.name": "a" } });
    assert.deepEqual(byName.items.map((p) => p.metadata.name), ["a"]);
    await assert.rejects(cache.list(Pods, { matchingFields: { "spec.unknown": "1" } }), /no index/);
    await assert.rejects(cache.get(Pods, "ns", "zzz"), /not found/);
    await fake.patch(Pods, "ns", "b", "merge", { spec: { nodeName: "n2" } });
    await waitFor(
      "index follows updates",
      async () =>
        (await cache.list(Pods, { matchingFields: { "spec.nodeName": "n2" } })).items.length === 1,
    );
    assert.equal(
      (await cache.list(Pods, { matchingFields: { "spec.nodeName": "n1" } })).items.length,
      0,
    );
  } finally {
    ac.abort();
    await cache.stopped();
  }
});

Deno.test("cache: a list in one namespace answers from that namespace only, as objects come and go", async () => {
  const fake = new FakeClient();
  const inNs = (ns: string, name: string, labels: Record<string, string> = {}) => ({
    ...pod(name, labels),
    metadata: { ...pod(name, labels).metadata, namespace: ns },
  });
  await fake.create(Pods, inNs("one", "a", { app: "x" }));
  await fake.create(Pods, inNs("two", "a", { app: "x" }));
  await fake.create(Pods, inNs("two", "b", { app: "y" }));
  const cache = new InformerCache({ client: fake });
  const ac = new AbortController();
  cache.start(ac.signal);
  const names = async (opts: Parameters<typeof cache.list<Pod>>[1]) =>
    (await cache.list(Pods, opts)).items.map((p) => `${p.metadata.namespace}/${p.metadata.name}`);
  try {
    await cache.waitForSync(AbortSignal.timeout(5000));
    assert.deepEqual(await names({ namespace: "two" }), ["two/a", "two/b"]);
    assert.deepEqual(await names({ namespace: "two", labelSelector: { app: "x" } }), ["two/a"]);
    assert.deepEqual(await names({ namespace: "three" }), []);
    assert.deepEqual(await names({}), ["one/a", "two/a", "two/b"]);
    await fake.create(Pods, inNs("three", "c"));
    await fake.delete(Pods, "two", "a");
    await waitFor(
      "the watch delivered both",
      async () => (await names({})).join() === "one/a,three/c,two/b",
    );
    assert.deepEqual(await names({ namespace: "two" }), ["two/b"]);
    assert.deepEqual(await names({ namespace: "three" }), ["three/c"]);
  } finally {
    ac.abort();
    await cache.stopped();
  }
});

Deno.test("holdsNamespace: every namespace, the one watched, or the shard's", () => {
  const client = new FakeClient();
  assert.equal(new InformerCache({ client }).holdsNamespace("any"), true);
  const one = new InformerCache({ client, namespace: "ns" });
  assert.equal(one.holdsNamespace("ns"), true);
  assert.equal(one.holdsNamespace("other"), false);
  // The two halves of the hash space: each namespace falls in exactly one, by its hash.
  const lowerHalf = [hashRange(0n, HASH_SPACE_END / 2n)];
  const lower = new InformerCache({ client, shard: staticShardFilter(lowerHalf) });
  const upper = new InformerCache({
    client,
    shard: staticShardFilter([hashRange(HASH_SPACE_END / 2n, HASH_SPACE_END)]),
  });
  for (const ns of ["team", "team-x", "team-x-prod", "kube-system", "default"]) {
    assert.notEqual(lower.holdsNamespace(ns), upper.holdsNamespace(ns), ns);
    assert.equal(lower.holdsNamespace(ns), setContains(lowerHalf, fnv1a64(ns)), ns);
  }
});
