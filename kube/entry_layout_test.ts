import assert from "node:assert/strict";
import { type ImportRef, importsOf, importsUnder } from "./testing/import_scan.ts";

/** The folders whose code is written against kube/ as a library: reconcilers and the gate. */
const RECONCILER_FOLDERS = ["cocoonset", "hibernation", "snapshotgate"];
/** The two ways in: the library, and (for tests) its test doubles. */
const entries = new Set(["kube/mod.ts", "kube/testing/mod.ts"]);

/** An import of a kube/ module that is not one of its entries. */
function bypassesEntry(ref: ImportRef): boolean {
  return ref.target !== undefined && ref.target.startsWith("kube/") && !entries.has(ref.target);
}

const show = (ref: ImportRef) => `${ref.file}:${ref.line} imports ${ref.specifier}`;

Deno.test("reconcilers import kube/ only through kube/mod.ts (tests: also kube/testing/mod.ts)", () => {
  const imports = RECONCILER_FOLDERS.flatMap(importsUnder);
  // The scan must see the reconcilers' kube imports at all, or an empty result proves nothing.
  assert.ok(imports.some((ref) => ref.target?.startsWith("kube/")));
  assert.deepEqual(imports.filter(bypassesEntry).map(show), []);
});

Deno.test("the entry check flags a type-only import of a kube/ module, not the entries", () => {
  const source = [
    'import type { Pod } from "../kube/core.ts";',
    'import { FakeClient } from "../kube/testing/fake.ts";',
    'import { patchStatus } from "../kube/mod.ts";',
    'import { waitFor } from "../kube/testing/mod.ts";',
  ].join("\n");
  assert.deepEqual(importsOf("cocoonset/sample.ts", source).filter(bypassesEntry).map(show), [
    "cocoonset/sample.ts:1 imports ../kube/core.ts",
    "cocoonset/sample.ts:2 imports ../kube/testing/fake.ts",
  ]);
});
