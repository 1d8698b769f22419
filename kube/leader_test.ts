import assert from "node:assert/strict";
import { FakeClock } from "./testing/fake_clock.ts";
import { type Lease, Leases } from "./core.ts";
import { FakeClient } from "./testing/fake.ts";
import {
  leaderElectionNamespace,
  LeaderElector,
  type LeaderElectorOptions,
  leaderIdentity,
} from "./leader.ts";
import { leaderElectionMasterStatus } from "./metrics.ts";
import { objectReference } from "./events.ts";
import { rfc3339Micro } from "./time.ts";

const NS = "operators";
const start = Date.parse("2026-01-01T00:00:00Z");

/** Lets every promise chain started by fired timers run to its next timer wait. */
async function settle(): Promise<void> {
  for (let i = 0; i < 3; i++) await new Promise((r) => setTimeout(r, 0));
}

/** Advances fake time in small steps until cond holds; fails after maxMs of fake time. */
async function advanceUntil(
  clock: FakeClock,
  cond: () => boolean,
  maxMs: number,
  stepMs = 100,
): Promise<number> {
  const deadline = clock.now() + maxMs;
  for (;;) {
    await settle();
    if (cond()) return clock.now();
    if (clock.now() >= deadline) throw new Error(`condition not met within ${maxMs} ms`);
    clock.advance(stepMs);
  }
}

/** Advances fake time by ms in steps, letting async work run in between. */
async function advance(clock: FakeClock, ms: number, stepMs = 100): Promise<void> {
  for (let t = 0; t < ms; t += stepMs) {
    await settle();
    clock.advance(Math.min(stepMs, ms - t));
  }
  await settle();
}

interface Candidate {
  elector: LeaderElector;
  stop: AbortController;
  done: Promise<string>;
  started: number;
  stopped: number;
  leading?: AbortSignal;
  newLeaders: string[];
}

function candidate(
  client: FakeClient,
  clock: FakeClock,
  identity: string,
  extra: Partial<LeaderElectorOptions> = {},
): Candidate {
  const c = { started: 0, stopped: 0, newLeaders: [] as string[] } as unknown as Candidate;
  c.stop = new AbortController();
  c.elector = new LeaderElector({
    client,
    namespace: NS,
    name: "test-lease",
    identity,
    clock,
    random: () => 0,
    onStartedLeading: (signal) => {
      c.started++;
      c.leading = signal;
    },
    onStoppedLeading: () => c.stopped++,
    onNewLeader: (id) => c.newLeaders.push(id),
    ...extra,
  });
  c.done = c.elector.run(c.stop.signal);
  return c;
}

async function lease(client: FakeClient): Promise<Lease> {
  return await client.get(Leases, NS, "test-lease");
}

async function gauge(name: string): Promise<number | undefined> {
  const m = await leaderElectionMasterStatus.get();
  return m.values.find((v) => v.labels.name === name)?.value;
}

Deno.test("a single candidate acquires the lease, renews it, and releases it on cancel", async () => {
  const client = new FakeClient();
  const clock = new FakeClock(start);
  const a = candidate(client, clock, "a", { name: "single-lease" });
  await advanceUntil(clock, () => a.started === 1, 1000);
  assert.equal(a.elector.isLeader(), true);
  assert.deepEqual(a.newLeaders, ["a"]);
  assert.equal(await gauge("single-lease"), 1);
  let l = await client.get(Leases, NS, "single-lease");
  assert.equal(l.spec?.holderIdentity, "a");
  assert.equal(l.spec?.leaseDurationSeconds, 15);
  assert.equal(l.spec?.leaseTransitions, 0);
  assert.equal(l.spec?.acquireTime, rfc3339Micro(start));
  assert.match(l.spec?.renewTime ?? "", /^2026-01-01T00:00:00\.000000Z$/);

  await advance(clock, 5000);
  l = await client.get(Leases, NS, "single-lease");
  assert.equal(l.spec?.acquireTime, rfc3339Micro(start), "renewals keep acquireTime");
  assert.ok(Date.parse(l.spec?.renewTime ?? "") >= start + 4000, "renewTime moves forward");

  a.stop.abort();
  assert.equal(await a.done, "cancelled");
  assert.equal(a.stopped, 1);
  assert.equal(a.leading?.aborted, true);
  assert.equal(await gauge("single-lease"), 0);
  l = await client.get(Leases, NS, "single-lease");
  assert.equal(l.spec?.holderIdentity, "");
  assert.equal(l.spec?.leaseDurationSeconds, 1);
  assert.equal(l.spec?.leaseTransitions, 0);
});

Deno.test("a second candidate waits while the lease is renewed, then takes over after expiry", async () => {
  const client = new FakeClient();
  const clock = new FakeClock(start);
  const a = candidate(client, clock, "a", { releaseOnCancel: false });
  await advanceUntil(clock, () => a.started === 1, 1000);
  const b = candidate(client, clock, "b");

  // The holder keeps renewing: the challenger never gets in.
  await advance(clock, 40_000);
  assert.equal(b.started, 0);
  assert.equal(a.elector.isLeader(), true);
  assert.equal(b.elector.getLeader(), "a");
  assert.deepEqual(b.newLeaders, ["a"]);

  // The holder dies without releasing: its last record stands until it has been unchanged for
  // leaseDuration on the challenger's own clock.
  a.stop.abort();
  assert.equal(await a.done, "cancelled");
  const last = await lease(client);
  assert.equal(last.spec?.holderIdentity, "a", "no release");
  const lastRenew = Date.parse(last.spec?.renewTime ?? "");

  const tookOver = await advanceUntil(clock, () => b.started === 1, 30_000);
  // b first saw the final record within one retry period after it was written.
  assert.ok(tookOver - lastRenew >= 15_000, `took over after ${tookOver - lastRenew} ms`);
  assert.ok(tookOver - lastRenew <= 15_000 + 2 * 2_000 + 200);
  const l = await lease(client);
  assert.equal(l.spec?.holderIdentity, "b");
  assert.equal(l.spec?.leaseTransitions, 1);
  assert.deepEqual(b.newLeaders, ["a", "b"]);

  b.stop.abort();
  assert.equal(await b.done, "cancelled");
});

Deno.test("a crashed leader is replaced one lease duration after its last renewal, whatever the jitter", async () => {
  const client = new FakeClient();
  const clock = new FakeClock(start);
  const a = candidate(client, clock, "a", { releaseOnCancel: false });
  await advanceUntil(clock, () => a.started === 1, 1000);
  // Maximum jitter: client-go's loop would retry only every 4.4 s.
  const b = candidate(client, clock, "b", { random: () => 1 });
  await advance(clock, 10_000);
  a.stop.abort();
  assert.equal(await a.done, "cancelled");
  const lastRenew = Date.parse((await lease(client)).spec?.renewTime ?? "");
  const tookOver = await advanceUntil(clock, () => b.started === 1, 30_000);
  // The standby saw the last renewal through its watch when it was written and woke at the
  // expiry (plus a 100 ms margin), not at its next jittered poll.
  assert.ok(tookOver - lastRenew >= 15_000, `took over after ${tookOver - lastRenew} ms`);
  assert.ok(
    tookOver - lastRenew <= 15_000 + 100 + 200,
    `took over after ${tookOver - lastRenew} ms`,
  );
  b.stop.abort();
  assert.equal(await b.done, "cancelled");
});

Deno.test("a released lease is taken over at the next retry", async () => {
  const client = new FakeClient();
  const clock = new FakeClock(start);
  const a = candidate(client, clock, "a");
  await advanceUntil(clock, () => a.started === 1, 1000);
  const b = candidate(client, clock, "b");
  await advance(clock, 3000);
  assert.equal(b.started, 0);

  a.stop.abort();
  assert.equal(await a.done, "cancelled");
  assert.equal((await lease(client)).spec?.holderIdentity, "");
  const released = clock.now();
  const tookOver = await advanceUntil(clock, () => b.started === 1, 10_000);
  assert.ok(tookOver - released <= 2_000 + 100, `took ${tookOver - released} ms`);
  const l = await lease(client);
  assert.equal(l.spec?.holderIdentity, "b");
  assert.equal(l.spec?.leaseTransitions, 1);
  assert.equal(l.spec?.leaseDurationSeconds, 15);

  b.stop.abort();
  await b.done;
});

Deno.test("renewals failing for renewDeadline lose leadership", async () => {
  const client = new FakeClient();
  const clock = new FakeClock(start);
  const a = candidate(client, clock, "a", { name: "lost-lease" });
  await advanceUntil(clock, () => a.started === 1, 1000);
  await advance(clock, 3000);

  let failing = true;
  client.addReactor((action) =>
    failing && action.resource === Leases && action.verb !== "create"
      ? new Error("connection refused")
      : undefined
  );
  const failedAt = clock.now();
  await advance(clock, 8_000);
  assert.equal(a.stopped, 0, "still within the renew deadline");
  assert.equal(a.leading?.aborted, false);

  const lostAt = await advanceUntil(clock, () => a.stopped === 1, 10_000);
  assert.ok(lostAt - failedAt <= 10_000 + 2_000 + 200, `lost after ${lostAt - failedAt} ms`);
  assert.equal(await a.done, "lost");
  assert.equal(a.leading?.aborted, true);
  assert.equal(await gauge("lost-lease"), 0);
  failing = false;
});

Deno.test("a hung API call is cut off so the renew deadline still applies", async () => {
  const client = new FakeClient();
  const clock = new FakeClock(start);
  const a = candidate(client, clock, "a");
  await advanceUntil(clock, () => a.started === 1, 1000);
  client.addReactor((action) =>
    action.resource === Leases ? new Promise<Error | undefined>(() => {}) : undefined
  );
  await advanceUntil(clock, () => a.stopped === 1, 20_000);
  assert.equal(await a.done, "lost");
});

Deno.test("candidates racing for a new lease: exactly one wins", async () => {
  const client = new FakeClient();
  const clock = new FakeClock(start);
  const cs = ["a", "b", "c"].map((id) => candidate(client, clock, id));
  await advanceUntil(clock, () => cs.some((c) => c.started === 1), 1000);
  await advance(clock, 10_000);
  const leaders = cs.filter((c) => c.started === 1);
  assert.equal(leaders.length, 1);
  const holder = (await lease(client)).spec?.holderIdentity;
  assert.equal(holder, leaders[0].elector.identity);
  for (const c of cs) assert.equal(c.elector.getLeader(), holder);
  const creates = client.actions.filter((x) => x.verb === "create" && x.resource === Leases);
  assert.equal(creates.length, 3, "all three tried to create; two got AlreadyExists");
  for (const c of cs) c.stop.abort();
  await Promise.all(cs.map((c) => c.done));
});

Deno.test("candidates racing for a released lease: the stale update gets Conflict", async () => {
  const client = new FakeClient();
  const clock = new FakeClock(start);
  client.seed(Leases, {
    metadata: { name: "test-lease", namespace: NS },
    spec: {
      holderIdentity: "",
      leaseDurationSeconds: 1,
      leaseTransitions: 4,
      acquireTime: rfc3339Micro(start - 60_000),
      renewTime: rfc3339Micro(start - 60_000),
    },
  });
  const updates: string[] = [];
  client.addReactor((action) => {
    if (action.resource === Leases && action.verb === "update") {
      updates.push((action.object as Lease).spec?.holderIdentity ?? "");
    }
    return undefined;
  });
  const a = candidate(client, clock, "a");
  const b = candidate(client, clock, "b");
  await advance(clock, 5000);
  const winners = [a, b].filter((c) => c.started === 1);
  assert.equal(winners.length, 1);
  const l = await lease(client);
  assert.equal(l.spec?.holderIdentity, winners[0].elector.identity);
  assert.equal(l.spec?.leaseTransitions, 5);
  // Both attempted the takeover from the same resourceVersion; the loser's write conflicted.
  assert.ok(updates.includes("a") && updates.includes("b"));
  const conflicts = updates.filter((u) => u !== winners[0].elector.identity).length;
  assert.ok(conflicts >= 1);
  a.stop.abort();
  b.stop.abort();
  await Promise.all([a.done, b.done]);
});

Deno.test("leaderIdentity is <pod name>_<uuid>, unique per call, without the OS hostname", () => {
  const vars = (v: Record<string, string>) => (name: string) => v[name];
  const uuid = "[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}";
  const a = leaderIdentity(vars({ POD_NAME: "op-7d9f", HOSTNAME: "other" }));
  const b = leaderIdentity(vars({ POD_NAME: "op-7d9f" }));
  assert.match(a, new RegExp(`^op-7d9f_${uuid}$`));
  assert.notEqual(a, b);
  assert.match(leaderIdentity(vars({ HOSTNAME: "host-1" })), new RegExp(`^host-1_${uuid}$`));
  assert.match(leaderIdentity(vars({})), new RegExp(`^cocoon-operator_${uuid}$`));
});

Deno.test("leaderElectionNamespace reads the service-account file or fails clearly", async () => {
  assert.equal(await leaderElectionNamespace("given"), "given");
  const dir = await Deno.makeTempDir();
  try {
    const file = `${dir}/namespace`;
    await Deno.writeTextFile(file, "cocoon-system\n");
    assert.equal(await leaderElectionNamespace(undefined, file), "cocoon-system");
    await assert.rejects(
      () => leaderElectionNamespace(undefined, `${dir}/missing`),
      /not running in-cluster .*--leader-election-namespace or POD_NAMESPACE/,
    );
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
  const client = new FakeClient();
  const stopped: number[] = [];
  const elector = new LeaderElector({
    client,
    name: "x",
    identity: "a",
    namespaceFile: "/nonexistent/namespace",
    onStartedLeading: () => {},
    onStoppedLeading: () => stopped.push(1),
  });
  await assert.rejects(() => elector.run(new AbortController().signal), /not running in-cluster/);
  assert.equal(client.actions.length, 0);
});

Deno.test("invalid timings are rejected like client-go", () => {
  const base = {
    client: new FakeClient(),
    namespace: NS,
    name: "x",
    identity: "a",
    onStartedLeading: () => {},
    onStoppedLeading: () => {},
  };
  assert.throws(
    () => new LeaderElector({ ...base, leaseDurationMs: 10_000, renewDeadlineMs: 10_000 }),
    /leaseDuration must be greater than renewDeadline/,
  );
  assert.throws(
    () => new LeaderElector({ ...base, renewDeadlineMs: 2_400, retryPeriodMs: 2_000 }),
    /renewDeadline must be greater than retryPeriod/,
  );
  assert.throws(() => new LeaderElector({ ...base, identity: "" }), /identity is empty/);
});

Deno.test("a leader whose lease was taken by another holder stops leading", async () => {
  const client = new FakeClient();
  const clock = new FakeClock(start);
  const a = candidate(client, clock, "a");
  await advanceUntil(clock, () => a.started === 1, 1000);
  // Someone else overwrites the record (e.g. an operator forcing a handover); it keeps renewing.
  const steal = async () => {
    const l = await lease(client);
    await client.update(Leases, {
      ...l,
      spec: { ...l.spec, holderIdentity: "z", renewTime: rfc3339Micro(clock.now()) },
    });
  };
  await steal();
  const stolenAt = clock.now();
  const lostAt = await advanceUntil(clock, () => a.stopped === 1, 20_000, 100);
  assert.equal(await a.done, "lost");
  assert.ok(lostAt - stolenAt <= 10_000 + 2_000 + 200);
  assert.equal(a.elector.getLeader(), "z");
  assert.deepEqual(a.newLeaders, ["a", "z"]);
  // The release on the way out must not clear the new holder's claim.
  assert.equal((await lease(client)).spec?.holderIdentity, "z");
});

Deno.test("leadership changes are recorded as LeaderElection Events on the Lease", async () => {
  const client = new FakeClient();
  const clock = new FakeClock(start);
  const recorded: string[] = [];
  const a = candidate(client, clock, "a", {
    recorder: {
      event: (subject, type, reason, message) => {
        const ref = objectReference(subject);
        recorded.push(`${ref.kind}/${ref.name} ${type} ${reason}: ${message}`);
      },
      eventf: () => {},
    },
  });
  await advanceUntil(clock, () => a.started === 1, 1000);
  a.stop.abort();
  await a.done;
  assert.deepEqual(recorded, [
    "Lease/test-lease Normal LeaderElection: a became leader",
    "Lease/test-lease Normal LeaderElection: a stopped leading",
  ]);
});
