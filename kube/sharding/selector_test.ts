import assert from "node:assert/strict";
import { fnv1a64, hashHex } from "./hash.ts";
import { FULL_RANGE, HASH_SPACE_END } from "./range.ts";
import {
  formatShardSelector,
  parseShardSelector,
  renderShardSelector,
  selectorMatches,
  serverAppliedShard,
} from "./selector.ts";

/**
 * Vectors computed by k8s.io/apimachinery v0.36.3 pkg/sharding (HashField, Selector.Matches on a
 * Pod with the namespace set) and k8s.io/apiserver v0.36.3 pkg/sharding (Parse, String).
 */
interface Vectors {
  hashes: { value: string; hash: string }[];
  matches: { selector: string; namespace: string; matches: boolean }[];
  parses: { selector: string; valid: boolean; string?: string }[];
}
const vectors: Vectors = JSON.parse(
  await Deno.readTextFile(new URL("./testdata/apimachinery_v0.36.3_vectors.json", import.meta.url)),
);

Deno.test("hashHex equals the server's HashField on every vector", () => {
  assert.ok(vectors.hashes.length > 40);
  for (const v of vectors.hashes) assert.equal(hashHex(v.value), v.hash, JSON.stringify(v.value));
});

Deno.test("the empty namespace (cluster-scoped objects) hashes to the FNV offset basis", () => {
  assert.equal(fnv1a64(""), 0xcbf29ce484222325n);
});

Deno.test("selectorMatches answers as the server's Matches on every vector", () => {
  assert.ok(vectors.matches.some((m) => m.matches) && vectors.matches.some((m) => !m.matches));
  for (const m of vectors.matches) {
    assert.equal(
      selectorMatches(parseShardSelector(m.selector), m.namespace),
      m.matches,
      `${m.selector} on ${JSON.stringify(m.namespace)}`,
    );
  }
});

Deno.test("start is inclusive and end exclusive, at the exact hash of a namespace", () => {
  const h = fnv1a64("default");
  const at = { field: "object.metadata.namespace" as const, ranges: [{ start: h, end: h + 1n }] };
  const before = { ...at, ranges: [{ start: h - 1n, end: h }] };
  assert.equal(selectorMatches(at, "default"), true);
  assert.equal(selectorMatches(before, "default"), false);
});

Deno.test("parseShardSelector accepts and rejects what the server's parser does", () => {
  for (const p of vectors.parses) {
    if (p.valid) {
      assert.equal(renderShardSelector(parseShardSelector(p.selector)), p.string, p.selector);
    } else {
      assert.throws(() => parseShardSelector(p.selector), SyntaxError, p.selector);
    }
  }
});

Deno.test("formatShardSelector writes the full range with the 17-digit end and merges ranges", () => {
  assert.equal(
    formatShardSelector([FULL_RANGE]),
    "shardRange(object.metadata.namespace, '0x0000000000000000', '0x10000000000000000')",
  );
  assert.equal(
    formatShardSelector([{ start: 1n << 63n, end: HASH_SPACE_END }, { start: 0n, end: 1n << 63n }]),
    "shardRange(object.metadata.namespace, '0x0000000000000000', '0x10000000000000000')",
  );
  assert.equal(
    formatShardSelector([{ start: 0xcn << 60n, end: HASH_SPACE_END }, {
      start: 0n,
      end: 1n << 62n,
    }]),
    "shardRange(object.metadata.namespace, '0x0000000000000000', '0x4000000000000000') || " +
      "shardRange(object.metadata.namespace, '0xc000000000000000', '0x10000000000000000')",
  );
  assert.throws(() => formatShardSelector([]), RangeError);
});

Deno.test("every selector formatShardSelector writes reads back to the same ranges", () => {
  const ranges = [{ start: 5n, end: 77n }, { start: 0xfffffffffffffff0n, end: HASH_SPACE_END }];
  const parsed = parseShardSelector(formatShardSelector(ranges));
  assert.deepEqual(parsed.ranges, ranges);
  assert.equal(parsed.field, "object.metadata.namespace");
});

Deno.test("serverAppliedShard trusts only a shardInfo that echoes the requested ranges", () => {
  const requested = parseShardSelector(formatShardSelector([{ start: 0n, end: 1n << 63n }]));
  const echo = { shardInfo: { selector: formatShardSelector([{ start: 0n, end: 1n << 63n }]) } };
  assert.equal(serverAppliedShard(echo, requested), true);
  assert.equal(serverAppliedShard({}, requested), false, "no shardInfo: the gate is off");
  assert.equal(serverAppliedShard(undefined, requested), false);
  const other = { shardInfo: { selector: formatShardSelector([{ start: 0n, end: 1n << 62n }]) } };
  assert.equal(serverAppliedShard(other, requested), false);
  assert.equal(serverAppliedShard({ shardInfo: { selector: "garbage" } }, requested), false);
});
