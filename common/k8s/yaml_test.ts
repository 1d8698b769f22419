import assert from "node:assert/strict";
import * as jsyaml from "js-yaml";
import { toYaml, toYamlDocument } from "./yaml.ts";

Deno.test("toYaml: block style, sorted keys, kubectl-style sequences", () => {
  assert.equal(
    toYaml({ b: 1, a: { list: ["x", "y"], empty: {}, none: [] }, c: true, d: null }),
    [
      "a:",
      "  empty: {}",
      "  list:",
      "  - x",
      '  - "y"', // YAML 1.1 reads a bare y as true
      "  none: []",
      "b: 1",
      "c: true",
      "d: null",
      "",
    ].join("\n"),
  );
});

Deno.test("toYaml: sequences of mappings put the first key after the dash", () => {
  assert.equal(
    toYaml({ items: [{ name: "a", type: "string" }, { name: "b", nested: [{ k: 1 }] }] }),
    [
      "items:",
      "- name: a",
      "  type: string",
      "- name: b",
      "  nested:",
      "  - k: 1",
      "",
    ].join("\n"),
  );
});

Deno.test("toYaml: strings that a reader could mistake are quoted and read back exactly", () => {
  const tricky = [
    "True",
    "False",
    "yes",
    "no",
    "on",
    "null",
    "~",
    "",
    " lead",
    "trail ",
    "1",
    "1.5",
    "-1",
    ".5",
    "0x1F",
    "1e3",
    ".inf",
    "-",
    "- item",
    "key: value",
    "a #comment",
    "ends:",
    "!has(self.x) || self.y != 'release'",
    "^(\\+|-)?(([0-9]+(\\.[0-9]*)?)|(\\.[0-9]+))$",
    "&anchor",
    "*alias",
    "[flow]",
    "{flow}",
    "@at",
    "`tick",
    "%pct",
    "'single'",
    '"double"',
    "|pipe",
    ">fold",
    "tab\there",
    "Linux→ssh",
    "line1\nline2",
    "para\n\nafter blank",
    "trailing newline\n",
    "  indented\nblock",
    "trailing space \nnext",
    "\u0007bell",
  ];
  const doc = { values: tricky, map: Object.fromEntries(tricky.map((s, i) => [`k${i}`, s])) };
  assert.deepEqual(jsyaml.load(toYaml(doc)), doc);
  for (const s of tricky) assert.deepEqual(jsyaml.load(toYaml({ s })), { s }, JSON.stringify(s));
});

Deno.test("toYaml: multi-line text becomes a literal block", () => {
  assert.equal(toYaml({ d: "one\ntwo" }), "d: |-\n  one\n  two\n");
  assert.equal(toYaml({ l: ["one\n\ntwo"] }), "l:\n- |-\n  one\n\n  two\n");
});

Deno.test("toYaml: numbers, nested empties and undefined members", () => {
  const out = toYaml({ n: 0, neg: -3, big: 65535, f: 1.5, u: undefined, arr: [[1, 2], []] });
  assert.deepEqual(jsyaml.load(out), { n: 0, neg: -3, big: 65535, f: 1.5, arr: [[1, 2], []] });
  assert.throws(() => toYaml({ x: Number.NaN }), TypeError);
  assert.throws(() => toYaml({ x: () => 1 }), TypeError);
});

Deno.test("toYamlDocument starts with a document marker and is deterministic", () => {
  const v = { z: 1, a: { c: 2, b: 3 } };
  assert.equal(toYamlDocument(v), "---\na:\n  b: 3\n  c: 2\nz: 1\n");
  assert.equal(toYamlDocument(v), toYamlDocument(structuredClone(v)));
});
