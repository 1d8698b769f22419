import assert from "node:assert/strict";
import { FakeClient } from "./testing/fake.ts";
import { type Pod, Pods } from "./core.ts";
import { newApiError } from "./errors.ts";
import { SharedInformer } from "./informer.ts";
import { FakeClock } from "./testing/fake_clock.ts";
import { pod, withInformer } from "./testing/informer_fixtures.ts";
import { waitFor } from "./testing/wait.ts";
import { ListWatcher, type WatcherEvent } from "./watcher.ts";

// The watcher's behaviour seen through the informer that composes it (these tests moved here
// from informer_test.ts with their assertions), then the watcher alone, by the events it emits.

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

/** Runs a watcher of fake's pods, recording its events as "type" or "type:name". */
async function withWatcher(
  fake: FakeClient,
  opts: Partial<ConstructorParameters<typeof ListWatcher<Pod>>[0]>,
  fn: (w: ListWatcher<Pod>, events: string[]) => Promise<void>,
) {
  const w = new ListWatcher<Pod>({ client: fake, rt: Pods, minBackoffMs: 5, ...opts });
  const events: string[] = [];
  const emit = (ev: WatcherEvent<Pod>) =>
    events.push("object" in ev ? `${ev.type}:${ev.object.metadata.name}` : ev.type);
  const ac = new AbortController();
  const run = w.run(ac.signal, emit);
  try {
    await fn(w, events);
  } finally {
    ac.abort();
    await run;
  }
}

Deno.test("watcher: LIST then WATCH reports one complete state, then single changes", async () => {
  const fake = new FakeClient();
  await fake.create(Pods, pod("a"));
  await fake.create(Pods, pod("b"));
  await withWatcher(fake, {}, async (w, events) => {
    await waitFor("state complete", () => events.includes("initDone"));
    assert.deepEqual(events, ["initStart", "initApply:a", "initApply:b", "initDone"]);
    assert.equal(w.stats.lists, 1);
    assert.equal(w.stats.lastResourceVersion, fake.resourceVersion);
    await fake.create(Pods, pod("c"));
    await fake.patch(Pods, "ns", "a", "merge", { metadata: { labels: { x: "1" } } });
    await fake.delete(Pods, "ns", "b");
    await waitFor("changes reported", () => events.length === 7);
    assert.deepEqual(events.slice(4), ["apply:c", "apply:a", "delete:b"]);
    await waitFor(
      "resourceVersion followed",
      () => w.stats.lastResourceVersion === fake.resourceVersion,
    );
  });
});

Deno.test("watcher: a paged LIST is still one complete state", async () => {
  const fake = new FakeClient();
  for (const n of ["a", "b", "c", "d", "e"]) await fake.create(Pods, pod(n));
  await withWatcher(fake, { pageSize: 2 }, async (_w, events) => {
    await waitFor("state complete", () => events.includes("initDone"));
    assert.deepEqual(events, [
      "initStart",
      ...["a", "b", "c", "d", "e"].map((n) => `initApply:${n}`),
      "initDone",
    ]);
    assert.equal(fake.actions.filter((a) => a.verb === "list").length, 3);
  });
});

Deno.test("watcher: a watch-list stream reports its initial events as one complete state", async () => {
  const fake = new FakeClient();
  await fake.create(Pods, pod("a"));
  await withWatcher(fake, { watchList: true }, async (w, events) => {
    await waitFor("state complete", () => events.includes("initDone"));
    assert.deepEqual(events, ["initStart", "initApply:a", "initDone"]);
    await fake.create(Pods, pod("b"));
    await waitFor("change reported", () => events.includes("apply:b"));
    assert.equal(w.stats.watchListSyncs, 1);
    assert.equal(w.stats.lists, 0);
  });
});

Deno.test("watcher: its scope (namespace and selectors) goes with the list and the watch alike", async () => {
  const fake = new FakeClient();
  await fake.create(Pods, pod("in", { app: "x" }));
  await fake.create(Pods, pod("out", { app: "y" }));
  const scope = { namespace: "ns", labelSelector: { app: "x" }, fieldSelector: "metadata.name=in" };
  await withWatcher(fake, scope, async (_w, events) => {
    await waitFor("watching", () => fake.actions.some((a) => a.verb === "watch"));
    assert.deepEqual(events, ["initStart", "initApply:in", "initDone"]);
    const sent = fake.actions
      .filter((a) => a.verb === "list" || a.verb === "watch")
      .map((a) => [a.verb, a.namespace, a.labelSelector, a.fieldSelector]);
    assert.deepEqual(sent, [
      ["list", "ns", "app=x", "metadata.name=in"],
      ["watch", "ns", "app=x", "metadata.name=in"],
    ]);
  });
});
