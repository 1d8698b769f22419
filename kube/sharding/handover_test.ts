import assert from "node:assert/strict";
import {
  actingRanges,
  announcedRanges,
  initialShardState,
  type ShardObservation,
  type ShardState,
  step,
} from "./handover.ts";
import type { MemberView } from "./members.ts";
import { FULL_RANGE, HASH_SPACE_END, hashRange, type RangeSet, sameSet } from "./range.ts";
import { HandoverSim } from "./testdata/handover_sim.ts";
import { seeded } from "./testdata/seeded.ts";
import { DEFAULT_SHARD_TIMING, type ShardTiming } from "./timing.ts";

const TIMING: ShardTiming = { ...DEFAULT_SHARD_TIMING, drainTimeoutMs: 20_000 };
const HALF = 1n << 63n;
const lower = hashRange(0n, HALF);
const upper = hashRange(HALF, HASH_SPACE_END);

function member(identity: string, held: RangeSet, extra: Partial<MemberView> = {}): MemberView {
  return { identity, held, leaving: false, live: true, blocking: true, ...extra };
}

/** One round: renew (succeeds, writing what the state announces), list, step. */
function round(
  state: ShardState,
  now: number,
  members: MemberView[],
  extra: Partial<ShardObservation> = {},
) {
  const obs: ShardObservation = {
    renewal: { sentAt: now, announced: announcedRanges(state) },
    members,
    busyHashes: [],
    ...extra,
  };
  return step(state, obs, now, TIMING);
}

Deno.test("a lone member claims the whole space, and starts only after its Lease announced it", () => {
  const first = round(initialShardState("a"), 0, []);
  assert.deepEqual(first.actions, []);
  assert.ok(sameSet(first.state.pending, [FULL_RANGE]));
  const second = round(first.state, 2000, []);
  assert.deepEqual(second.actions, [{ type: "start", ranges: [FULL_RANGE] }]);
  assert.ok(sameSet(second.state.active, [FULL_RANGE]));
});

Deno.test("a claim whose renewal failed is not started", () => {
  const first = round(initialShardState("a"), 0, []);
  const failed = step(first.state, { members: [], busyHashes: [] }, 2000, TIMING);
  assert.deepEqual(failed.actions, []);
  assert.deepEqual(failed.state.active, []);
});

Deno.test("a claim whose caches do not hold it yet stays pending; it starts once they do", () => {
  const first = round(initialShardState("a"), 0, []);
  const asked: RangeSet[] = [];
  const waiting = round(first.state, 2000, [], {
    cachesHold: (ranges) => {
      asked.push(ranges);
      return false;
    },
  });
  assert.deepEqual(waiting.actions, []);
  assert.deepEqual(waiting.state.active, []);
  assert.ok(sameSet(waiting.state.pending, [FULL_RANGE]), "still claimed, still announced");
  assert.ok(sameSet(asked[0], [FULL_RANGE]), "asked about the range it would start");
  const ready = round(waiting.state, 4000, [], { cachesHold: () => true });
  assert.deepEqual(ready.actions, [{ type: "start", ranges: [FULL_RANGE] }]);
});

Deno.test("a joiner waits until the old owner drained and stopped announcing the range", () => {
  let a = round(round(initialShardState("a"), 0, []).state, 2000, []).state;
  assert.ok(sameSet(a.active, [FULL_RANGE]));
  // b joins: a must give up the upper half; b may not start it while a announces it.
  let b = round(initialShardState("b"), 4000, [member("a", announcedRanges(a))]).state;
  const aStep = round(a, 4000, [member("b", announcedRanges(b))], { busyHashes: [HALF + 5n] });
  assert.deepEqual(aStep.actions, [{ type: "stop", ranges: [upper] }]);
  a = aStep.state;
  assert.ok(sameSet(actingRanges(a), [FULL_RANGE]), "a still drains the upper half");
  const bBlocked = round(b, 6000, [member("a", announcedRanges(a))]);
  assert.deepEqual(bBlocked.actions, []);
  b = bBlocked.state;
  // The work finishes: a releases; b starts once a's Lease no longer names the range.
  const aDone = round(a, 8000, [member("b", announcedRanges(b))]);
  assert.deepEqual(aDone.actions, [{ type: "release", ranges: [upper], timedOut: false }]);
  a = aDone.state;
  const bClaim = round(b, 10_000, [member("a", announcedRanges(a))]);
  b = bClaim.state;
  const bStart = bClaim.actions.length
    ? bClaim
    : round(b, 12_000, [member("a", announcedRanges(a))]);
  assert.deepEqual(bStart.actions, [{ type: "start", ranges: [upper] }]);
});

Deno.test("an expired owner blocks until the safety margin passed, then its range is taken", () => {
  const b = round(initialShardState("b"), 0, [member("a", [FULL_RANGE], { live: false })]);
  const blocked = round(b.state, 2000, [member("a", [FULL_RANGE], { live: false })]);
  assert.deepEqual(blocked.actions, []);
  assert.ok(sameSet(blocked.state.desired, [FULL_RANGE]), "the expired member gets no share");
  const free = member("a", [FULL_RANGE], { live: false, blocking: false });
  const claimed = round(blocked.state, 4000, [free]);
  const started = round(claimed.state, 6000, [free]);
  assert.deepEqual(started.actions, [{ type: "start", ranges: [FULL_RANGE] }]);
});

Deno.test("a member that cannot renew for the renew deadline abandons everything", () => {
  const a = round(round(initialShardState("a"), 0, []).state, 2000, []).state;
  const early = step(a, { busyHashes: [] }, 2000 + TIMING.renewDeadlineMs - 1, TIMING);
  assert.deepEqual(early.actions, []);
  const late = step(a, { busyHashes: [] }, 2000 + TIMING.renewDeadlineMs, TIMING);
  assert.deepEqual(late.actions, [{ type: "abandon", ranges: [FULL_RANGE] }]);
  assert.deepEqual(actingRanges(late.state), []);
});

Deno.test("a drain that outlives the drain timeout releases with timedOut", () => {
  let a = round(round(initialShardState("a"), 0, []).state, 2000, []).state;
  a = round(a, 4000, [member("b", [])], { busyHashes: [HALF] }).state;
  const waiting = round(a, 4000 + TIMING.drainTimeoutMs - 1, [member("b", [])], {
    busyHashes: [HALF],
  });
  assert.deepEqual(waiting.actions, []);
  const timedOut = round(waiting.state, 4000 + TIMING.drainTimeoutMs, [member("b", [])], {
    busyHashes: [HALF],
  });
  assert.deepEqual(timedOut.actions, [{ type: "release", ranges: [upper], timedOut: true }]);
  assert.ok(sameSet(timedOut.state.active, [lower]));
});

Deno.test("two claims on one range: the larger identity yields, the smaller starts", () => {
  // Views disagree: each thinks the other expired, so each claims the whole space.
  const alone = (id: string, held: RangeSet) => member(id, held, { live: false });
  const a = round(initialShardState("a"), 0, [alone("b", [])]).state;
  const b = round(initialShardState("b"), 0, [alone("a", [])]).state;
  const bNext = round(b, 2000, [alone("a", announcedRanges(a))]);
  const aNext = round(a, 2000, [alone("b", announcedRanges(b))]);
  assert.deepEqual(bNext.actions, []);
  assert.deepEqual(bNext.state.pending, [], "b withdrew its claim");
  assert.deepEqual(aNext.actions, [], "a must not start while b's claim is visible");
  const aStart = round(aNext.state, 4000, [alone("b", announcedRanges(bNext.state))]);
  assert.deepEqual(aStart.actions, [{ type: "start", ranges: [FULL_RANGE] }]);
});

Deno.test("leaving drains everything, then reports left once the Lease announces nothing", () => {
  let a = round(round(initialShardState("a"), 0, []).state, 2000, []).state;
  const stop = round(a, 4000, [], { leaving: true });
  assert.deepEqual(stop.actions.map((x) => x.type), ["stop", "release"]);
  a = stop.state;
  const left = round(a, 6000, [], { leaving: true });
  assert.deepEqual(left.actions, [{ type: "left" }]);
});

Deno.test("randomized join/leave/crash/partition: never two members on one hash, then converged", () => {
  const seeds = Number(Deno.env.get("SHARD_SIM_SEEDS") ?? 150);
  let handovers = 0;
  for (let seed = 1; seed <= seeds; seed++) {
    const random = seeded(seed);
    const sim = new HandoverSim(TIMING, random);
    const initial = 1 + Math.floor(random() * 3);
    for (let i = 0; i < initial; i++) sim.join();
    let t = 0;
    const faults = 4 + Math.floor(random() * 8);
    for (let f = 0; f < faults; f++) {
      t += 1000 + Math.floor(random() * 20_000);
      sim.runUntil(t);
      const r = random();
      if (r < 0.3 && sim.aliveCount() < 6) sim.join();
      else if (r < 0.5 && sim.stayingCount() > 1) sim.leaveOne();
      else if (r < 0.7 && sim.aliveCount() > 1) sim.crashOne();
      else sim.partitionOne(2000 + Math.floor(random() * 30_000));
      assert.deepEqual(sim.violations, [], `seed ${seed}`);
    }
    if (sim.stayingCount() === 0) sim.join();
    sim.runUntil(t + 240_000);
    const report = sim.report();
    assert.deepEqual(report.violations, [], `seed ${seed}`);
    const detail = `\n${report.states.join("\n")}\n${report.server.join("\n")}`;
    assert.ok(report.finalCovered, `seed ${seed}: the space is not covered${detail}`);
    assert.ok(report.finalBalanced, `seed ${seed}: members do not hold their split${detail}`);
    handovers += report.handovers;
  }
  assert.ok(handovers > seeds * 3, `only ${handovers} hand-overs: the simulation is too tame`);
});

Deno.test("randomized with same-pod restarts: never two members on one hash, dead Leases collected", () => {
  const seeds = Number(Deno.env.get("SHARD_SIM_SEEDS") ?? 150);
  let restarts = 0;
  let deletions = 0;
  for (let seed = 1; seed <= seeds; seed++) {
    const random = seeded(seed * 7919);
    const sim = new HandoverSim(TIMING, random);
    const initial = 1 + Math.floor(random() * 3);
    for (let i = 0; i < initial; i++) sim.join();
    let t = 0;
    const faults = 4 + Math.floor(random() * 8);
    for (let f = 0; f < faults; f++) {
      t += 1000 + Math.floor(random() * 20_000);
      sim.runUntil(t);
      const r = random();
      if (r < 0.4) {
        sim.restartOne();
        restarts++;
      } else if (r < 0.55 && sim.aliveCount() < 6) sim.join();
      else if (r < 0.7 && sim.stayingCount() > 1) sim.leaveOne();
      else if (r < 0.85 && sim.aliveCount() > 1) sim.crashOne();
      else sim.partitionOne(2000 + Math.floor(random() * 30_000));
      assert.deepEqual(sim.violations, [], `seed ${seed}`);
    }
    if (sim.stayingCount() === 0) sim.join();
    // Long enough for every dead Lease to pass expiry, margin and retention.
    sim.runUntil(t + 240_000);
    const report = sim.report();
    assert.deepEqual(report.violations, [], `seed ${seed}`);
    const detail = `\n${report.states.join("\n")}\n${report.server.join("\n")}`;
    assert.ok(report.finalCovered, `seed ${seed}: the space is not covered${detail}`);
    assert.ok(report.finalBalanced, `seed ${seed}: members do not hold their split${detail}`);
    assert.deepEqual(report.deadLeases, [], `seed ${seed}: dead members' Leases left${detail}`);
    deletions += report.deletions;
  }
  assert.ok(restarts > seeds, `only ${restarts} restarts: the simulation is too tame`);
  assert.ok(deletions >= restarts, `${deletions} deletions for ${restarts} restarts`);
});
