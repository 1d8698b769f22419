import assert from "node:assert/strict";
import { type Lease, Leases } from "../core.ts";
import { LeaderElector } from "../leader.ts";
import { FakeClient } from "../testing/fake.ts";
import { FakeClock } from "../testing/fake_clock.ts";
import { flushMicrotasks } from "../testing/wait.ts";
import { decideFence, type FenceInput, LeaderFence } from "./fence.ts";
import type { MemberView } from "./members.ts";
import { DEFAULT_SHARD_TIMING } from "./timing.ts";

const TIMING = DEFAULT_SHARD_TIMING;
const LEASE = "cocoon-operator.cocoonset.cocoonstack.io";
const GO_LEADER = "cocoon-operator-5d8f7c9b4-x2x7q_9f1c2e4a-7b7d-4a51-a3d6-0c1f2d3e4b5a";

function view(identity: string, over: Partial<MemberView> = {}): MemberView {
  return { identity, held: [], leaving: false, live: true, blocking: true, ...over };
}

function input(over: Partial<FenceInput>): FenceInput {
  return {
    sinceChangeMs: 0,
    self: "b",
    leaving: false,
    members: [view("a"), view("c")],
    known: new Set(["a", "b", "c"]),
    takeoverAfterMs: 5_000,
    ...over,
  };
}

const record = (holder: string, leaseDurationMs = 15_000) => ({ holder, leaseDurationMs });

Deno.test("decideFence: free, own, member and foreign holders", () => {
  const cases: [string, Partial<FenceInput>, string, string][] = [
    ["no Lease", {}, "free", "take"],
    ["no Lease, leaving", { leaving: true }, "free", "none"],
    ["released (no holder)", { record: record("") }, "free", "take"],
    ["its own", { record: record("b") }, "ours", "renew"],
    ["its own, leaving", { record: record("b"), leaving: true }, "ours", "renew"],
    ["a live member renewing", { record: record("a"), sinceChangeMs: 2_000 }, "member", "none"],
    ["a member gone quiet", { record: record("a"), sinceChangeMs: 5_000 }, "member", "take"],
    [
      "a member that is leaving",
      { record: record("a"), members: [view("a", { leaving: true }), view("c")] },
      "member",
      "take",
    ],
    [
      "a leaving member, itself leaving, another stays",
      {
        record: record("a"),
        leaving: true,
        members: [view("a", { leaving: true }), view("c")],
      },
      "member",
      "none",
    ],
    [
      "a leaving member, itself leaving, nobody stays",
      { record: record("a"), leaving: true, members: [view("a", { leaving: true })] },
      "member",
      "take",
    ],
    [
      "a member no longer listed",
      { record: record("a"), members: [view("c")] },
      "member",
      "take",
    ],
    [
      "a member whose Lease expired",
      { record: record("a"), members: [view("a", { live: false }), view("c")] },
      "member",
      "take",
    ],
    ["a foreign leader", { record: record(GO_LEADER), sinceChangeMs: 14_999 }, "foreign", "none"],
    [
      "a foreign leader gone quiet",
      { record: record(GO_LEADER), sinceChangeMs: 15_000 },
      "free",
      "take",
    ],
    [
      "a foreign leader gone quiet, leaving",
      { record: record(GO_LEADER), sinceChangeMs: 15_000, leaving: true },
      "free",
      "none",
    ],
    [
      "a foreign leader with a short Lease",
      { record: record(GO_LEADER, 3_000), sinceChangeMs: 3_000 },
      "free",
      "take",
    ],
  ];
  for (const [what, over, status, write] of cases) {
    assert.deepEqual(decideFence(input(over)), { status, write }, what);
  }
});

/** A Lease as client-go's LeaseLock writes it for a leader of the Go original. */
function goLeaderLease(now: number): Lease {
  const at = new Date(now).toISOString().replace("Z", "000Z");
  return {
    apiVersion: "coordination.k8s.io/v1",
    kind: "Lease",
    metadata: { name: LEASE, namespace: "ops" },
    spec: {
      holderIdentity: GO_LEADER,
      leaseDurationSeconds: 15,
      acquireTime: at,
      renewTime: at,
      leaseTransitions: 3,
    },
  };
}

function setup(identity = "shard-b_1") {
  const clock = new FakeClock(1_000_000);
  const client = new FakeClient({ clock });
  const log: string[] = [];
  const fence = new LeaderFence({
    client,
    namespace: "ops",
    name: LEASE,
    identity,
    timing: TIMING,
    clock,
    onOpen: () => log.push(`${clock.now()} open`),
    onClose: (reason) => log.push(`${clock.now()} close ${reason}`),
  });
  /** Runs rounds every retry period for ms, with these members listed. */
  const rounds = async (ms: number, members: () => MemberView[] = () => [], leaving = false) => {
    const stop = new AbortController();
    for (let t = 0; t < ms; t += TIMING.retryPeriodMs) {
      await fence.round(members(), leaving, stop.signal);
      for (let s = 0; s < TIMING.retryPeriodMs; s += 100) {
        clock.advance(100);
        await flushMicrotasks();
      }
    }
  };
  return { clock, client, fence, log, rounds };
}

Deno.test("a live Go leader keeps the fence closed; once its Lease goes unrenewed for its duration the member takes it", async () => {
  const { clock, client, fence, log, rounds } = setup();
  let lease = await client.create(Leases, goLeaderLease(clock.now()));
  // The Go leader renews every 2 s for a minute.
  const until = clock.now() + 60_000;
  let lastRenewal = 0;
  const renew = async () => {
    while (clock.now() < until) {
      lastRenewal = clock.now();
      lease = await client.update(Leases, {
        ...lease,
        spec: { ...lease.spec, renewTime: new Date(clock.now()).toISOString() },
      });
      await new Promise<void>((r) => clock.setTimeout(r, 2_000));
    }
  };
  const renewing = renew();
  await rounds(60_000);
  await renewing;
  assert.equal(fence.status, "foreign");
  assert.equal(fence.open(), false);
  assert.equal(log.length, 0, "never opened");
  assert.equal((await client.get(Leases, "ops", LEASE)).spec?.holderIdentity, GO_LEADER);
  // Killed (SIGKILL, or SIGTERM: the Go original does not release): nobody renews any more.
  await rounds(20_000);
  const taken = await client.get(Leases, "ops", LEASE);
  assert.equal(taken.spec?.holderIdentity, "shard-b_1");
  assert.equal(taken.spec?.leaseTransitions, 4);
  assert.equal(fence.status, "ours");
  assert.equal(fence.open(), true);
  const opened = Number(log.find((l) => l.endsWith("open"))?.split(" ")[0]);
  assert.ok(opened - lastRenewal >= 15_000, `opened ${opened - lastRenewal} ms after`);
  assert.ok(opened - lastRenewal <= 15_000 + 2 * TIMING.retryPeriodMs);
});

Deno.test("a member holding the fence renews it every round: a Go-style candidate never acquires, and does once the group is gone", async () => {
  const { clock, client, fence, rounds } = setup();
  let leading = false;
  const goStop = new AbortController();
  const candidate = new LeaderElector({
    client,
    namespace: "ops",
    name: LEASE,
    identity: GO_LEADER,
    clock,
    random: () => 0,
    // As controller-runtime's defaults, and no release on SIGTERM.
    leaseDurationMs: 15_000,
    renewDeadlineMs: 10_000,
    retryPeriodMs: 2_000,
    releaseOnCancel: false,
    onStartedLeading: () => {
      leading = true;
    },
    onStoppedLeading: () => {},
  });
  await rounds(TIMING.retryPeriodMs);
  assert.equal(fence.status, "ours");
  const election = candidate.run(goStop.signal);
  await rounds(90_000);
  assert.equal(leading, false, "the candidate acquired while the member renewed");
  assert.equal(fence.open(), true);
  assert.equal((await client.get(Leases, "ops", LEASE)).spec?.holderIdentity, "shard-b_1");
  // The last member is gone (no more rounds): the Lease is left to expire, not released.
  const lastRenewal = clock.now() - TIMING.retryPeriodMs;
  fence.stop();
  for (let t = 0; t < 30_000 && !leading; t += 100) {
    clock.advance(100);
    await flushMicrotasks();
  }
  assert.equal(leading, true);
  assert.ok(clock.now() - lastRenewal >= 15_000, `acquired ${clock.now() - lastRenewal} ms after`);
  goStop.abort();
  clock.advance(10_000);
  await election;
});

Deno.test("two members: the holder leaves and the other takes the Lease over with no gap in reconciling", async () => {
  const clock = new FakeClock(1_000_000);
  const client = new FakeClient({ clock });
  const events: string[] = [];
  const make = (identity: string) =>
    new LeaderFence({
      client,
      namespace: "ops",
      name: LEASE,
      identity,
      timing: TIMING,
      clock,
      onOpen: () => events.push(`${identity} open`),
      onClose: () => events.push(`${identity} close`),
    });
  const a = make("a_1");
  const b = make("b_1");
  const stop = new AbortController();
  let aLeaving = false;
  const round = async () => {
    await a.round([view("b_1")], aLeaving, stop.signal);
    await b.round([view("a_1", { leaving: aLeaving })], false, stop.signal);
    clock.advance(TIMING.retryPeriodMs);
    await flushMicrotasks();
  };
  for (let i = 0; i < 5; i++) await round();
  assert.equal(a.status, "ours");
  assert.equal(b.status, "member");
  assert.ok(a.open() && b.open());
  aLeaving = true;
  for (let i = 0; i < 3; i++) await round();
  assert.equal(b.status, "ours");
  assert.equal(a.status, "member", "the leaver sees the successor after its renewal conflicts");
  assert.equal((await client.get(Leases, "ops", LEASE)).spec?.holderIdentity, "b_1");
  assert.deepEqual(events.filter((e) => e.endsWith("close")), []);
});

Deno.test("the holder is killed: another member takes over before its own acting deadline", async () => {
  const clock = new FakeClock(1_000_000);
  const client = new FakeClient({ clock });
  const closes: string[] = [];
  const make = (identity: string) =>
    new LeaderFence({
      client,
      namespace: "ops",
      name: LEASE,
      identity,
      timing: TIMING,
      clock,
      onClose: () => closes.push(identity),
    });
  const a = make("a_1");
  const b = make("b_1");
  const stop = new AbortController();
  for (let i = 0; i < 3; i++) {
    await a.round([view("b_1")], false, stop.signal);
    await b.round([view("a_1")], false, stop.signal);
    clock.advance(TIMING.retryPeriodMs);
  }
  a.stop(); // SIGKILL: a's member Lease still looks live for a while
  for (let i = 0; i < 5; i++) {
    await b.round([view("a_1")], false, stop.signal);
    clock.advance(TIMING.retryPeriodMs);
    await flushMicrotasks();
  }
  assert.equal(b.status, "ours");
  assert.deepEqual(closes, []);
});

Deno.test("the holder cut off from the API server stops reconciling at its renew deadline, before anyone can see the Lease expire", async () => {
  const { clock, client, fence, log } = setup();
  const stop = new AbortController();
  await fence.round([], false, stop.signal);
  assert.equal(fence.status, "ours");
  const renewedAt = clock.now();
  client.addReactor(() => new Promise<Error | undefined>(() => {})); // never answers
  for (let t = 0; t < TIMING.leaseDurationMs; t += TIMING.retryPeriodMs) {
    const round = fence.round([], false, stop.signal);
    for (let s = 0; s < TIMING.retryPeriodMs * 2; s += 100) {
      clock.advance(100);
      await flushMicrotasks();
    }
    await round;
  }
  const closed = log.find((l) => l.includes("close"));
  assert.ok(closed, log.join("\n"));
  assert.equal(Number(closed.split(" ")[0]) - renewedAt, TIMING.renewDeadlineMs);
  assert.equal(fence.open(), false);
});

Deno.test("a member that cannot read the Lease any more stops reconciling a renew deadline after it last saw it change", async () => {
  const clock = new FakeClock(1_000_000);
  const client = new FakeClient({ clock });
  const stop = new AbortController();
  const a = new LeaderFence({
    client,
    namespace: "ops",
    name: LEASE,
    identity: "a_1",
    timing: TIMING,
    clock,
  });
  await a.round([view("b_1")], false, stop.signal);
  const closes: number[] = [];
  const seenBy = new FakeClient({ clock });
  // b reads through a client of its own that sees the same Lease, then stops answering.
  const lease = await client.get(Leases, "ops", LEASE);
  await seenBy.create(Leases, { ...lease, metadata: { name: LEASE, namespace: "ops" } });
  const b = new LeaderFence({
    client: seenBy,
    namespace: "ops",
    name: LEASE,
    identity: "b_1",
    timing: TIMING,
    clock,
    onClose: () => closes.push(clock.now()),
  });
  await b.round([view("a_1")], false, stop.signal);
  const seenAt = clock.now();
  assert.equal(b.status, "member");
  assert.equal(b.open(), true);
  seenBy.addReactor(() => new Error("connection refused"));
  for (let t = 0; t < TIMING.leaseDurationMs; t += TIMING.retryPeriodMs) {
    clock.advance(TIMING.retryPeriodMs);
    await b.round([view("a_1")], false, stop.signal);
  }
  assert.deepEqual(closes, [seenAt + TIMING.renewDeadlineMs]);
});
