/**
 * Sharded informers on the fake API: what is sent (shardSelector on the list and every watch,
 * nothing when unsharded or cluster-scoped), what is held (only namespaces in range, whatever
 * the server sends), what the server is recorded to have done (shardInfo), what is counted, and
 * re-scoping when the ranges change. The fake ignores shardSelector as Kubernetes 1.35 does,
 * unless applyShardSelector makes it filter lists as 1.36 does.
 */
import assert from "node:assert/strict";
import { InformerCache } from "./cache.ts";
import { type Node, Nodes, type Pod, Pods } from "./core.ts";
import { isNotFound } from "./errors.ts";
import { SharedInformer } from "./informer.ts";
import type { KubeObject } from "./object.ts";
import {
  formatShardSelector,
  FULL_RANGE,
  HASH_SPACE_END,
  type HashRange,
  MutableShardFilter,
  namespaceInRanges,
  type ShardFilter,
  staticShardFilter,
} from "./sharding/mod.ts";
import { type FakeAction, FakeClient } from "./testing/fake.ts";
import { FakeClock } from "./testing/fake_clock.ts";
import { metricValue } from "./testing/metrics.ts";
import { waitFor } from "./testing/wait.ts";

const LOWER: HashRange[] = [{ start: 0n, end: 1n << 63n }];
const UPPER: HashRange[] = [{ start: 1n << 63n, end: HASH_SPACE_END }];
const namespaces = Array.from({ length: 16 }, (_, i) => `tenant-${i}`);
const inLower = namespaces.filter((ns) => namespaceInRanges(LOWER, ns));
const inUpper = namespaces.filter((ns) => !namespaceInRanges(LOWER, ns));

function pod(namespace: string, name = "p"): Pod {
  return { metadata: { name, namespace }, spec: { containers: [{ name: "c", image: "i" }] } };
}

const key = (o: KubeObject) => `${o.metadata.namespace}/${o.metadata.name}`;
const podKeys = (nss: string[], name = "p") => nss.map((ns) => `${ns}/${name}`).sort();

async function seeded(opts: { applyShardSelector?: boolean } = {}): Promise<FakeClient> {
  const fake = new FakeClient(opts);
  for (const ns of namespaces) await fake.create(Pods, pod(ns));
  return fake;
}

/** Runs fn against a synced sharded pod informer whose handlers record "add:ns/name" etc. */
async function withSharded(
  fake: FakeClient,
  shard: ShardFilter | undefined,
  fn: (inf: SharedInformer<Pod>, seen: string[]) => Promise<void>,
  extra: { watchList?: boolean } = {},
): Promise<void> {
  const inf = new SharedInformer({
    client: fake,
    rt: Pods,
    shard,
    minBackoffMs: 5,
    maxBackoffMs: 20,
    ...extra,
  });
  const seen: string[] = [];
  inf.addEventHandler({
    onAdd: (o, initial) => seen.push(`add${initial ? "*" : ""}:${key(o)}`),
    onUpdate: (_o, n) => seen.push(`update:${key(n)}`),
    onDelete: (o) => seen.push(`delete:${key(o)}`),
  });
  const ac = new AbortController();
  const run = inf.run(ac.signal);
  try {
    await inf.waitForSync(AbortSignal.timeout(5000));
    await fn(inf, seen);
  } finally {
    ac.abort();
    await run;
  }
}

const stored = (inf: SharedInformer<Pod>) => [...inf.listStored()].map(key).sort();
const podRequests = (fake: FakeClient, verb: "list" | "watch") =>
  fake.actions.filter((a: FakeAction) => a.verb === verb && a.resource === Pods);

Deno.test("sharding: the test namespaces fall on both sides of the halves", () => {
  assert.ok(inLower.length >= 3 && inUpper.length >= 3, `${inLower} | ${inUpper}`);
});

Deno.test("sharded informer: sends shardSelector, holds and reports only its namespaces when the server ignores it", async () => {
  const fake = await seeded();
  const resource = "pods";
  const before =
    (await metricValue("cocoon_operator_shard_filtered_objects_total", { resource })) ??
      0;
  await withSharded(fake, staticShardFilter(LOWER), async (inf, seen) => {
    assert.deepEqual(stored(inf), podKeys(inLower));
    assert.deepEqual(seen.sort(), inLower.map((ns) => `add*:${ns}/p`).sort());
    // The list was answered whole (no shardInfo): recorded as not filtered by the server.
    assert.equal(inf.stats.shardServerFiltered, false);
    assert.equal(
      await metricValue("cocoon_operator_shard_server_filtered", { resource }),
      0,
    );
    assert.equal(inf.stats.shardFilteredObjects, inUpper.length);

    // Watch events of other namespaces are dropped too; the marker shows the stream went past.
    seen.length = 0;
    for (const ns of inUpper) await fake.create(Pods, pod(ns, "later"));
    await fake.create(Pods, pod(inLower[0], "later"));
    await waitFor("the in-range creation", () => seen.includes(`add:${inLower[0]}/later`));
    assert.deepEqual(seen, [`add:${inLower[0]}/later`]);
    for (const ns of inUpper) await fake.delete(Pods, ns, "later");
    await fake.delete(Pods, inLower[0], "later");
    await waitFor("the in-range deletion", () => seen.includes(`delete:${inLower[0]}/later`));
    assert.deepEqual(seen, [`add:${inLower[0]}/later`, `delete:${inLower[0]}/later`]);
    assert.equal(inf.stats.shardFilteredObjects, inUpper.length * 3);
  });
  const after = await metricValue("cocoon_operator_shard_filtered_objects_total", { resource });
  assert.equal(after! - before, inUpper.length * 3);
  const selector = formatShardSelector(LOWER);
  const lists = podRequests(fake, "list");
  const watches = podRequests(fake, "watch");
  assert.ok(lists.length >= 1 && watches.length >= 1);
  assert.ok([...lists, ...watches].every((a) => a.shardSelector === selector));
});

Deno.test("sharded informer: a server that applies the selector is recorded, watch events still filtered", async () => {
  const fake = await seeded({ applyShardSelector: true });
  await withSharded(fake, staticShardFilter(UPPER), async (inf, seen) => {
    assert.deepEqual(stored(inf), podKeys(inUpper));
    assert.equal(inf.stats.shardServerFiltered, true);
    assert.equal(
      await metricValue("cocoon_operator_shard_server_filtered", { resource: "pods" }),
      1,
    );
    // The fake filters lists only, as 1.36.3 without the watch cache: the watch still brings
    // every namespace, and the client drops what is out of range.
    assert.equal(inf.stats.shardFilteredObjects, 0);
    seen.length = 0;
    for (const ns of inLower) await fake.create(Pods, pod(ns, "later"));
    await fake.create(Pods, pod(inUpper[0], "later"));
    await waitFor("the in-range creation", () => seen.includes(`add:${inUpper[0]}/later`));
    assert.deepEqual(seen, [`add:${inUpper[0]}/later`]);
    assert.equal(inf.stats.shardFilteredObjects, inLower.length);
  });
});

Deno.test("sharded informer: a filter's ranges in any order are sent merged and the echo still matches", async () => {
  const fake = await seeded({ applyShardSelector: true });
  const quarter: HashRange = { start: 0n, end: 1n << 62n };
  const rest: HashRange = { start: 1n << 62n, end: 1n << 63n };
  // Not normalized: a scope may hand out its ranges unsorted and split.
  const unsorted: ShardFilter = { ranges: () => [rest, quarter], onChange: () => () => {} };
  await withSharded(fake, unsorted, (inf) => {
    assert.deepEqual(stored(inf), podKeys(inLower));
    assert.equal(inf.stats.shardServerFiltered, true);
    return Promise.resolve();
  });
  assert.ok(
    podRequests(fake, "list").every((a) => a.shardSelector === formatShardSelector(LOWER)),
  );
});

Deno.test("unsharded informer: no shardSelector is sent and nothing is filtered", async () => {
  const fake = await seeded({ applyShardSelector: true });
  await withSharded(fake, undefined, (inf) => {
    assert.deepEqual(stored(inf), podKeys(namespaces));
    assert.equal(inf.stats.shardServerFiltered, undefined);
    assert.equal(inf.stats.shardFilteredObjects, 0);
    return Promise.resolve();
  });
  const requests = [...podRequests(fake, "list"), ...podRequests(fake, "watch")];
  assert.ok(requests.length >= 2);
  assert.ok(requests.every((a) => !("shardSelector" in a)));
});

Deno.test("sharded informer: a cluster-scoped kind is never sharded", async () => {
  const fake = new FakeClient({ applyShardSelector: true });
  for (const name of ["n1", "n2", "n3"]) await fake.create(Nodes, { metadata: { name } } as Node);
  // Namespace "" hashes to the FNV offset basis, in the upper half: a filter applied to nodes
  // would drop them all from a lower-half informer.
  const inf = new SharedInformer({ client: fake, rt: Nodes, shard: staticShardFilter(LOWER) });
  const ac = new AbortController();
  const run = inf.run(ac.signal);
  try {
    await inf.waitForSync(AbortSignal.timeout(5000));
    assert.equal(inf.size, 3);
    assert.equal(inf.stats.shardServerFiltered, undefined);
  } finally {
    ac.abort();
    await run;
  }
  const requests = fake.actions.filter((a) => a.resource === Nodes && a.verb !== "create");
  assert.ok(requests.every((a) => !("shardSelector" in a)));
});

Deno.test("sharded informer: re-scoping relists, reports deletes and adds of the moved namespaces only", async () => {
  const fake = await seeded();
  const filter = new MutableShardFilter(LOWER);
  await withSharded(fake, filter, async (inf, seen) => {
    assert.deepEqual(stored(inf), podKeys(inLower));
    seen.length = 0;
    // Growing to everything: the lower namespaces stay held and must not be re-reported.
    filter.set([FULL_RANGE]);
    await waitFor("the upper namespaces added", () => inf.size === namespaces.length);
    assert.deepEqual(seen.sort(), inUpper.map((ns) => `add:${ns}/p`).sort());
    assert.equal(inf.stats.rescopes, 1);

    // Moving to the upper half: the lower namespaces are reported deleted, nothing else.
    seen.length = 0;
    filter.set(UPPER);
    await waitFor("the lower namespaces dropped", () => inf.size === inUpper.length);
    assert.deepEqual(stored(inf), podKeys(inUpper));
    assert.deepEqual(seen.sort(), inLower.map((ns) => `delete:${ns}/p`).sort());
    assert.equal(inf.stats.rescopes, 2);

    // The watch after the re-scope filters with the new ranges.
    seen.length = 0;
    await fake.create(Pods, pod(inLower[0], "later"));
    await fake.create(Pods, pod(inUpper[0], "later"));
    await waitFor("the in-range creation", () => seen.includes(`add:${inUpper[0]}/later`));
    assert.deepEqual(seen, [`add:${inUpper[0]}/later`]);
  });
  const selectors = podRequests(fake, "list").map((a) => a.shardSelector);
  assert.deepEqual(
    [...new Set(selectors)],
    [LOWER, [FULL_RANGE], UPPER].map((r) => formatShardSelector(r)),
  );
});

Deno.test("sharded informer: an empty range set holds nothing without asking, then fills when given ranges", async () => {
  const fake = await seeded();
  const filter = new MutableShardFilter([]);
  await withSharded(fake, filter, async (inf, seen) => {
    assert.equal(inf.size, 0);
    assert.equal(podRequests(fake, "list").length, 0);
    assert.equal(podRequests(fake, "watch").length, 0);
    // Nothing to hear from the server is not a stall.
    assert.equal(inf.msSinceProgress(), 0);
    filter.set(LOWER);
    await waitFor("the lower namespaces added", () => inf.size === inLower.length);
    assert.deepEqual(seen.sort(), inLower.map((ns) => `add:${ns}/p`).sort());
    filter.set([]);
    await waitFor("everything dropped", () => inf.size === 0);
  });
});

Deno.test("sharded informer: time spent holding nothing does not count as silence once ranges arrive", async () => {
  const fake = await seeded();
  const clock = new FakeClock(0);
  const filter = new MutableShardFilter([]);
  let release: (() => void) | undefined;
  // The list after the ranges arrive hangs, so the test sees the watcher between the two.
  fake.addReactor((a) =>
    a.verb === "list" ? new Promise((resolve) => release = () => resolve(undefined)) : undefined
  );
  const inf = new SharedInformer({ client: fake, rt: Pods, shard: filter, clock });
  const ac = new AbortController();
  const run = inf.run(ac.signal);
  try {
    await inf.waitForSync(AbortSignal.timeout(5000));
    clock.advance(3_600_000);
    assert.equal(inf.msSinceProgress(), 0);
    filter.set(LOWER);
    await waitFor("the list sent", () => release !== undefined);
    assert.equal(inf.msSinceProgress(), 0);
    release!();
    await waitFor("the lower namespaces held", () => inf.size === inLower.length);
  } finally {
    ac.abort();
    release?.();
    await run;
  }
});

Deno.test("sharded informer: takes its state with a LIST even with watch-list on (only a list carries shardInfo)", async () => {
  const fake = await seeded({ applyShardSelector: true });
  await withSharded(fake, staticShardFilter(LOWER), (inf) => {
    assert.deepEqual(stored(inf), podKeys(inLower));
    assert.equal(inf.stats.shardServerFiltered, true);
    assert.equal(inf.stats.watchListSyncs, 0);
    return Promise.resolve();
  }, { watchList: true });
  assert.ok(podRequests(fake, "watch").every((a) => !a.sendInitialEvents));
});

Deno.test("sharded cache: namespaced kinds answer only their namespaces, cluster-scoped ones everything", async () => {
  const fake = await seeded();
  await fake.create(Nodes, { metadata: { name: "n1" } } as Node);
  const cache = new InformerCache({ client: fake, shard: staticShardFilter(UPPER) });
  cache.informerFor(Pods);
  cache.informerFor(Nodes);
  const ac = new AbortController();
  cache.start(ac.signal);
  try {
    await cache.waitForSync(AbortSignal.timeout(5000));
    assert.deepEqual((await cache.list(Pods)).items.map(key).sort(), podKeys(inUpper));
    await cache.get(Pods, inUpper[0], "p");
    await assert.rejects(() => cache.get(Pods, inLower[0], "p"), isNotFound);
    assert.equal((await cache.list(Nodes)).items.length, 1);
  } finally {
    ac.abort();
    await cache.stopped();
  }
});

Deno.test("sharded cache: holdsRanges tells when every namespaced kind holds a range after a change", async () => {
  const fake = await seeded();
  await fake.create(Nodes, { metadata: { name: "n1" } } as Node);
  const filter = new MutableShardFilter(LOWER);
  const cache = new InformerCache({ client: fake, shard: filter });
  const pods = cache.informerFor(Pods);
  cache.informerFor(Nodes);
  assert.equal(cache.holdsRanges(LOWER), false, "nothing synced yet");
  const ac = new AbortController();
  cache.start(ac.signal);
  try {
    await cache.waitForSync(AbortSignal.timeout(5000));
    assert.deepEqual(pods.heldRanges(), LOWER);
    assert.equal(cache.holdsRanges(LOWER), true);
    assert.equal(cache.holdsRanges(UPPER), false);
    filter.set([FULL_RANGE]);
    await waitFor("the full range held", () => cache.holdsRanges([FULL_RANGE]));
    assert.equal(pods.size, namespaces.length);
    filter.set(UPPER);
    await waitFor("the upper half held alone", () => !cache.holdsRanges(LOWER));
    assert.equal(cache.holdsRanges(UPPER), true);
    assert.deepEqual((await cache.list(Pods)).items.map(key).sort(), podKeys(inUpper));
  } finally {
    ac.abort();
    await cache.stopped();
  }
});

Deno.test("sharding metrics are documented in docs/observability.md", async () => {
  const text = await Deno.readTextFile(new URL("../docs/observability.md", import.meta.url));
  for (
    const name of [
      "cocoon_operator_shard_filtered_objects_total",
      "cocoon_operator_shard_server_filtered",
    ]
  ) {
    assert.ok(text.includes(`\`${name}`), `${name} missing from docs/observability.md`);
  }
});
