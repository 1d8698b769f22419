import assert from "node:assert/strict";
import { FakeClient } from "./fake.ts";
import { isForbidden, newApiError } from "../errors.ts";
import { expectGoneWatch, semanticsCases, Widgets } from "../../tests/semantics/api_semantics.ts";

// The same cases run against a real kube-apiserver in tests/integration/kube_runtime_test.ts and
// tests/integration/watch_cache_test.ts.
for (const c of semanticsCases) {
  Deno.test(`fake API semantics: ${c.name}`, async () => {
    const fake = new FakeClient();
    await c.fn(fake, "sem");
    assert.equal(fake.openWatches, 0, "watches are closed");
  });
}

Deno.test("fake: watch from a compacted resourceVersion gets 410", async () => {
  const fake = new FakeClient();
  const v1 = await fake.create(Widgets, {
    metadata: { name: "a", namespace: "ns" },
    spec: { agent: { image: "x" } },
  });
  await fake.patch(Widgets, "ns", "a", "merge", { metadata: { labels: { b: "c" } } });
  fake.compact();
  await expectGoneWatch(fake, "ns", v1.metadata.resourceVersion!);
});

Deno.test("fake: seeded objects keep their status", async () => {
  const fake = new FakeClient();
  fake.seed(Widgets, {
    metadata: { name: "s", namespace: "ns" },
    spec: { agent: { image: "x" } },
    status: { phase: "Running" },
  });
  const got = await fake.get(Widgets, "ns", "s");
  assert.equal(got.status?.phase, "Running");
  assert.equal(got.metadata.generation, 1);
});

Deno.test("fake: reactors inject faults and actions are recorded", async () => {
  const fake = new FakeClient();
  const remove = fake.addReactor((a) =>
    a.verb === "create"
      ? newApiError(403, "Forbidden", { resource: "cocoonsets", name: a.name }, "no")
      : undefined
  );
  await assert.rejects(
    fake.create(Widgets, {
      metadata: { name: "f", namespace: "ns" },
      spec: { agent: { image: "x" } },
    }),
    isForbidden,
  );
  remove();
  await fake.create(Widgets, {
    metadata: { name: "f", namespace: "ns" },
    spec: { agent: { image: "x" } },
  });
  assert.deepEqual(fake.actions.map((a) => a.verb), ["create", "create"]);
});

Deno.test("fake: closeWatches ends open streams; bookmarks carry the resourceVersion", async () => {
  const fake = new FakeClient();
  const ac = new AbortController();
  const it = fake.watch(Widgets, {
    namespace: "ns",
    resourceVersion: fake.resourceVersion,
    allowWatchBookmarks: true,
    signal: ac.signal,
  })[
    Symbol.asyncIterator
  ]();
  const first = it.next();
  await fake.create(Widgets, {
    metadata: { name: "b", namespace: "ns" },
    spec: { agent: { image: "x" } },
  });
  assert.equal((await first).value?.type, "ADDED");
  const second = it.next();
  fake.sendBookmarks();
  const bm = (await second).value;
  assert.equal(bm?.type, "BOOKMARK");
  assert.equal(bm?.object.metadata.resourceVersion, fake.resourceVersion);
  const third = it.next();
  fake.closeWatches();
  assert.equal((await third).done, true);
  assert.equal(fake.openWatches, 0);
  ac.abort();
});

Deno.test("fake: watch without resourceVersion replays current objects first", async () => {
  const fake = new FakeClient();
  await fake.create(Widgets, {
    metadata: { name: "x", namespace: "ns" },
    spec: { agent: { image: "x" } },
  });
  const ac = new AbortController();
  const it = fake.watch(Widgets, { namespace: "ns", signal: ac.signal })[Symbol.asyncIterator]();
  const ev = await it.next();
  assert.equal(ev.value?.type, "ADDED");
  ac.abort();
  assert.equal((await it.next()).done, true);
});

Deno.test("fake: a recorded write keeps the object as sent, whatever the caller does later", async () => {
  const fake = new FakeClient();
  const w = { metadata: { name: "r", namespace: "ns" }, spec: { agent: { image: "x" } } };
  const created = await fake.create(Widgets, w);
  w.spec.agent.image = "changed after create";
  created.spec.agent.image = "y";
  const updated = await fake.update(Widgets, created);
  created.spec.agent.image = "changed after update";
  const withStatus = { ...updated, status: { phase: "Running" } };
  await fake.updateStatus(Widgets, withStatus);
  withStatus.metadata.name = "changed after updateStatus";
  assert.deepEqual(
    fake.actions.map((
      a,
    ) => [a.verb, a.subresource ?? "", (a.object as { spec?: unknown } | undefined)?.spec]),
    [
      ["create", "", { agent: { image: "x" } }],
      ["update", "", { agent: { image: "y" } }],
      ["update", "status", { agent: { image: "y" } }],
    ],
  );
  assert.equal(fake.actions[2].object?.metadata.name, "r");
});

Deno.test("fake: every dry-run write is recorded as one and stores nothing", async () => {
  const fake = new FakeClient();
  const spec = { agent: { image: "x" } };
  const w = await fake.create(Widgets, { metadata: { name: "d", namespace: "ns" }, spec });
  const changed = { ...w, spec: { agent: { image: "y" } } };
  await fake.create(Widgets, { metadata: { name: "e", namespace: "ns" }, spec }, { dryRun: true });
  await fake.update(Widgets, changed, { dryRun: true });
  await fake.updateStatus(Widgets, { ...w, status: { phase: "Running" } }, { dryRun: true });
  await fake.patch(Widgets, "ns", "d", "merge", { spec: { agent: { image: "z" } } }, {
    dryRun: true,
  });
  assert.deepEqual(
    fake.actions.map((a) => [a.verb, a.subresource ?? "", a.dryRun ?? false]),
    [
      ["create", "", false],
      ["create", "", true],
      ["update", "", true],
      ["update", "status", true],
      ["patch", "", true],
    ],
  );
  assert.deepEqual(await fake.get(Widgets, "ns", "d"), w);
  assert.equal((await fake.list(Widgets, { namespace: "ns" })).items.length, 1);
});
