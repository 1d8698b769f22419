/** The one creation order (creation_order.ts): instants, then "namespace/name"; unknown is last. */
import assert from "node:assert/strict";
import { compareCreation, type CreationOrderKey } from "./creation_order.ts";

function key(namespace: string, name: string, creationTimestamp?: string): CreationOrderKey {
  return { namespace, name, ...(creationTimestamp ? { creationTimestamp } : {}) };
}

/** a sorts strictly before b, whichever side it is passed on. */
function assertBefore(a: CreationOrderKey, b: CreationOrderKey): void {
  assert.ok(compareCreation(a, b) < 0, `${JSON.stringify(a)} before ${JSON.stringify(b)}`);
  assert.ok(compareCreation(b, a) > 0, `${JSON.stringify(b)} after ${JSON.stringify(a)}`);
}

Deno.test("the earlier creation time comes first, whatever the names", () => {
  assertBefore(key("z", "z", "2026-05-14T00:00:00Z"), key("a", "a", "2026-05-14T00:00:01Z"));
});

Deno.test("the same second is broken by namespace, then name", () => {
  const t = "2026-05-14T00:00:00Z";
  assertBefore(key("a", "z", t), key("b", "a", t));
  assertBefore(key("a", "x", t), key("a", "y", t));
  assert.equal(compareCreation(key("a", "x", t), key("a", "x", t)), 0);
});

Deno.test("times are compared as instants, not as text", () => {
  // As text "…00.500Z" sorts before "…00Z" ('.' < 'Z') and "+01:00" hides an earlier instant.
  assertBefore(key("a", "b", "2026-05-14T00:00:00Z"), key("a", "a", "2026-05-14T00:00:00.500Z"));
  assertBefore(key("a", "b", "2026-05-14T00:30:00+01:00"), key("a", "a", "2026-05-14T00:00:00Z"));
});

Deno.test("a missing or unreadable time comes last; two such are ordered by name", () => {
  const known = key("z", "z", "2026-05-14T00:00:00Z");
  assertBefore(known, key("a", "a"));
  assertBefore(known, key("a", "a", "not a time"));
  assertBefore(key("a", "a"), key("a", "b", "not a time"));
});

Deno.test("sorting with it gives one order whatever the input order", () => {
  const keys = [
    key("b", "x", "2026-05-14T00:00:01Z"),
    key("a", "y"),
    key("a", "x", "2026-05-14T00:00:01Z"),
    key("c", "c", "2026-05-14T00:00:00Z"),
  ];
  const want = ["c/c", "a/x", "b/x", "a/y"];
  for (const order of [keys, [...keys].reverse()]) {
    assert.deepEqual(
      [...order].sort(compareCreation).map((k) => `${k.namespace}/${k.name}`),
      want,
    );
  }
});
