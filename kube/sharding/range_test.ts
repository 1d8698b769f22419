import assert from "node:assert/strict";
import {
  formatBound,
  formatRangeSet,
  FULL_RANGE,
  HASH_SPACE_END,
  hashRange,
  intersect,
  normalize,
  overlaps,
  parseBound,
  parseRangeSet,
  sameSet,
  size,
  subtract,
  union,
} from "./range.ts";

Deno.test("bounds use 16 hex digits, and 17 only for 2^64", () => {
  assert.equal(formatBound(0n), "0x0000000000000000");
  assert.equal(formatBound(HASH_SPACE_END), "0x10000000000000000");
  assert.equal(parseBound("0xffffffffffffffff"), HASH_SPACE_END - 1n);
  for (const bad of ["0x0", "0xFFFFFFFFFFFFFFFF", "0x10000000000000001", "ffffffffffffffff"]) {
    assert.throws(() => parseBound(bad), SyntaxError, bad);
  }
});

Deno.test("set algebra: union merges adjacent, subtract splits, intersect clips", () => {
  const a = [hashRange(0n, 10n), hashRange(10n, 20n)];
  assert.deepEqual(normalize(a), [{ start: 0n, end: 20n }]);
  assert.deepEqual(subtract([FULL_RANGE], [hashRange(5n, 7n)]), [
    { start: 0n, end: 5n },
    { start: 7n, end: HASH_SPACE_END },
  ]);
  assert.deepEqual(intersect([hashRange(0n, 10n)], [hashRange(5n, 15n)]), [{
    start: 5n,
    end: 10n,
  }]);
  assert.equal(overlaps([hashRange(0n, 10n)], [hashRange(10n, 11n)]), false);
  assert.equal(sameSet(union([hashRange(0n, 4n)], [hashRange(4n, 8n)]), [hashRange(0n, 8n)]), true);
  assert.equal(size([FULL_RANGE]), HASH_SPACE_END);
});

Deno.test("range sets round-trip through the annotation text and bad text is refused", () => {
  const set = [hashRange(0n, 1n << 62n), hashRange(3n << 62n, HASH_SPACE_END)];
  assert.deepEqual(parseRangeSet(formatRangeSet(set)), set);
  assert.deepEqual(parseRangeSet(""), []);
  for (const bad of ["0x0-0x1", "0x0000000000000001-0x0000000000000001", "x", "a-b-c"]) {
    assert.throws(() => parseRangeSet(bad), Error, bad);
  }
});
