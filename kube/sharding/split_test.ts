import assert from "node:assert/strict";
import { HASH_SPACE_END } from "./range.ts";
import { splitRanges } from "./split.ts";
import { seeded } from "./testdata/seeded.ts";

Deno.test("two members halve the space at 2^63, in sorted identity order", () => {
  const split = splitRanges(["b", "a"]);
  assert.deepEqual(split.get("a"), { start: 0n, end: 1n << 63n });
  assert.deepEqual(split.get("b"), { start: 1n << 63n, end: HASH_SPACE_END });
});

Deno.test("three members: equal widths, the last takes the remainder", () => {
  const split = splitRanges(["x", "y", "z"]);
  const w = HASH_SPACE_END / 3n;
  assert.deepEqual(split.get("x"), { start: 0n, end: w });
  assert.deepEqual(split.get("y"), { start: w, end: 2n * w });
  assert.deepEqual(split.get("z"), { start: 2n * w, end: HASH_SPACE_END });
});

Deno.test("property: 1..16 random members cover the space contiguously, independent of order", () => {
  for (let seed = 1; seed <= 300; seed++) {
    const random = seeded(seed);
    const n = 1 + Math.floor(random() * 16);
    const ids = Array.from({ length: n }, (_, i) => `pod-${Math.floor(random() * 1e6)}_${i}`);
    const split = splitRanges(ids);
    const shuffled = [...ids].sort(() => random() - 0.5);
    assert.deepEqual(splitRanges(shuffled), split, `seed ${seed}: order-dependent`);
    const ranges = [...split.values()].sort((a, b) => (a.start < b.start ? -1 : 1));
    assert.equal(ranges.length, n, `seed ${seed}`);
    let cursor = 0n;
    for (const r of ranges) {
      assert.equal(r.start, cursor, `seed ${seed}: gap or overlap at ${cursor}`);
      assert.ok(r.end > r.start);
      cursor = r.end;
    }
    assert.equal(cursor, HASH_SPACE_END, `seed ${seed}: space not covered`);
    const widths = ranges.map((r) => r.end - r.start);
    const min = widths.reduce((a, b) => (a < b ? a : b));
    const max = widths.reduce((a, b) => (a > b ? a : b));
    assert.ok(max - min < BigInt(n), `seed ${seed}: widths differ by more than the remainder`);
  }
});

Deno.test("no members, no ranges; duplicates count once", () => {
  assert.equal(splitRanges([]).size, 0);
  assert.deepEqual([...splitRanges(["a", "a"]).values()], [{ start: 0n, end: HASH_SPACE_END }]);
});
