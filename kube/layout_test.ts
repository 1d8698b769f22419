import assert from "node:assert/strict";
import { type ImportRef, importsOf, importsUnder } from "./testing/import_scan.ts";

/** A relative import that leaves kube/ (a bare specifier is an npm or node: package). */
function leavesKube(ref: ImportRef): boolean {
  if (ref.target === undefined) return false;
  if (ref.target.startsWith("kube/")) return false;
  // A test may use the repository's shared test fixtures (tests/); the library code may not.
  if (ref.file.endsWith("_test.ts") && ref.target.startsWith("tests/")) return false;
  return true;
}

const show = (ref: ImportRef) => `${ref.file}:${ref.line} imports ${ref.specifier}`;

Deno.test("kube/ imports nothing outside kube/ (type-only imports included): it is a library", () => {
  const imports = importsUnder("kube");
  // The scan must see the files' ordinary imports, or an empty result proves nothing.
  assert.ok(
    imports.some((ref) => ref.file === "kube/manager.ts" && ref.target === "kube/cache.ts"),
  );
  assert.deepEqual(imports.filter(leavesKube).map(show), []);
});

Deno.test("the layout scan sees type-only, multi-line, re-export and dynamic imports", () => {
  const source = [
    'import type { Widget } from "../common/widget.ts";',
    "import {",
    "  a,",
    "  b,",
    '} from "../snapshot/ab.ts";',
    'export { c } from "../metrics/c.ts";',
    'export type { D } from "./d.ts";',
    'import "../main.ts";',
    // Split so this file's own scan does not take the sample for an import of its own.
    "const lazy = await im" + 'port("../config.ts");',
    ' * import { e } from "../docs/example.ts";',
    'import { f } from "npm:@logtape/logtape@2.4.2";',
  ].join("\n");
  const refs = importsOf("kube/sample.ts", source);
  assert.deepEqual(refs.filter(leavesKube).map((r) => r.target), [
    "common/widget.ts",
    "snapshot/ab.ts",
    "metrics/c.ts",
    "main.ts",
    "config.ts",
  ]);
  assert.deepEqual(refs.map((r) => r.specifier).filter((s) => s === "./d.ts"), ["./d.ts"]);
});
