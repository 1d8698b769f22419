/**
 * No production module imports itself back through others, type-only imports included, across
 * the whole tree (main.ts, operator.ts, kube/, common/, snapshot/, metrics/, snapshotgate/, cocoonset/,
 * hibernation/): a reader can follow any file's imports down without coming back to it.
 * The finder is find_cycles.ts (its own tests are in cocoonset/import_cycle_test.ts).
 */
import assert from "node:assert/strict";
import { findCycles } from "./find_cycles.ts";

const root = new URL("../../", import.meta.url);
const PRODUCTION_FOLDERS = [
  "kube",
  "common",
  "snapshot",
  "metrics",
  "snapshotgate",
  "cocoonset",
  "hibernation",
];
const ROOT_MODULES = [
  "main.ts",
  "operator.ts",
  "config.ts",
  "version.ts",
  "permissions.ts",
  "operator_env.ts",
  "preflight.ts",
];
// `import … from "../x.ts"`, `import type …`, `export … from "./x.ts"`, multi-line ones too.
const RELATIVE_SPECIFIER =
  /^\s*(?:import|export)\b[^"';]*?(?:from\s*)?["'](\.\.?\/[\w./-]+\.ts)["']/gm;

function isProduction(path: string): boolean {
  return !path.endsWith("_test.ts") && !path.includes("/testing/") &&
    !path.includes("/testdata/") && !path.split("/").pop()!.startsWith("_");
}

function resolve(from: string, specifier: string): string {
  const parts = from.split("/").slice(0, -1);
  for (const segment of specifier.split("/")) {
    if (segment === "..") parts.pop();
    else if (segment !== ".") parts.push(segment);
  }
  return parts.join("/");
}

function productionGraph(): Map<string, string[]> {
  const files: string[] = [...ROOT_MODULES];
  const walk = (dir: string) => {
    for (const entry of Deno.readDirSync(new URL(`${dir}/`, root))) {
      const path = `${dir}/${entry.name}`;
      if (entry.isDirectory) walk(path);
      else if (path.endsWith(".ts") && isProduction(path)) files.push(path);
    }
  };
  for (const dir of PRODUCTION_FOLDERS) walk(dir);
  const graph = new Map<string, string[]>();
  for (const file of files) {
    const text = Deno.readTextFileSync(new URL(file, root));
    const targets = [...text.matchAll(RELATIVE_SPECIFIER)].map((m) => resolve(file, m[1]));
    graph.set(file, [...new Set(targets)]);
  }
  return graph;
}

Deno.test("layout: no import cycle among the production modules, type-only imports included", () => {
  const graph = productionGraph();
  assert.ok(graph.size > 100, `read ${graph.size} modules`);
  assert.deepEqual(findCycles(graph).map((c) => c.join(" → ")), []);
});

Deno.test("layout: the production graph sees a multi-line type-only import across folders", () => {
  const graph = productionGraph();
  // cocoonset/pass.ts imports kube/ (through mod.ts once the imports are rewritten) and common/.
  assert.ok((graph.get("cocoonset/pass.ts") ?? []).some((t) => t.startsWith("kube/")));
});
