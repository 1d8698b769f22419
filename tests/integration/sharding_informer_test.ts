/**
 * Sharded informers on real API servers: two informers with complementary hash ranges (two
 * replicas' caches) over ConfigMaps in 16 namespaces hold disjoint sets whose union is every
 * ConfigMap, hear each later change in exactly one of them, and re-scope when the ranges move.
 * On 1.35 the server ignores shardSelector and the client filters alone; on 1.36 with the
 * ShardedListAndWatch gate the server filters lists (shardInfo echoed, fewer bytes) and, from the
 * watch cache, watches; without the watch cache 1.36.3 does not filter watches and the client
 * does. The results must be the same in every case: only the bytes differ.
 */
import assert from "node:assert/strict";
import { ApiClient } from "../../kube/api_client.ts";
import { type ConfigMap, ConfigMaps, Namespaces } from "../../kube/core.ts";
import { SharedInformer } from "../../kube/informer.ts";
import type { KubeObject } from "../../kube/object.ts";
import {
  fnv1a64,
  formatShardSelector,
  HASH_SPACE_END,
  type HashRange,
  MutableShardFilter,
  namespaceInRanges,
} from "../../kube/sharding/mod.ts";
import { loadRestConfig, Transport } from "../../kube/transport.ts";
import type { KubernetesMinor } from "../../scripts/envtest.ts";
import { startControlPlane } from "../harness/control_plane.ts";
import { waitUntil } from "../harness/wait.ts";

const LOWER: HashRange[] = [{ start: 0n, end: 1n << 63n }];
const UPPER: HashRange[] = [{ start: 1n << 63n, end: HASH_SPACE_END }];
const namespaces = Array.from({ length: 16 }, (_, i) => `tenant-${i}`);
const PER_NAMESPACE = 3;
/**
 * Where the re-scope cuts A's half: at the hash of its middle namespace, so A keeps the ones
 * below and B takes the others (these names hash close together, so no fixed quarter would do).
 */
const lowerHashes = namespaces.map(fnv1a64).filter((h) => h < 1n << 63n).sort((x, y) =>
  x < y ? -1 : x > y ? 1 : 0
);
const cut = lowerHashes[Math.floor(lowerHashes.length / 2)];
const keptByA: HashRange[] = [{ start: 0n, end: cut }];
const takenByB: HashRange[] = [{ start: cut, end: HASH_SPACE_END }];
const payload = "x".repeat(2048);

const key = (o: KubeObject) => `${o.metadata.namespace}/${o.metadata.name}`;
const sorted = (xs: Iterable<string>) => [...xs].sort();

interface Outcome {
  /** What A and B held after the first sync, after the creations, after the re-scope. */
  a: string[][];
  b: string[][];
}

/** The outcome of each case, compared across versions by the last test. */
const outcomes = new Map<string, Outcome>();

async function listBytes(transport: Transport, query: Record<string, string>) {
  const res = await transport.fetch({ method: "GET", path: "/api/v1/configmaps", query });
  const text = await res.text();
  if (!res.ok) throw new Error(`list: HTTP ${res.status}: ${text}`);
  const body = JSON.parse(text) as { items: unknown[]; metadata: { shardInfo?: unknown } };
  return { bytes: new TextEncoder().encode(text).length, items: body.items.length, body };
}

/** Runs one informer of ConfigMaps with a shard filter until stop aborts. */
function start(client: ApiClient, filter: MutableShardFilter, stop: AbortSignal) {
  const inf = new SharedInformer<ConfigMap>({
    client,
    rt: ConfigMaps,
    shard: filter,
    minBackoffMs: 50,
    maxBackoffMs: 500,
  });
  const seen: string[] = [];
  inf.addEventHandler({
    onAdd: (o, initial) => seen.push(`add${initial ? "*" : ""}:${key(o)}`),
    onDelete: (o) => seen.push(`delete:${key(o)}`),
  });
  const run = inf.run(stop);
  return { inf, seen, run, held: () => sorted([...inf.listStored()].map(key)) };
}

async function shardedCase(
  label: string,
  minor: KubernetesMinor,
  flags: string[],
  watchCache: boolean,
  serverFilters: boolean,
) {
  const cp = await startControlPlane({
    crdDir: "",
    kubernetesMinor: minor,
    apiServerFlags: flags,
    watchCache,
  });
  const transport = new Transport(await loadRestConfig(cp.kubeconfigPath));
  const stop = new AbortController();
  const runs: Promise<void>[] = [];
  try {
    const client = new ApiClient(transport);
    for (const ns of namespaces) {
      await client.create(Namespaces, { metadata: { name: ns } });
      for (let i = 0; i < PER_NAMESPACE; i++) {
        await client.create(ConfigMaps, {
          metadata: { name: `seed-${i}`, namespace: ns },
          data: { payload },
        });
      }
    }
    const everything = async () => sorted((await client.list(ConfigMaps)).items.map(key));
    // What each side must hold: the server's own list, split by the client-side predicate.
    const expect = (all: string[], ranges: HashRange[]) =>
      all.filter((k) => namespaceInRanges(ranges, k.split("/")[0]));

    const filterA = new MutableShardFilter(LOWER);
    const filterB = new MutableShardFilter(UPPER);
    const a = start(client, filterA, stop.signal);
    const b = start(client, filterB, stop.signal);
    runs.push(a.run, b.run);
    await a.inf.waitForSync(AbortSignal.timeout(60_000));
    await b.inf.waitForSync(AbortSignal.timeout(60_000));
    const outcome: Outcome = { a: [], b: [] };

    let all = await everything();
    assert.deepEqual(a.held(), expect(all, LOWER));
    assert.deepEqual(b.held(), expect(all, UPPER));
    assert.deepEqual(sorted([...a.held(), ...b.held()]), all);
    assert.ok(a.held().length > 0 && b.held().length > 0);
    outcome.a.push(a.held());
    outcome.b.push(b.held());
    assert.equal(a.inf.stats.shardServerFiltered, serverFilters);
    assert.equal(b.inf.stats.shardServerFiltered, serverFilters);
    // Ignored by the server, the lists came whole and the client dropped the other half.
    if (!serverFilters) assert.ok(a.inf.stats.shardFilteredObjects > 0);
    else assert.equal(a.inf.stats.shardFilteredObjects, 0);
    const droppedFromList = a.inf.stats.shardFilteredObjects;

    // The bytes of one list with and without the selector (logged, not asserted on size).
    const whole = await listBytes(transport, {});
    const sharded = await listBytes(transport, { shardSelector: formatShardSelector(LOWER) });
    console.log(
      `[${label}] list of all ConfigMaps: ${whole.items} items, ${whole.bytes} bytes; ` +
        `with the lower half's shardSelector: ${sharded.items} items, ${sharded.bytes} bytes` +
        (sharded.body.metadata.shardInfo ? " (shardInfo echoed)" : " (no shardInfo)"),
    );
    if (serverFilters) {
      assert.ok(sharded.items < whole.items && sharded.bytes < whole.bytes);
      assert.ok(sharded.body.metadata.shardInfo);
    } else {
      assert.equal(sharded.items, whole.items);
      assert.equal(sharded.body.metadata.shardInfo, undefined);
    }

    // Later creations: each one reaches exactly one of the two.
    a.seen.length = 0;
    b.seen.length = 0;
    for (const ns of namespaces) {
      await client.create(ConfigMaps, { metadata: { name: "later", namespace: ns } });
    }
    all = await everything();
    await waitUntil(() => a.held().length + b.held().length === all.length, {
      timeoutMs: 60_000,
      what: `[${label}] both informers to hear the creations`,
    });
    const laterKeys = namespaces.map((ns) => `${ns}/later`);
    assert.deepEqual(
      sorted([...a.seen, ...b.seen]),
      sorted(laterKeys.map((k) => `add:${k}`)),
    );
    assert.deepEqual(a.held(), expect(all, LOWER));
    assert.deepEqual(b.held(), expect(all, UPPER));
    outcome.a.push(a.held());
    outcome.b.push(b.held());
    // The other half's creations reached A's watch unless the server filtered it (the watch
    // cache does; 1.36.3 serving from etcd does not), and A dropped them.
    const droppedFromWatch = a.inf.stats.shardFilteredObjects - droppedFromList;
    if (serverFilters && watchCache) assert.equal(droppedFromWatch, 0);
    else assert.equal(droppedFromWatch, expect(laterKeys, UPPER).length);

    // Re-scope: B takes the upper part of A's half. The namespaces that stay put are not
    // reported again; the moved ones are deleted from A and added to B.
    a.seen.length = 0;
    b.seen.length = 0;
    const moved = all.filter((k) =>
      namespaceInRanges(LOWER, k.split("/")[0]) &&
      !namespaceInRanges(keptByA, k.split("/")[0])
    );
    filterA.set(keptByA);
    filterB.set(takenByB);
    await waitUntil(
      () =>
        a.held().join() === expect(all, keptByA).join() &&
        b.held().join() === expect(all, takenByB).join(),
      { timeoutMs: 60_000, what: `[${label}] the informers to re-scope` },
    );
    assert.equal(a.inf.stats.rescopes, 1);
    assert.equal(b.inf.stats.rescopes, 1);
    assert.deepEqual(sorted(a.seen), sorted(moved.map((k) => `delete:${k}`)));
    assert.deepEqual(sorted(b.seen), sorted(moved.map((k) => `add:${k}`)));
    assert.deepEqual(sorted([...a.held(), ...b.held()]), all);
    outcome.a.push(a.held());
    outcome.b.push(b.held());
    console.log(
      `[${label}] re-scope moved ${moved.length} ConfigMaps of ` +
        `${new Set(moved.map((k) => k.split("/")[0])).size} namespaces from A to B`,
    );
    outcomes.set(label, outcome);
  } finally {
    stop.abort();
    await Promise.allSettled(runs);
    transport.close();
    await cp.stop();
  }
}

const skip136 = Deno.env.get("SHARDING_SKIP_1_36") === "1";
const GATE_ON = "--feature-gates=ShardedListAndWatch=true";

Deno.test("the test namespaces fall in every part of the re-scope", () => {
  const parts = [keptByA, [{ start: cut, end: 1n << 63n }], UPPER];
  for (const part of parts) {
    assert.ok(namespaces.some((ns) => namespaceInRanges(part, ns)), formatShardSelector(part));
  }
});

Deno.test({
  name: "1.35: sharded informers filter on the client, split the set and re-scope",
  sanitizeResources: false,
  sanitizeOps: false,
  fn: () => shardedCase("1.35", "1.35", [], false, false),
});

Deno.test({
  name: "1.36 with ShardedListAndWatch and the watch cache: the server filters, same result",
  ignore: skip136,
  sanitizeResources: false,
  sanitizeOps: false,
  fn: () => shardedCase("1.36+gate+watchcache", "1.36", [GATE_ON], true, true),
});

Deno.test({
  name: "1.36 with ShardedListAndWatch, no watch cache: lists by the server, watches by the client",
  ignore: skip136,
  sanitizeResources: false,
  sanitizeOps: false,
  fn: () => shardedCase("1.36+gate", "1.36", [GATE_ON], false, true),
});

Deno.test({
  name: "every server gave the sharded informers the same contents",
  sanitizeResources: false,
  sanitizeOps: false,
  fn() {
    const [first, ...rest] = [...outcomes.values()];
    assert.ok(first, "no case ran");
    for (const other of rest) assert.deepEqual(other, first);
  },
});
