import assert from "node:assert/strict";
import { newCocoonSet } from "./_test_support.ts";
import {
  ANNOTATION_REBUILD_HISTORY,
  backoffDelayMs,
  encodeRebuildHistory,
  readRebuildHistory,
  type RebuildHistory,
} from "./rebuild.ts";

function withHistory(raw: string) {
  return newCocoonSet("demo", (cs) => {
    cs.metadata.annotations = { [ANNOTATION_REBUILD_HISTORY]: raw };
  });
}

Deno.test("the rebuild history survives an encode/read round trip", () => {
  const t1 = Date.UTC(2026, 4, 14, 1, 0, 0);
  const t2 = Date.UTC(2026, 4, 14, 1, 0, 30);
  const history: RebuildHistory = new Map([
    [1, { count: 2, lastDeleted: t1 }],
    [2, { count: 1, lastDeleted: t2 }],
  ]);
  const encoded = encodeRebuildHistory(3, history);
  assert.deepEqual(JSON.parse(encoded), {
    "1": { count: 2, lastDeleted: "2026-05-14T01:00:00Z" },
    "2": { count: 1, lastDeleted: "2026-05-14T01:00:30Z" },
  });
  assert.deepEqual(readRebuildHistory(withHistory(encoded)), history);
});

Deno.test("encoding drops the history of slots above replicas", () => {
  const history: RebuildHistory = new Map([
    [1, { count: 1, lastDeleted: 0 }],
    [2, { count: 2, lastDeleted: 0 }],
    [7, { count: 3, lastDeleted: 0 }],
  ]);
  const got = readRebuildHistory(withHistory(encodeRebuildHistory(2, history)));
  assert.deepEqual([...got.keys()].sort(), [1, 2]);
  assert.equal(got.get(2)?.count, 2);
});

Deno.test("the rebuild backoff is 0, 1 s, 5 s, then 30 s", () => {
  const cases: [number, number][] = [[0, 0], [1, 1_000], [2, 5_000], [3, 30_000], [10, 30_000]];
  for (const [count, want] of cases) {
    assert.equal(backoffDelayMs(count), want, `after ${count} rebuilds`);
  }
});

Deno.test("an annotation that is not JSON reads as no history", () => {
  assert.equal(readRebuildHistory(withHistory("not-json")).size, 0);
});

Deno.test("a null annotation reads as an empty, writable history", () => {
  const got = readRebuildHistory(withHistory("null"));
  assert.equal(got.size, 0);
  got.set(1, { count: 1, lastDeleted: 0 });
  assert.deepEqual(JSON.parse(encodeRebuildHistory(2, got)), {
    "1": { count: 1, lastDeleted: "1970-01-01T00:00:00Z" },
  });
});

Deno.test("a null entry or null fields read as Go's zero values, keeping the other slots", () => {
  const got = readRebuildHistory(
    withHistory('{"1": null, "2": {"count": null, "lastDeleted": null}, "3": {"count": 2}}'),
  );
  assert.deepEqual([...got.entries()], [
    [1, { count: 0, lastDeleted: 0 }],
    [2, { count: 0, lastDeleted: 0 }],
    [3, { count: 2, lastDeleted: 0 }],
  ]);
});

Deno.test('an empty history encodes as "" (the annotation is removed, not left as {})', () => {
  assert.equal(encodeRebuildHistory(3, new Map()), "");
  assert.equal(encodeRebuildHistory(1, new Map([[2, { count: 1, lastDeleted: 0 }]])), "");
});

Deno.test("history keys are written in the order Go's encoder sorts them (as strings)", () => {
  const history: RebuildHistory = new Map(
    [10, 2, 1].map((slot) => [slot, { count: 1, lastDeleted: 0 }]),
  );
  const encoded = encodeRebuildHistory(10, history);
  // JSON.parse would list integer-like keys numerically again: read the order off the text.
  assert.deepEqual([...encoded.matchAll(/"(\d+)":\{/g)].map((m) => m[1]), ["1", "10", "2"]);
  assert.deepEqual(readRebuildHistory(withHistory(encoded)), history);
});

Deno.test("any malformed part makes the whole history unreadable, as Go's decoder does", () => {
  const bad = [
    "[]",
    '"x"',
    '{"a":{"count":1}}',
    '{"1":{"count":"1"}}',
    '{"1":{"count":1.5}}',
    '{"1":{"count":1,"lastDeleted":"yesterday"}}',
    '{"1":{"count":1},"2":{"count":"x"}}',
  ];
  for (const raw of bad) assert.equal(readRebuildHistory(withHistory(raw)).size, 0, raw);
  const partial = readRebuildHistory(withHistory('{"1":{}}'));
  assert.deepEqual(partial.get(1), { count: 0, lastDeleted: 0 }, "missing fields are zero");
  assert.equal(readRebuildHistory(newCocoonSet("demo")).size, 0, "no annotation");
});
