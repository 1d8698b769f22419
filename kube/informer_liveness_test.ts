/**
 * The informer's watch-list sync (the initial state streamed over the watch, LIST + WATCH as
 * the fallback) and its watch liveness (a client-side deadline past the server timeout, and
 * the progress figure behind the manager's /healthz check), on the fake API.
 */
import assert from "node:assert/strict";
import type { Client, WatchEvent, WatchOptions } from "./client.ts";
import { type Pod, Pods } from "./core.ts";
import { SharedInformer } from "./informer.ts";
import { Manager } from "./manager.ts";
import type { KubeObject } from "./object.ts";
import type { ResourceType } from "./resource.ts";
import { FakeClient } from "./testing/fake.ts";
import { FakeClock } from "./testing/fake_clock.ts";
import { flushMicrotasks, waitFor } from "./testing/wait.ts";

function pod(name: string): Pod {
  return {
    metadata: { name, namespace: "ns", managedFields: [{ manager: "kubectl" }] },
    spec: { containers: [{ name: "agent", image: "img" }] },
  };
}

function recorded(inf: SharedInformer<Pod>): string[] {
  const seen: string[] = [];
  inf.addEventHandler({
    onAdd: (o, initial) => seen.push(`add${initial ? "*" : ""}:${o.metadata.name}`),
    onUpdate: (_o, n) => seen.push(`update:${n.metadata.name}`),
    onDelete: (o) => seen.push(`delete:${o.metadata.name}`),
  });
  return seen;
}

async function running(inf: SharedInformer<Pod>, fn: () => Promise<void>): Promise<void> {
  const ac = new AbortController();
  const run = inf.run(ac.signal);
  try {
    await fn();
  } finally {
    ac.abort();
    await run;
  }
}

const watchActions = (fake: FakeClient) => fake.actions.filter((a) => a.verb === "watch");
const listActions = (fake: FakeClient) => fake.actions.filter((a) => a.verb === "list");

Deno.test("informer watch-list: the initial state streams over the watch, with no LIST", async () => {
  const fake = new FakeClient();
  await fake.create(Pods, pod("a"));
  await fake.create(Pods, pod("b"));
  const inf = new SharedInformer({ client: fake, rt: Pods, watchList: true });
  const seen = recorded(inf);
  await running(inf, async () => {
    await inf.waitForSync(AbortSignal.timeout(5000));
    assert.deepEqual(seen, ["add*:a", "add*:b"]);
    assert.equal(inf.getStored("ns", "a")?.metadata.managedFields, undefined);
    await fake.create(Pods, pod("c"));
    await waitFor("c added", () => seen.includes("add:c"));
    assert.deepEqual(seen, ["add*:a", "add*:b", "add:c"]);
    assert.equal(listActions(fake).length, 0);
    assert.deepEqual(watchActions(fake).map((a) => a.sendInitialEvents), [true]);
    assert.equal(inf.stats.watchListSyncs, 1);
    assert.equal(inf.stats.lists, 0);
  });
});

Deno.test("informer watch-list: a server that refuses it gets LIST then WATCH", async () => {
  const fake = new FakeClient({ refuseWatchList: true });
  await fake.create(Pods, pod("a"));
  const inf = new SharedInformer({ client: fake, rt: Pods, watchList: true });
  const seen = recorded(inf);
  await running(inf, async () => {
    await inf.waitForSync(AbortSignal.timeout(5000));
    await fake.create(Pods, pod("b"));
    await waitFor("b added", () => seen.includes("add:b"));
    assert.deepEqual(seen, ["add*:a", "add:b"]);
    assert.equal(inf.stats.watchListFallbacks, 1);
    assert.equal(inf.stats.lists, 1);
    assert.deepEqual(
      fake.actions.filter((a) => a.verb === "list" || a.verb === "watch")
        .map((a) => `${a.verb}${a.sendInitialEvents ? "-list" : ""}`),
      ["watch-list", "list", "watch"],
    );
  });
});

/** Drops the informers' watches and compacts meanwhile, so resuming answers 410 and they relist. */
async function forceRelist(fake: FakeClient, change: () => Promise<void>): Promise<void> {
  const gate = fake.addReactor((a) =>
    a.verb === "watch" ? new Error("connection refused") : undefined
  );
  fake.closeWatches();
  await change();
  fake.compact();
  gate();
}

const watchListRequests = (fake: FakeClient) =>
  watchActions(fake).filter((a) => a.sendInitialEvents).length;

Deno.test("informer watch-list: a refusal is remembered for the server; relists and other informers list at once", async () => {
  const fake = new FakeClient({ refuseWatchList: true });
  await fake.create(Pods, pod("a"));
  const inf = new SharedInformer({ client: fake, rt: Pods, watchList: true, minBackoffMs: 5 });
  const seen = recorded(inf);
  await running(inf, async () => {
    await inf.waitForSync(AbortSignal.timeout(5000));
    assert.equal(watchListRequests(fake), 1);
    await forceRelist(fake, () => fake.create(Pods, pod("b")).then(() => {}));
    await waitFor("relisted", () => inf.stats.lists === 2, 5000);
    await waitFor("b added", () => seen.includes("add:b"));
    assert.equal(inf.stats.relistsAfterGone, 1);
    assert.equal(watchListRequests(fake), 1, "the relist asked for a watch-list again");
    assert.equal(inf.stats.watchListFallbacks, 1);
    assert.equal(inf.stats.watchListSkips, 1);
    // Another informer of the same server (client) does not ask either.
    const other = new SharedInformer({ client: fake, rt: Pods, namespace: "ns", watchList: true });
    await running(other, async () => {
      await other.waitForSync(AbortSignal.timeout(5000));
      assert.equal(watchListRequests(fake), 1);
      assert.equal(other.stats.watchListSkips, 1);
      assert.equal(other.size, 2);
    });
  });
  // A different server (its own client) is asked.
  const served = new FakeClient();
  const fresh = new SharedInformer({ client: served, rt: Pods, watchList: true });
  await running(fresh, async () => {
    await fresh.waitForSync(AbortSignal.timeout(5000));
    assert.equal(fresh.stats.watchListSyncs, 1);
  });
});

Deno.test("informer watch-list: a stream that broke off is no refusal; the next relist streams again", async () => {
  const fake = new FakeClient();
  await fake.create(Pods, pod("a"));
  // The first watch-list request fails on the way (a dropped connection, not an answer).
  let failed = false;
  const drop = fake.addReactor((a) => {
    if (a.verb !== "watch" || !a.sendInitialEvents || failed) return undefined;
    failed = true;
    return new Error("connection reset by peer");
  });
  const inf = new SharedInformer({ client: fake, rt: Pods, watchList: true, minBackoffMs: 5 });
  await running(inf, async () => {
    await inf.waitForSync(AbortSignal.timeout(5000));
    drop();
    assert.equal(inf.stats.watchListFallbacks, 1);
    assert.equal(inf.stats.lists, 1);
    await forceRelist(fake, () => fake.create(Pods, pod("b")).then(() => {}));
    await waitFor("streamed again", () => inf.stats.watchListSyncs === 1, 5000);
    assert.equal(watchListRequests(fake), 2);
    assert.equal(inf.stats.watchListSkips, 0);
  });
});

Deno.test("informer watch-list: after 410 Gone it streams the state again and reports only the gap", async () => {
  const fake = new FakeClient();
  await fake.create(Pods, pod("keep"));
  await fake.create(Pods, pod("gone"));
  const inf = new SharedInformer({ client: fake, rt: Pods, watchList: true, minBackoffMs: 5 });
  const seen = recorded(inf);
  await running(inf, async () => {
    await inf.waitForSync(AbortSignal.timeout(5000));
    // The stream drops; while it is down the history is compacted, so resuming answers 410.
    const gate = fake.addReactor((a) =>
      a.verb === "watch" ? new Error("connection refused") : undefined
    );
    fake.closeWatches();
    await fake.delete(Pods, "ns", "gone");
    await fake.create(Pods, pod("new"));
    fake.compact();
    gate();
    await waitFor("gap delivered", () => seen.length >= 4, 5000);
    assert.deepEqual(seen, ["add*:keep", "add*:gone", "delete:gone", "add:new"]);
    assert.equal(inf.stats.relistsAfterGone, 1);
    assert.equal(inf.stats.watchListSyncs, 2);
    assert.equal(inf.stats.lists, 0);
  });
});

/** A client whose watches, while `stalled`, are accepted and then never deliver nor end. */
class StallingClient {
  stalled = false;
  opened = 0;
  constructor(readonly fake: FakeClient) {}
  client(): Client {
    const watch = <T extends KubeObject>(rt: ResourceType<T>, opts: WatchOptions) =>
      this.stalled ? this.#hang<T>(opts) : this.fake.watch(rt, opts);
    return new Proxy(this.fake, {
      get: (target, prop) => {
        if (prop === "watch") return watch;
        const v = Reflect.get(target, prop, target);
        return typeof v === "function" ? v.bind(target) : v;
      },
    }) as unknown as Client;
  }
  async *#hang<T extends KubeObject>(opts: WatchOptions): AsyncGenerator<WatchEvent<T>> {
    this.opened++;
    opts.onOpen?.();
    // A half-open connection: nothing arrives until this side gives up on it.
    await new Promise<void>((resolve) => {
      if (opts.signal?.aborted) return resolve();
      opts.signal?.addEventListener("abort", () => resolve(), { once: true });
    });
    // Ended by its abort: the stream closes without an event.
    yield* [];
  }
}

Deno.test("informer liveness: a watch still open past its timeout is ended from this side and resumed", async () => {
  const fake = new FakeClient();
  await fake.create(Pods, pod("a"));
  const clock = new FakeClock(1_000_000);
  const stalling = new StallingClient(fake);
  const inf = new SharedInformer({
    client: stalling.client(),
    rt: Pods,
    clock,
    watchTimeoutSeconds: () => 60,
    watchDeadlineGraceMs: 5_000,
    minBackoffMs: 100,
  });
  const seen = recorded(inf);
  await running(inf, async () => {
    stalling.stalled = true;
    await inf.waitForSync(AbortSignal.timeout(5000));
    await waitFor("stalled watch open", () => stalling.opened === 1);
    await fake.create(Pods, pod("b"));
    // Just before the deadline nothing has given up on the stream yet.
    clock.advance(64_999);
    await flushMicrotasks();
    assert.equal(inf.stats.watchDeadlinesHit, 0);
    assert.equal(inf.msSinceProgress(), 64_999);
    stalling.stalled = false;
    clock.advance(1);
    await waitFor("deadline hit", () => inf.stats.watchDeadlinesHit === 1);
    // The retry pause, then a fresh watch from the stored resourceVersion sees the change.
    await waitFor("resumed", () => {
      clock.advance(200);
      return seen.includes("add:b");
    });
    assert.deepEqual(seen, ["add*:a", "add:b"]);
    assert.equal(inf.stats.lists, 1, "resumed, not relisted");
    assert.ok(
      inf.msSinceProgress() < 1_000,
      `progress after the restart: ${inf.msSinceProgress()}`,
    );
  });
});

Deno.test("manager /healthz: fails while an informer has heard nothing for the stall limit, recovers after", async () => {
  const fake = new FakeClient();
  const stalling = new StallingClient(fake);
  const manager = new Manager({
    client: stalling.client(),
    metricsBindAddress: "0",
    healthProbeBindAddress: "127.0.0.1:0",
    leaderElection: false,
    leaderElectionId: "test",
    informerStallLimitMs: 300,
    informerDefaults: { watchTimeoutSeconds: () => 1, watchDeadlineGraceMs: 500, minBackoffMs: 5 },
  });
  manager.informerFor(Pods);
  // Something to run until stopped: a manager with no work returns at once.
  manager.add({
    start: (signal) => new Promise((resolve) => signal.addEventListener("abort", () => resolve())),
  });
  const ac = new AbortController();
  stalling.stalled = true;
  const started = manager.start(ac.signal);
  try {
    const url = () =>
      `http://${manager.servers.probeAddr!.hostname}:${manager.servers.probeAddr!.port}`;
    await waitFor("probe listening", () => manager.servers.probeAddr !== undefined);
    await waitFor("synced", () => manager.cache.hasSynced());
    const status = async (path: string) => {
      const res = await fetch(url() + path);
      const body = await res.text();
      return `${res.status} ${body.trim()}`;
    };
    await waitFor(
      "healthz failing",
      async () => (await status("/healthz")).startsWith("500"),
      5000,
    );
    assert.match(
      await status("/healthz/informers"),
      /^500 .*no progress from the API server for pods/,
    );
    stalling.stalled = false;
    await waitFor(
      "deadline restarted the watch",
      () => manager.cache.informerFor(Pods).stats.watchDeadlinesHit >= 1,
      5000,
    );
    // The fresh watch is accepted (progress) and delivers what changed meanwhile.
    await fake.create(Pods, pod("late"));
    await waitFor("healthy again", async () => (await status("/healthz")) === "200 ok", 5000);
  } finally {
    ac.abort();
    await started;
  }
});
