import assert from "node:assert/strict";
import { FakeClient } from "./testing/fake.ts";
import { InformerCache } from "./cache.ts";
import { type Pod, Pods } from "./core.ts";
import { newApiError } from "./errors.ts";
import { SharedInformer } from "./informer.ts";
import { FakeClock } from "./testing/fake_clock.ts";
import type { KubeObject } from "./object.ts";
import { waitFor } from "./testing/wait.ts";

function pod(name: string, labels: Record<string, string> = {}): Pod {
  return {
    metadata: { name, namespace: "ns", labels, managedFields: [{ manager: "kubectl" }] },
    spec: { containers: [{ name: "agent", image: "img" }] },
  };
}

/** Records handler calls as "add:name", "update:name", "delete:name". */
function recorder() {
  const seen: string[] = [];
  return {
    seen,
    handler: {
      onAdd: (o: KubeObject, initial: boolean) =>
        seen.push(`add${initial ? "*" : ""}:${o.metadata.name}`),
      onUpdate: (_o: KubeObject, n: KubeObject) => seen.push(`update:${n.metadata.name}`),
      onDelete: (o: KubeObject) => seen.push(`delete:${o.metadata.name}`),
    },
  };
}

async function withInformer(
  fake: FakeClient,
  fn: (inf: SharedInformer<Pod>, seen: string[]) => Promise<void>,
) {
  const inf = new SharedInformer({ client: fake, rt: Pods, minBackoffMs: 5, maxBackoffMs: 20 });
  const rec = recorder();
  inf.addEventHandler(rec.handler);
  const ac = new AbortController();
  const run = inf.run(ac.signal);
  try {
    await inf.waitForSync(AbortSignal.timeout(5000));
    await fn(inf, rec.seen);
  } finally {
    ac.abort();
    await run;
  }
}

Deno.test("informer: initial list is delivered as initial adds, managedFields stripped", async () => {
  const fake = new FakeClient();
  await fake.create(Pods, pod("a"));
  await fake.create(Pods, pod("b"));
  await withInformer(fake, async (inf, seen) => {
    assert.deepEqual(seen, ["add*:a", "add*:b"]);
    assert.equal(inf.getStored("ns", "a")?.metadata.managedFields, undefined);
    await fake.create(Pods, pod("c"));
    await waitFor("c added", () => seen.includes("add:c"));
  });
});

Deno.test("informer: a dropped watch resumes from its resourceVersion without relisting or repeats", async () => {
  const fake = new FakeClient();
  await fake.create(Pods, pod("a"));
  await withInformer(fake, async (inf, seen) => {
    fake.closeWatches();
    await fake.patch(Pods, "ns", "a", "merge", { metadata: { labels: { x: "1" } } });
    await waitFor("update seen", () => seen.includes("update:a"));
    fake.closeWatches();
    await fake.patch(Pods, "ns", "a", "merge", { metadata: { labels: { x: "2" } } });
    await waitFor("second update", () => seen.filter((s) => s === "update:a").length === 2);
    assert.deepEqual(seen, ["add*:a", "update:a", "update:a"]);
    assert.equal(inf.stats.lists, 1);
    assert.equal(inf.getStored("ns", "a")?.metadata.labels?.x, "2");
  });
});

Deno.test("informer: 410 Gone relists and reports exactly what changed in the gap", async () => {
  const fake = new FakeClient();
  await fake.create(Pods, pod("keep"));
  await fake.create(Pods, pod("change"));
  await fake.create(Pods, pod("remove"));
  // Hold the watch down while the gap happens: every watch attempt fails until released.
  let blocked = false;
  fake.addReactor((a) =>
    blocked && a.verb === "watch"
      ? newApiError(503, "ServiceUnavailable", { resource: "pods" }, "down")
      : undefined
  );
  await withInformer(fake, async (inf, seen) => {
    blocked = true;
    fake.closeWatches();
    await fake.patch(Pods, "ns", "change", "merge", { metadata: { labels: { v: "2" } } });
    await fake.delete(Pods, "ns", "remove");
    await fake.create(Pods, pod("new"));
    fake.compact();
    blocked = false;
    await waitFor(
      "relist after 410",
      () => inf.stats.relistsAfterGone === 1 && inf.stats.lists === 2,
    );
    await waitFor("gap delivered", () => seen.length === 6);
    assert.deepEqual(seen.slice(3).sort(), ["add:new", "delete:remove", "update:change"]);
    assert.deepEqual([...inf.listStored()].map((p) => p.metadata.name).sort(), [
      "change",
      "keep",
      "new",
    ]);
  });
});

Deno.test("informer: list errors back off and retry until the list succeeds", async () => {
  const fake = new FakeClient();
  await fake.create(Pods, pod("a"));
  let failures = 3;
  fake.addReactor((a) =>
    a.verb === "list" && failures-- > 0
      ? newApiError(500, "InternalError", { resource: "pods" }, "boom")
      : undefined
  );
  await withInformer(fake, (inf) => {
    assert.equal(inf.size, 1);
    assert.equal(fake.actions.filter((a) => a.verb === "list").length, 4);
    return Promise.resolve();
  });
});

Deno.test("informer: a throwing handler does not starve the others", async () => {
  const fake = new FakeClient();
  const inf = new SharedInformer({ client: fake, rt: Pods });
  inf.addEventHandler({
    onAdd: () => {
      throw new Error("bad handler");
    },
  });
  const rec = recorder();
  inf.addEventHandler(rec.handler);
  const ac = new AbortController();
  const run = inf.run(ac.signal);
  await fake.create(Pods, pod("a"));
  await waitFor("second handler ran", () => rec.seen.length === 1);
  ac.abort();
  await run;
});

Deno.test("informer: handlers added after sync get the current objects", async () => {
  const fake = new FakeClient();
  await fake.create(Pods, pod("a"));
  await withInformer(fake, (inf) => {
    const rec = recorder();
    inf.addEventHandler(rec.handler);
    assert.deepEqual(rec.seen, ["add*:a"]);
    return Promise.resolve();
  });
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

Deno.test("informer: a non-410 ERROR event makes the next attempt relist", async () => {
  const fake = new FakeClient();
  await fake.create(Pods, pod("a"));
  let injected = false;
  const real = fake.watch.bind(fake);
  fake.watch = ((rt, opts) => {
    if (injected) return real(rt, opts);
    injected = true;
    return (async function* () {
      yield {
        type: "ERROR" as const,
        object: {
          kind: "Status" as const,
          code: 500,
          reason: "InternalError",
          message: "prevKv nil",
        },
      };
    })();
  }) as typeof fake.watch;
  await withInformer(fake, async (inf) => {
    await waitFor("relisted", () => inf.stats.lists === 2);
    assert.equal(inf.stats.relistsAfterGone, 0);
  });
});

Deno.test("informer: a handler added by a handler mid-dispatch hears each object once", async () => {
  const fake = new FakeClient();
  await fake.create(Pods, pod("a"));
  const late = recorder();
  await withInformer(fake, async (inf) => {
    inf.addEventHandler({
      onAdd: (o) => {
        if (o.metadata.name === "trigger") inf.addEventHandler(late.handler);
      },
    });
    await fake.create(Pods, pod("trigger"));
    await waitFor("late handler registered", () => late.seen.length > 0);
    await fake.create(Pods, pod("after"));
    await waitFor("later event delivered", () => late.seen.includes("add:after"));
    // The late handler is replayed the store (which already holds "trigger") and must not
    // also receive the event that was being dispatched when it registered.
    assert.deepEqual(late.seen, ["add*:a", "add*:trigger", "add:after"]);
  });
});

Deno.test("informer: a stream that failed after delivering events retries at the minimum backoff", async () => {
  const fake = new FakeClient();
  await fake.create(Pods, pod("a"));
  const clock = new FakeClock();
  const real = fake.watch.bind(fake);
  let watches = 0;
  fake.watch = ((rt, opts) => {
    const n = watches++;
    if (n < 6) {
      // The API server is unreachable for a while: the backoff grows to 6.4 s.
      return {
        [Symbol.asyncIterator]: () => ({
          next: () => Promise.reject(new TypeError("connection refused")),
        }),
      };
    }
    if (n === 6) {
      // It comes back: the stream is healthy for a while, then the connection resets.
      return (async function* () {
        yield {
          type: "BOOKMARK" as const,
          object: { metadata: { resourceVersion: fake.resourceVersion } } as Pod,
        };
        throw new TypeError("connection reset");
      })();
    }
    return real(rt, opts);
  }) as typeof fake.watch;
  const inf = new SharedInformer({
    client: fake,
    rt: Pods,
    clock,
    minBackoffMs: 100,
    maxBackoffMs: 100_000,
    watchTimeoutSeconds: () => 0,
  });
  const ac = new AbortController();
  const run = inf.run(ac.signal);
  try {
    for (let i = 0; i < 6; i++) {
      await waitFor(`backoff ${i} scheduled`, () => clock.pendingTimers() === 1);
      clock.advance(clock.nextDeadline()! - clock.now());
    }
    await waitFor(
      "mid-stream failure backed off",
      () => watches === 7 && clock.pendingTimers() === 1,
    );
    const wait = clock.nextDeadline()! - clock.now();
    assert.ok(wait < 200, `a healthy stream resets the backoff; waiting ${wait} ms`);
  } finally {
    ac.abort();
    await run;
  }
});

Deno.test("informer: an expired continue token falls back to one full list", async () => {
  const fake = new FakeClient();
  for (const n of ["a", "b", "c", "d", "e"]) await fake.create(Pods, pod(n));
  const real = fake.list.bind(fake);
  const calls: { limit?: number; continue?: string }[] = [];
  let expired = false;
  fake.list = ((rt, opts) => {
    calls.push({ limit: opts?.limit, continue: opts?.continue });
    if (opts?.continue && !expired) {
      // etcd compacted the snapshot between two pages.
      expired = true;
      return Promise.reject(
        newApiError(410, "Expired", { resource: "pods" }, "continue parameter is too old"),
      );
    }
    return real(rt, opts);
  }) as typeof fake.list;
  const inf = new SharedInformer({ client: fake, rt: Pods, pageSize: 2, minBackoffMs: 5 });
  const ac = new AbortController();
  const run = inf.run(ac.signal);
  try {
    await inf.waitForSync(AbortSignal.timeout(5000));
    assert.equal(inf.size, 5);
    // Like client-go's pager: the second attempt lists everything in one request instead of
    // paging again into the same expiry.
    assert.deepEqual(calls, [
      { limit: 2, continue: undefined },
      { limit: 2, continue: calls[1].continue },
      { limit: undefined, continue: undefined },
    ]);
    assert.ok(calls[1].continue);
  } finally {
    ac.abort();
    await run;
  }
});

Deno.test("informer: a list answering 410 backs off instead of relisting in a tight loop", async () => {
  const fake = new FakeClient();
  await fake.create(Pods, pod("a"));
  const clock = new FakeClock();
  const real = fake.list.bind(fake);
  let lists = 0;
  fake.list = ((rt, opts) => {
    if (lists++ === 0) {
      return Promise.reject(newApiError(410, "Gone", { resource: "pods" }, "misbehaving proxy"));
    }
    return real(rt, opts);
  }) as typeof fake.list;
  const inf = new SharedInformer({
    client: fake,
    rt: Pods,
    clock,
    minBackoffMs: 100,
    watchTimeoutSeconds: () => 0,
  });
  const ac = new AbortController();
  const run = inf.run(ac.signal);
  try {
    await waitFor("backoff scheduled", () => clock.pendingTimers() === 1);
    assert.equal(lists, 1, "no second list before the backoff elapsed");
    clock.advance(clock.nextDeadline()! - clock.now());
    await inf.waitForSync(AbortSignal.timeout(5000));
    assert.equal(inf.size, 1);
  } finally {
    ac.abort();
    await run;
  }
});

Deno.test("informer: a watch call that throws synchronously is retried like a rejected one", async () => {
  const fake = new FakeClient();
  await fake.create(Pods, pod("a"));
  const real = fake.watch.bind(fake);
  let calls = 0;
  fake.watch = ((rt, opts) => {
    if (calls++ === 0) throw new TypeError("bad URL");
    return real(rt, opts);
  }) as typeof fake.watch;
  await withInformer(fake, async (inf, seen) => {
    await fake.create(Pods, pod("b"));
    await waitFor("watch recovered", () => seen.includes("add:b"));
    assert.equal(calls, 2);
    assert.equal(inf.stats.lists, 1, "a failed watch call does not relist");
  });
});

Deno.test("informer: DELETED for an object it never stored is ignored", async () => {
  const fake = new FakeClient();
  await fake.create(Pods, pod("a"));
  const real = fake.watch.bind(fake);
  let first = true;
  fake.watch = ((rt, opts) => {
    if (!first) return real(rt, opts);
    first = false;
    return (async function* () {
      yield {
        type: "DELETED" as const,
        object: { ...pod("ghost"), apiVersion: "v1", kind: "Pod" },
      };
      yield* real(rt, opts);
    })();
  }) as typeof fake.watch;
  await withInformer(fake, async (inf, seen) => {
    await fake.create(Pods, pod("b"));
    await waitFor("later event", () => seen.includes("add:b"));
    assert.deepEqual(seen, ["add*:a", "add:b"]);
    assert.equal(inf.size, 2);
  });
});
