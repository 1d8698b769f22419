import assert from "node:assert/strict";
import { MutableShardFilter, staticShardFilter } from "./filter.ts";
import { FULL_RANGE, HASH_SPACE_END } from "./range.ts";

const HALF = 1n << 63n;

Deno.test("staticShardFilter: the ranges merged, and no change is ever announced", () => {
  const filter = staticShardFilter([{ start: HALF, end: HASH_SPACE_END }, {
    start: 0n,
    end: HALF,
  }]);
  assert.deepEqual(filter.ranges(), [FULL_RANGE]);
  let calls = 0;
  const off = filter.onChange(() => calls++);
  off();
  assert.equal(calls, 0);
});

Deno.test("MutableShardFilter: listeners hear real changes only, and each unsubscribes alone", () => {
  const filter = new MutableShardFilter([{ start: 0n, end: HALF }]);
  const heard: string[] = [];
  const listener = () => heard.push("x");
  const offFirst = filter.onChange(listener);
  filter.onChange(listener);
  // The same hashes written differently (split in two) are no change.
  filter.set([{ start: 0n, end: 1n << 62n }, { start: 1n << 62n, end: HALF }]);
  assert.deepEqual(heard, []);
  filter.set([FULL_RANGE]);
  assert.deepEqual(heard, ["x", "x"]);
  assert.deepEqual(filter.ranges(), [FULL_RANGE]);
  offFirst();
  filter.set([]);
  assert.deepEqual(heard, ["x", "x", "x"]);
  assert.deepEqual(filter.ranges(), []);
});
