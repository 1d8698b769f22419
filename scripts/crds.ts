/**
 * Writes the CRD manifests from the TypeScript schema in common/apis/v1 into config/crd/bases
 * (kustomize) and charts/cocoon-operator/crds (Helm), the same files in both.
 *
 *   deno task crds            regenerate the files
 *   deno task crds --check    exit 1 (and name the files) when the committed files are stale
 *   --dir <path>              use one other folder instead (tests)
 */
import { allCRDs } from "../common/apis/v1/crd.ts";
import { toYamlDocument } from "../common/k8s/yaml.ts";
import { parseArgsOrExit } from "./cli.ts";

/** Where the generated manifests live, relative to the repository root. */
export const CRD_DIR = new URL("../config/crd/bases/", import.meta.url);
/** The chart's copy: Helm installs the files in crds/ before the rest of a first install. */
export const CHART_CRD_DIR = new URL("../charts/cocoon-operator/crds/", import.meta.url);

/** The generated manifests: file name → YAML text. Pure; touches no files. */
export function generateCrdFiles(): Map<string, string> {
  return new Map(allCRDs().map(({ file, crd }) => [file, toYamlDocument(crd)]));
}

/** Names of the files in dir that differ from (or are missing next to) the generated ones. */
export async function staleCrdFiles(dir: URL = CRD_DIR): Promise<string[]> {
  const stale: string[] = [];
  for (const [file, want] of generateCrdFiles()) {
    let have: string | undefined;
    try {
      have = await Deno.readTextFile(new URL(file, dir));
    } catch (err) {
      if (!(err instanceof Deno.errors.NotFound)) throw err;
    }
    if (have !== want) stale.push(file);
  }
  return stale;
}

/** Writes every generated manifest into dir; returns the files written. */
async function writeCrdFiles(dir: URL = CRD_DIR): Promise<string[]> {
  await Deno.mkdir(dir, { recursive: true });
  const written: string[] = [];
  for (const [file, text] of generateCrdFiles()) {
    await Deno.writeTextFile(new URL(file, dir), text);
    written.push(file);
  }
  return written;
}

async function main(args: string[]): Promise<number> {
  const { values } = parseArgsOrExit(
    "crds",
    "usage: deno task crds [--check] [--dir <path>]",
    { args, options: { check: { type: "boolean", default: false }, dir: { type: "string" } } },
  );
  const dirs = values.dir === undefined
    ? [CRD_DIR, CHART_CRD_DIR]
    : [new URL(`file://${Deno.realPathSync(values.dir).replace(/\/?$/, "/")}`)];
  if (values.check) {
    const stale: string[] = [];
    for (const dir of dirs) {
      stale.push(...(await staleCrdFiles(dir)).map((file) => new URL(file, dir).pathname));
    }
    if (stale.length > 0) {
      console.error(`CRDs are out of date (run \`deno task crds\`): ${stale.join(", ")}`);
      return 1;
    }
    console.log("CRDs are up to date");
    return 0;
  }
  for (const dir of dirs) {
    for (const file of await writeCrdFiles(dir)) {
      console.log(`wrote ${new URL(file, dir).pathname}`);
    }
  }
  return 0;
}

if (import.meta.main) Deno.exit(await main(Deno.args));
