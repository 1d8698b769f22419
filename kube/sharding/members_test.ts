import assert from "node:assert/strict";
import { isPredecessor, leasesToDelete, type MemberRecord, MemberTracker } from "./members.ts";
import { FULL_RANGE, hashRange } from "./range.ts";

const rec = (identity: string, version: string, held = ""): MemberRecord => ({
  identity,
  version,
  leaseDurationMs: 15_000,
  held,
  leaving: false,
});
const HELD = "0x0000000000000000-0x8000000000000000";

Deno.test("expiry counts from when this member saw the Lease change, not from its renewTime", () => {
  const t = new MemberTracker(5000);
  assert.equal(t.observe([rec("a", "1", HELD)], 100_000)[0].live, true);
  // Unchanged for 14.999 s: still live; at 15 s expired but still blocking for the margin.
  assert.equal(t.observe([rec("a", "1", HELD)], 114_999)[0].live, true);
  const expired = t.observe([rec("a", "1", HELD)], 115_000)[0];
  assert.deepEqual([expired.live, expired.blocking], [false, true]);
  assert.equal(t.observe([rec("a", "1", HELD)], 120_000)[0].blocking, false);
  // A renewal (new resourceVersion) makes it live again from now.
  assert.equal(t.observe([rec("a", "2", HELD)], 121_000)[0].live, true);
});

Deno.test("a deleted Lease keeps blocking what it announced until its expiry plus margin", () => {
  const t = new MemberTracker(5000);
  t.observe([rec("a", "1", HELD)], 0);
  const gone = t.observe([], 1000);
  assert.equal(gone.length, 1);
  assert.deepEqual([gone[0].live, gone[0].blocking], [false, true]);
  assert.deepEqual(gone[0].held, [hashRange(0n, 1n << 63n)]);
  assert.deepEqual(t.observe([], 20_000), []);
});

Deno.test("a deleted Lease that announced nothing is forgotten at once", () => {
  const t = new MemberTracker(5000);
  t.observe([rec("a", "1", "")], 0);
  assert.deepEqual(t.observe([], 1000), []);
});

Deno.test("an unreadable held annotation blocks the whole space and says why", () => {
  const t = new MemberTracker(5000);
  const [v] = t.observe([rec("a", "1", "0x0-0x1")], 0);
  assert.deepEqual(v.held, [FULL_RANGE]);
  assert.match(v.problem ?? "", /unreadable held annotation "0x0-0x1"/);
});

Deno.test("an unrenewed Lease is dead only past its expiry, the margin and the retention, with the version seen", () => {
  const t = new MemberTracker(5000, { deadLeaseRetentionMs: 60_000 });
  t.observe([rec("a", "7", HELD)], 0);
  const blocking = t.observe([rec("a", "7", HELD)], 19_999)[0];
  assert.deepEqual([blocking.blocking, blocking.dead], [true, undefined], "blocking: never dead");
  assert.equal(t.observe([rec("a", "7", HELD)], 79_999)[0].dead, undefined, "in the retention");
  const dead = t.observe([rec("a", "7", HELD)], 80_000)[0];
  assert.deepEqual([dead.live, dead.blocking, dead.dead, dead.version], [
    false,
    false,
    "expired",
    "7",
  ]);
  // Renewed after all (new resourceVersion): live again, not dead.
  const back = t.observe([rec("a", "8", HELD)], 81_000)[0];
  assert.deepEqual([back.live, back.dead], [true, undefined]);
  // Gone from the server: nothing to delete.
  t.observe([rec("a", "8", HELD)], 200_000);
  assert.deepEqual(t.observe([], 200_001), []);
});

Deno.test("this pod's previous process (same POD_NAME, other suffix) is neither live nor blocking at once, and dead", () => {
  const t = new MemberTracker(5000, { podName: "op-7d9f", self: "op-7d9f_new" });
  const views = t.observe([
    rec("op-7d9f_old", "3", HELD),
    rec("op-7d9f_new", "4", ""),
    rec("op-7d9f2_other", "5", ""),
  ], 0);
  const old = views.find((v) => v.identity === "op-7d9f_old")!;
  assert.deepEqual([old.live, old.blocking, old.dead, old.version], [
    false,
    false,
    "predecessor",
    "3",
  ]);
  const other = views.find((v) => v.identity === "op-7d9f2_other")!;
  assert.deepEqual([other.live, other.dead], [true, undefined], "another pod's prefix");
  assert.equal(views.find((v) => v.identity === "op-7d9f_new")!.dead, undefined, "itself");
  // Deleted: forgotten at once, it blocks nothing.
  assert.deepEqual(t.observe([rec("op-7d9f_new", "6", "")], 1000).map((v) => v.identity), [
    "op-7d9f_new",
  ]);
});

Deno.test("without POD_NAME (an identity from HOSTNAME) a same-prefix member is an ordinary live one", () => {
  const t = new MemberTracker(5000, { self: "host_a" });
  const [b] = t.observe([rec("host_b", "1", HELD)], 0);
  assert.deepEqual([b.live, b.blocking, b.dead], [true, true, undefined]);
  assert.equal(isPredecessor("host_b", "", "host_a"), false);
  assert.equal(isPredecessor("pod_x_y", "pod", "pod_z"), false, "a pod name holds no _");
  assert.equal(isPredecessor("pod_", "pod", "pod_z"), false);
  assert.equal(isPredecessor("pod_y", "pod", "pod_z"), true);
});

Deno.test("expired Leases are deleted by the first live member only; predecessors by their pod's process", () => {
  const live = { held: [], leaving: false, live: true, blocking: true };
  const views = [
    { identity: "a", ...live },
    { identity: "b", ...live },
    {
      identity: "c",
      ...live,
      live: false,
      blocking: false,
      dead: "expired" as const,
      version: "1",
    },
    {
      identity: "b_old",
      ...live,
      live: false,
      blocking: false,
      dead: "predecessor" as const,
      version: "2",
    },
  ];
  assert.deepEqual(leasesToDelete("a", views).map((v) => v.identity), ["c", "b_old"]);
  assert.deepEqual(leasesToDelete("b", views).map((v) => v.identity), ["b_old"]);
  // A leaving member collects only its pod's predecessor; once the first member is leaving, the
  // next live one collects the expired ones.
  assert.deepEqual(leasesToDelete("a", views, true).map((v) => v.identity), ["b_old"]);
  const aLeaving = views.map((v) => (v.identity === "a" ? { ...v, leaving: true } : v));
  assert.deepEqual(leasesToDelete("b", aLeaving).map((v) => v.identity), ["c", "b_old"]);
});
