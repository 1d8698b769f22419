/**
 * The files of cocoonset/ import each other without a cycle, type-only imports included: a
 * reader can start at any file and follow its imports down without coming back to it.
 */
import assert from "node:assert/strict";
import { findCycles } from "../tests/layout/find_cycles.ts";

const folder = new URL("./", import.meta.url);
// `import … from "./x.ts"`, `import type …`, `export … from "./x.ts"`, `import "./x.ts"`.
const LOCAL_SPECIFIER = /^\s*(?:import|export)\b[^"';]*?(?:from\s*)?["'](\.\/[\w.-]+\.ts)["']/gm;

/** Every .ts file of the folder and the files of the folder it imports. */
function importGraph(): Map<string, string[]> {
  const graph = new Map<string, string[]>();
  for (const entry of Deno.readDirSync(folder)) {
    if (!entry.isFile || !entry.name.endsWith(".ts")) continue;
    const text = Deno.readTextFileSync(new URL(entry.name, folder));
    const targets = [...text.matchAll(LOCAL_SPECIFIER)].map((m) => m[1].slice(2));
    graph.set(entry.name, [...new Set(targets)]);
  }
  return graph;
}

Deno.test("the cycle finder sees a type-only cycle of two files and none in a chain", () => {
  assert.deepEqual(findCycles(new Map([["a.ts", ["b.ts"]], ["b.ts", ["a.ts"]]])), [[
    "a.ts",
    "b.ts",
    "a.ts",
  ]]);
  assert.deepEqual(findCycles(new Map([["a.ts", ["b.ts"]], ["b.ts", ["c.ts"]], ["c.ts", []]])), []);
  const text = 'import type { X } from "./x.ts";\nexport { Y } from "./y.ts";\n';
  assert.deepEqual([...text.matchAll(LOCAL_SPECIFIER)].map((m) => m[1]), ["./x.ts", "./y.ts"]);
});

Deno.test("no file of cocoonset/ imports itself back through other files, type-only imports included", () => {
  const cycles = findCycles(importGraph());
  assert.deepEqual(cycles.map((c) => c.join(" → ")), []);
});
