import assert from "node:assert/strict";
import * as yaml from "js-yaml";
import { CHART_CRD_DIR, CRD_DIR, generateCrdFiles, staleCrdFiles } from "./crds.ts";

/**
 * cocoon-common v0.3.0's CRDs (controller-gen output), the contract ours must match. They are not
 * part of this repository: `COCOON_REFERENCE_CRDS` names their folder, default
 * `../shared/reference/crds`; a relative path is taken from the repository root. When the
 * default folder is absent the comparisons are reported as ignored, so a lone clone passes; a
 * folder named explicitly must exist.
 */
const REPO_ROOT = new URL("../", import.meta.url);
const REFERENCE_ENV = "COCOON_REFERENCE_CRDS";
const referenceSetting = Deno.env.get(REFERENCE_ENV);
const REFERENCE_DIR = new URL(
  (referenceSetting || "../shared/reference/crds").replace(/\/?$/, "/"),
  REPO_ROOT,
);

async function isDirectory(url: URL): Promise<boolean> {
  try {
    return (await Deno.stat(url)).isDirectory;
  } catch (err) {
    if (err instanceof Deno.errors.NotFound) return false;
    throw err;
  }
}

const referenceMissing = !referenceSetting && !(await isDirectory(REFERENCE_DIR));

/** A test against the reference CRDs, ignored (with the reason in its name) when they are absent. */
function referenceTest(name: string, fn: () => Promise<void>): void {
  Deno.test({
    name: referenceMissing
      ? `${name} (ignored: reference CRDs not found at ${REFERENCE_DIR.pathname}; ` +
        `set ${REFERENCE_ENV})`
      : name,
    ignore: referenceMissing,
    fn,
  });
}

/** Removes what the comparison ignores: prose descriptions and the generator stamp. */
function withoutProse(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(withoutProse);
  if (value === null || typeof value !== "object") return value;
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(value)) {
    if (k === "description" && typeof v === "string") continue;
    out[k] = withoutProse(v);
  }
  return out;
}

function stripMetadataAnnotations(crd: unknown): unknown {
  const c = structuredClone(crd) as { metadata?: { annotations?: unknown } };
  delete c.metadata?.annotations;
  return c;
}

async function readReference(file: string): Promise<string> {
  try {
    return await Deno.readTextFile(new URL(file, REFERENCE_DIR));
  } catch (err) {
    if (err instanceof Deno.errors.NotFound) {
      throw new Error(
        `reference CRD ${file} not found in ${REFERENCE_DIR.pathname} ` +
          `(${REFERENCE_ENV}=${referenceSetting ?? "<unset>"})`,
      );
    }
    throw err;
  }
}

Deno.test("committed config/crd/bases match the generator (run `deno task crds` if this fails)", async () => {
  assert.deepEqual(await staleCrdFiles(CRD_DIR), []);
});

Deno.test("the chart's crds/ match the generator (run `deno task crds` if this fails)", async () => {
  assert.deepEqual(await staleCrdFiles(CHART_CRD_DIR), []);
});

Deno.test("staleCrdFiles reports a missing or edited manifest", async () => {
  const dir = await Deno.makeTempDir();
  try {
    const url = new URL(`file://${dir}/`);
    const files = [...generateCrdFiles().keys()].sort();
    assert.deepEqual((await staleCrdFiles(url)).sort(), files);
    for (const [file, text] of generateCrdFiles()) {
      await Deno.writeTextFile(new URL(file, url), text);
    }
    assert.deepEqual(await staleCrdFiles(url), []);
    await Deno.writeTextFile(new URL(files[0], url), "---\n");
    assert.deepEqual(await staleCrdFiles(url), [files[0]]);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("crds.ts --check exits 1 on stale files and 0 once regenerated", async () => {
  const dir = await Deno.makeTempDir();
  const run = async (...args: string[]) => {
    const out = await new Deno.Command(Deno.execPath(), {
      args: [
        "run",
        "--allow-read",
        "--allow-write",
        new URL("./crds.ts", import.meta.url).pathname,
        ...args,
      ],
      stdout: "piped",
      stderr: "piped",
    }).output();
    return { code: out.code, stderr: new TextDecoder().decode(out.stderr) };
  };
  try {
    const stale = await run("--check", "--dir", dir);
    assert.equal(stale.code, 1);
    assert.match(stale.stderr, /out of date.*cocoonset\.cocoonstack\.io_cocoonsets\.yaml/);
    assert.equal((await run("--dir", dir)).code, 0);
    assert.equal((await run("--check", "--dir", dir)).code, 0);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

referenceTest("generated CRDs equal the reference CRDs apart from descriptions", async () => {
  const generated = generateCrdFiles();
  assert.deepEqual([...generated.keys()].sort(), [
    "cocoonset.cocoonstack.io_cocoonhibernations.yaml",
    "cocoonset.cocoonstack.io_cocoonsets.yaml",
  ]);
  for (const [file, text] of generated) {
    const ours = stripMetadataAnnotations(withoutProse(yaml.load(text)));
    const theirs = stripMetadataAnnotations(withoutProse(yaml.load(await readReference(file))));
    assert.deepEqual(ours, theirs, file);
  }
});

referenceTest(
  "every schema node that the reference describes is described in ours too",
  async () => {
    // Descriptions are our own words, but none may be missing where the reference has one.
    const missing: string[] = [];
    const walk = (ours: unknown, theirs: unknown, path: string) => {
      if (theirs === null || typeof theirs !== "object") return;
      const o = (ours ?? {}) as Record<string, unknown>;
      for (const [k, v] of Object.entries(theirs as Record<string, unknown>)) {
        if (k === "description" && typeof o[k] !== "string") missing.push(path);
        else walk(o[k], v, `${path}.${k}`);
      }
    };
    for (const [file, text] of generateCrdFiles()) {
      walk(yaml.load(text), yaml.load(await readReference(file)), file);
    }
    assert.deepEqual(missing, []);
  },
);
