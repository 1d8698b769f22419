import assert from "node:assert/strict";
import { controllerManagedBy } from "../builder.ts";
import { ConfigMaps, Leases } from "../core.ts";
import type { Request } from "../reconcile.ts";
import { FakeClient } from "../testing/fake.ts";
import { waitFor } from "../testing/wait.ts";
import { fnv1a64 } from "./hash.ts";
import { ShardedManager } from "./manager.ts";
import { HELD_ANNOTATION, MEMBER_GROUP_LABEL, memberLeaseName } from "./membership.ts";
import { shardDeadLeasesDeleted, shardFiltered, shardOwnedFraction } from "./metrics.ts";
import { formatRangeSet, HASH_SPACE_END } from "./range.ts";
import type { ShardTiming } from "./timing.ts";

/** Short but valid timings, so a test sees several rounds within a second. */
const TIMING: ShardTiming = {
  leaseDurationMs: 2_000,
  renewDeadlineMs: 1_500,
  retryPeriodMs: 200,
  expiryMarginMs: 300,
  drainTimeoutMs: 3_000,
};
const HALF = HASH_SPACE_END / 2n;
const namespaces = Array.from({ length: 12 }, (_, i) => `team-${i}`);
const upper = (ns: string) => fnv1a64(ns) >= HALF;

function shardedManager(client: FakeClient, identity: string): ShardedManager {
  return new ShardedManager({
    client,
    metricsBindAddress: "0",
    healthProbeBindAddress: "127.0.0.1:0",
    leaderElectionId: "unused",
    leaderElectionNamespace: "ops",
    identity,
    shardTiming: TIMING,
  });
}

async function seed(client: FakeClient): Promise<void> {
  for (const ns of namespaces) {
    await client.create(ConfigMaps, { metadata: { name: "cm", namespace: ns } });
  }
}

function recordingController(mgr: ShardedManager) {
  const seen: string[] = [];
  const ctrl = controllerManagedBy(mgr).for(ConfigMaps).build({
    reconcile: (req: Request) => {
      seen.push(`${req.namespace}/${req.name}`);
      return Promise.resolve({});
    },
  });
  return { seen, ctrl };
}

async function readyz(mgr: ShardedManager): Promise<number> {
  const addr = mgr.servers.probeAddr;
  if (!addr) return 0;
  const res = await fetch(`http://127.0.0.1:${addr.port}/readyz`);
  await res.body?.cancel();
  return res.status;
}

async function metricValue(
  metric: typeof shardFiltered | typeof shardDeadLeasesDeleted,
  labels: Record<string, string>,
): Promise<number> {
  const { values } = await metric.get();
  const hit = values.find((v) =>
    Object.entries(labels).every(([k, x]) => (v.labels as Record<string, unknown>)[k] === x)
  );
  return hit?.value ?? 0;
}

Deno.test("sharded manager, alone: reconciles every namespace's cached objects once its range is active, ready only then, leaves on stop", async () => {
  const client = new FakeClient();
  await seed(client);
  const mgr = shardedManager(client, "solo");
  const { seen } = recordingController(mgr);
  const stop = new AbortController();
  const run = mgr.start(stop.signal);
  try {
    await waitFor("probe bound", () => mgr.servers.probeAddr);
    await waitFor(
      "all cached objects reconciled after activation",
      () => namespaces.every((ns) => seen.includes(`${ns}/cm`)),
      20_000,
    );
    await waitFor("ready", async () => (await readyz(mgr)) === 200, 20_000);
    assert.equal((await shardOwnedFraction.get()).values[0]?.value, 1);
    const lease = await client.get(Leases, "ops", memberLeaseName("solo"));
    assert.equal(lease.metadata.labels?.[MEMBER_GROUP_LABEL], "cocoon-operator");
  } finally {
    stop.abort();
    await run;
  }
  await assert.rejects(client.get(Leases, "ops", memberLeaseName("solo")), /not found/i);
  assert.deepEqual(mgr.scope.active, []);
});

Deno.test("sharded manager beside a live peer holding the lower half: only upper-half namespaces are reconciled, the others are filtered before the queue and refused at the gate", async () => {
  const client = new FakeClient();
  await seed(client);
  // A well-behaved peer with the smaller identity: announces the lower half, renews.
  const peer = await client.create(Leases, {
    metadata: {
      name: memberLeaseName("a-peer"),
      namespace: "ops",
      labels: { [MEMBER_GROUP_LABEL]: "cocoon-operator" },
      annotations: { [HELD_ANNOTATION]: formatRangeSet([{ start: 0n, end: HALF }]) },
    },
    spec: { holderIdentity: "a-peer", leaseDurationSeconds: 2 },
  });
  let current = peer;
  const renewing = setInterval(async () => {
    current = await client.update(Leases, {
      ...current,
      spec: { ...current.spec, renewTime: new Date().toISOString() },
    });
  }, 150);
  const mgr = shardedManager(client, "b-replica");
  const { seen, ctrl } = recordingController(mgr);
  const stop = new AbortController();
  const run = mgr.start(stop.signal);
  const mine = namespaces.filter(upper);
  const theirs = namespaces.filter((ns) => !upper(ns));
  assert.ok(mine.length > 0 && theirs.length > 0, "the namespaces fall on both sides");
  const eventsBefore = await metricValue(shardFiltered, { kind: "ConfigMap", stage: "event" });
  try {
    await waitFor(
      "upper half reconciled",
      () => mine.every((ns) => seen.includes(`${ns}/cm`)),
      20_000,
    );
    await waitFor("ready", async () => (await readyz(mgr)) === 200, 20_000);
    // New objects on both sides: only ours reaches the reconciler.
    await client.create(ConfigMaps, { metadata: { name: "late", namespace: theirs[0] } });
    await client.create(ConfigMaps, { metadata: { name: "late", namespace: mine[0] } });
    await waitFor("our late object reconciled", () => seen.includes(`${mine[0]}/late`), 20_000);
    // A key of the peer's namespace put straight on the queue is refused at the gate.
    const refusedBefore = await metricValue(shardFiltered, {
      kind: "configmap",
      stage: "reconcile",
    });
    ctrl.enqueue({ namespace: theirs[0], name: "cm" });
    await waitFor(
      "refused at the gate",
      async () =>
        (await metricValue(shardFiltered, { kind: "configmap", stage: "reconcile" })) >
          refusedBefore,
      20_000,
    );
    assert.deepEqual(seen.filter((k) => theirs.some((ns) => k.startsWith(`${ns}/`))), []);
    assert.ok(
      (await metricValue(shardFiltered, { kind: "ConfigMap", stage: "event" })) > eventsBefore,
      "peer-half events counted as filtered",
    );
    assert.deepEqual(mgr.scope.active, [{ start: HALF, end: HASH_SPACE_END }]);
  } finally {
    clearInterval(renewing);
    stop.abort();
    await run;
  }
});

Deno.test("sharded manager: /readyz waits for the share, not only the caches: 500 while a peer still announces it, 200 once it is given up", async () => {
  const client = new FakeClient();
  await seed(client);
  // The peer (smaller identity) still announces the whole space, as an old owner that drains.
  let peer = await client.create(Leases, {
    metadata: {
      name: memberLeaseName("a-peer"),
      namespace: "ops",
      labels: { [MEMBER_GROUP_LABEL]: "cocoon-operator" },
      annotations: { [HELD_ANNOTATION]: formatRangeSet([{ start: 0n, end: HASH_SPACE_END }]) },
    },
    spec: { holderIdentity: "a-peer", leaseDurationSeconds: 2 },
  });
  let peerHeld = formatRangeSet([{ start: 0n, end: HASH_SPACE_END }]);
  const renewing = setInterval(async () => {
    peer = await client.update(Leases, {
      ...peer,
      metadata: {
        ...peer.metadata,
        annotations: { ...peer.metadata.annotations, [HELD_ANNOTATION]: peerHeld },
      },
      spec: { ...peer.spec, renewTime: new Date().toISOString() },
    });
  }, 150);
  const mgr = shardedManager(client, "b-replica");
  const { seen } = recordingController(mgr);
  const stop = new AbortController();
  const run = mgr.start(stop.signal);
  const check = async (path: string) => {
    const addr = mgr.servers.probeAddr;
    if (!addr) return 0;
    const res = await fetch(`http://127.0.0.1:${addr.port}${path}`);
    await res.body?.cancel();
    return res.status;
  };
  try {
    await waitFor("caches synced", async () => (await check("/readyz/cache-sync")) === 200, 20_000);
    // Several of its own renewals later, the share is still blocked by the peer's announcement.
    const rvs = new Set<string>();
    await waitFor(
      "five renewals",
      async () => {
        const own = await client.get(Leases, "ops", memberLeaseName("b-replica"));
        rvs.add(own.metadata.resourceVersion ?? "");
        return rvs.size > 5;
      },
      20_000,
      20,
    );
    assert.equal(await check("/readyz/shards"), 500);
    assert.equal(await check("/readyz"), 500);
    assert.deepEqual(seen, [], "nothing reconciled while the peer announces everything");
    // The peer gives the upper half back.
    peerHeld = formatRangeSet([{ start: 0n, end: HALF }]);
    await waitFor(
      "ready once the share is active",
      async () => (await check("/readyz")) === 200,
      20_000,
    );
    assert.deepEqual(mgr.scope.active, [{ start: HALF, end: HASH_SPACE_END }]);
  } finally {
    clearInterval(renewing);
    stop.abort();
    await run;
  }
});

Deno.test("sharded manager beside a live leader of another build: ready, reconciles nothing until its Lease runs out", async () => {
  const client = new FakeClient();
  await seed(client);
  // As the Go original's leader writes it (client-go LeaseLock), renewed every 150 ms.
  let lease = await client.create(Leases, {
    metadata: { name: "unused", namespace: "ops" },
    spec: {
      holderIdentity: "go-operator-0_4c1d",
      leaseDurationSeconds: 2,
      acquireTime: new Date().toISOString(),
      renewTime: new Date().toISOString(),
      leaseTransitions: 0,
    },
  });
  const renewing = setInterval(async () => {
    lease = await client.update(Leases, {
      ...lease,
      spec: { ...lease.spec, renewTime: new Date().toISOString() },
    });
  }, 150);
  const mgr = shardedManager(client, "b-replica");
  const { seen, ctrl } = recordingController(mgr);
  const stop = new AbortController();
  const run = mgr.start(stop.signal);
  try {
    await waitFor("probe bound", () => mgr.servers.probeAddr);
    await waitFor("standing by, ready", async () => (await readyz(mgr)) === 200, 20_000);
    assert.equal(mgr.scope.fenceStatus, "foreign");
    assert.deepEqual(mgr.scope.active, [{ start: 0n, end: HASH_SPACE_END }]);
    // Ten more of its own rounds, a new object and a key put straight on the queue: nothing runs.
    const rvs = new Set<string>();
    await waitFor(
      "ten rounds",
      async () => {
        const own = await client.get(Leases, "ops", memberLeaseName("b-replica"));
        rvs.add(own.metadata.resourceVersion ?? "");
        return rvs.size > 10;
      },
      20_000,
      20,
    );
    await client.create(ConfigMaps, { metadata: { name: "late", namespace: namespaces[0] } });
    ctrl.enqueue({ namespace: namespaces[1], name: "cm" });
    await waitFor(
      "ten more rounds",
      async () => {
        const own = await client.get(Leases, "ops", memberLeaseName("b-replica"));
        rvs.add(own.metadata.resourceVersion ?? "");
        return rvs.size > 20;
      },
      20_000,
      20,
    );
    assert.equal(seen.length, 0, `reconciled beside a live foreign leader: ${seen}`);
    assert.equal(
      (await client.get(Leases, "ops", "unused")).spec?.holderIdentity,
      "go-operator-0_4c1d",
    );
    // The leader is stopped without releasing (the Go original's way): its Lease runs out.
    clearInterval(renewing);
    await waitFor(
      "every object reconciled, the late one too",
      () =>
        [...namespaces.map((ns) => `${ns}/cm`), `${namespaces[0]}/late`].every((k) =>
          seen.includes(k)
        ),
      20_000,
    );
    const taken = await client.get(Leases, "ops", "unused");
    assert.equal(taken.spec?.holderIdentity, "b-replica");
    assert.equal(taken.spec?.leaseTransitions, 1);
    assert.equal(mgr.scope.fenceStatus, "ours");
  } finally {
    clearInterval(renewing);
    stop.abort();
    await run;
  }
});

/** Runs fn with these environment variables set (undefined: unset), then restores them. */
async function withEnv(vars: Record<string, string | undefined>, fn: () => Promise<void>) {
  const saved = Object.fromEntries(Object.keys(vars).map((k) => [k, Deno.env.get(k)]));
  const put = (values: Record<string, string | undefined>) => {
    for (const [k, v] of Object.entries(values)) {
      v === undefined ? Deno.env.delete(k) : Deno.env.set(k, v);
    }
  };
  put(vars);
  try {
    await fn();
  } finally {
    put(saved);
  }
}

/** The member Lease a previous operator process of pod `pod` left, fresh, claiming everything. */
async function predecessorLease(client: FakeClient, pod: string) {
  return await client.create(Leases, {
    metadata: {
      name: memberLeaseName(`${pod}_old`),
      namespace: "ops",
      labels: { [MEMBER_GROUP_LABEL]: "cocoon-operator" },
      annotations: { [HELD_ANNOTATION]: formatRangeSet([{ start: 0n, end: HASH_SPACE_END }]) },
    },
    spec: {
      holderIdentity: `${pod}_old`,
      leaseDurationSeconds: 600,
      renewTime: new Date().toISOString(),
    },
  });
}

function unnamedShardedManager(client: FakeClient): ShardedManager {
  return new ShardedManager({
    client,
    metricsBindAddress: "0",
    healthProbeBindAddress: "127.0.0.1:0",
    leaderElectionId: "unused",
    leaderElectionNamespace: "ops",
    shardTiming: TIMING,
  });
}

Deno.test("sharded manager with POD_NAME: its pod's previous process's Lease is ignored and deleted, ready at once", async () => {
  await withEnv({ POD_NAME: "op-pod-q", HOSTNAME: "elsewhere" }, async () => {
    const client = new FakeClient();
    const old = await predecessorLease(client, "op-pod-q");
    const deletedBefore = await metricValue(shardDeadLeasesDeleted, { reason: "predecessor" });
    const mgr = unnamedShardedManager(client);
    assert.match(mgr.scope.identity, /^op-pod-q_/);
    const stop = new AbortController();
    const run = mgr.start(stop.signal);
    try {
      await waitFor("probe bound", () => mgr.servers.probeAddr);
      await waitFor("ready", async () => (await readyz(mgr)) === 200, 20_000);
      await assert.rejects(client.get(Leases, "ops", old.metadata.name!), /not found/i);
      assert.equal(
        await metricValue(shardDeadLeasesDeleted, { reason: "predecessor" }),
        deletedBefore + 1,
      );
    } finally {
      stop.abort();
      await run;
    }
  });
});

Deno.test("sharded manager without POD_NAME: a Lease of the same HOSTNAME prefix is a live member", async () => {
  await withEnv({ POD_NAME: undefined, HOSTNAME: "op-pod-q" }, async () => {
    const client = new FakeClient();
    const old = await predecessorLease(client, "op-pod-q");
    let renewals = 0;
    // deno-lint-ignore prefer-const
    let mgr: ShardedManager;
    client.addReactor((a) => {
      if (
        a.verb === "update" && a.resource === Leases &&
        a.name === memberLeaseName(mgr.scope.identity)
      ) renewals++;
      return undefined;
    });
    mgr = unnamedShardedManager(client);
    assert.match(mgr.scope.identity, /^op-pod-q_/);
    const stop = new AbortController();
    const run = mgr.start(stop.signal);
    try {
      await waitFor("ten rounds", () => renewals >= 10, 20_000);
      assert.equal(await readyz(mgr), 500, "not ready: the whole space is still announced");
      assert.deepEqual(mgr.scope.active, []);
      await client.get(Leases, "ops", old.metadata.name!);
    } finally {
      stop.abort();
      await run;
    }
  });
});
