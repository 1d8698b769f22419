import assert from "node:assert/strict";
import { type MemberRecord, MemberTracker } from "./members.ts";
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
