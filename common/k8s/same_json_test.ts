import assert from "node:assert/strict";
import { emptyStringAbsent, sameJson } from "./same_json.ts";

Deno.test("sameJson ignores what JSON leaves out and the order of keys", () => {
  assert.ok(sameJson({ a: 1, b: undefined, c: [1, 2] }, { c: [1, 2], a: 1 }));
  assert.ok(sameJson({ at: new Date(0) }, { at: "1970-01-01T00:00:00.000Z" }), "toJSON honoured");
  assert.ok(sameJson(undefined, undefined));
  assert.ok(!sameJson({ a: 1 }, { a: 2 }));
  assert.ok(!sameJson({ a: [1, 2] }, { a: [2, 1] }), "array order counts");
  assert.ok(!sameJson({ a: "" }, {}), "without a reviver an empty string is a value");
  assert.ok(!sameJson({}, undefined));
});

Deno.test("sameJson with emptyStringAbsent: an empty string member equals a missing one", () => {
  assert.ok(sameJson([{ name: "e", prefix: "" }], [{ name: "e" }], emptyStringAbsent));
  assert.ok(!sameJson([{ name: "e", prefix: "x" }], [{ name: "e" }], emptyStringAbsent));
  assert.ok(
    !sameJson({ args: ["", "a"] }, { args: ["a"] }, emptyStringAbsent),
    "array elements stay",
  );
});
