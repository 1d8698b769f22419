/**
 * The documentation's lists stay complete: docs/index.md links every page in docs/, and the
 * Tasks table of docs/development.md names every task in deno.json.
 */
import assert from "node:assert/strict";

const docs = new URL("./", import.meta.url);
const root = new URL("../", import.meta.url);

Deno.test("docs/index.md links every page in docs/ and no page that is missing", async () => {
  const pages = [...Deno.readDirSync(docs)].map((e) => e.name)
    .filter((n) => n.endsWith(".md") && n !== "index.md").sort();
  const index = await Deno.readTextFile(new URL("index.md", docs));
  const linked = [...index.matchAll(/\]\(([a-z_]+\.md)\)/g)].map((m) => m[1]).sort();
  assert.deepEqual(linked, pages);
});

Deno.test("docs/development.md's Tasks table has one row per deno.json task", async () => {
  const tasks = Object.keys(JSON.parse(await Deno.readTextFile(new URL("deno.json", root))).tasks)
    .sort();
  const text = await Deno.readTextFile(new URL("development.md", docs));
  const section = text.slice(
    text.indexOf("## Tasks"),
    text.indexOf("\n## ", text.indexOf("## Tasks") + 1),
  );
  const rows = [...section.matchAll(/^\| `([a-z0-9:-]+)` +\|/gm)].map((m) => m[1]).sort();
  assert.deepEqual(rows, tasks);
});
