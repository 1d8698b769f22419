import assert from "node:assert/strict";
import { deepCopy } from "./object.ts";

Deno.test("deepCopy: every JSON shape is copied equal and independent", () => {
  const original = JSON.parse(
    '{"metadata":{"name":"a","labels":{"x":"1"},"ownerReferences":[{"uid":"u"}]},' +
      '"spec":{"n":0,"f":1.5,"t":true,"no":false,"nil":null,"s":"","deep":[[1,[2]],{"k":[]}]}}',
  );
  const copy = deepCopy(original);
  assert.deepEqual(copy, original);
  assert.equal(JSON.stringify(copy), JSON.stringify(original), "key order kept");
  copy.metadata.labels.x = "2";
  copy.metadata.ownerReferences[0].uid = "v";
  copy.spec.deep[0][1].push(3);
  assert.equal(original.metadata.labels.x, "1");
  assert.equal(original.metadata.ownerReferences[0].uid, "u");
  assert.deepEqual(original.spec.deep[0], [1, [2]]);
  for (const v of [null, 0, "", false, "s"]) assert.equal(deepCopy(v), v);
});

Deno.test("deepCopy: keys named __proto__ and constructor stay plain data", () => {
  // ConfigMap data keys and preserved-unknown fields may use any name JSON allows.
  const original = JSON.parse('{"data":{"__proto__":{"polluted":true},"constructor":"c"}}');
  const copy = deepCopy(original);
  assert.deepEqual(Object.keys(copy.data), ["__proto__", "constructor"]);
  assert.equal(Object.getPrototypeOf(copy.data), Object.prototype);
  assert.equal(copy.data.polluted, undefined);
  assert.equal(JSON.stringify(copy), JSON.stringify(original));
});

Deno.test("deepCopy: undefined fields are kept and array holes read as undefined", () => {
  // Neither reaches the API (JSON drops the field, writes a hole as null), so both copies send
  // the same bytes as the original.
  const original = { a: undefined, b: [1, , 3] };
  const copy = deepCopy(original);
  assert.ok(Object.hasOwn(copy, "a"));
  assert.deepEqual(copy.b, [1, undefined, 3]);
  assert.equal(JSON.stringify(copy), JSON.stringify(original));
});
