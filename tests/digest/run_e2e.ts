/**
 * One command for a behaviour digest of the e2e suite (`deno task digest:e2e <out.json>`): runs
 * `deno test -A tests/e2e/` (or the test paths given after `--`) with recording on into a fresh
 * folder, then writes that folder's digest to out.json. Exits with the test run's code, so a
 * digest of a failing run is still written but not mistaken for a clean one.
 *
 * ```sh
 * deno task digest:e2e /tmp/digest-after.json
 * deno task digest:e2e /tmp/digest-after.json --keep -- tests/e2e/suspend_test.ts
 * deno run -A tests/digest/behaviour_digest.ts --compare /tmp/digest-before-1.json /tmp/digest-after.json
 * ```
 *
 * @module
 */
import { parseArgs } from "node:util";
import { DIGEST_DIR_VARIABLE } from "../harness/behaviour_recording.ts";
import { digestOfDir } from "./digest.ts";

const repoRoot = new URL("../../", import.meta.url).pathname;

async function main(args: string[]): Promise<number> {
  const { values, positionals } = parseArgs({
    args,
    allowPositionals: true,
    options: { keep: { type: "boolean" }, help: { type: "boolean", short: "h" } },
  });
  const [out, ...tests] = positionals;
  if (values.help || !out) {
    console.error("usage: run_e2e.ts <out.json> [--keep] [-- <test paths>]");
    return values.help ? 0 : 2;
  }
  const dir = await Deno.makeTempDir({ prefix: "cocoon-behaviour-" });
  console.error(`[behaviour-digest] recording into ${dir}`);
  const status = await new Deno.Command(Deno.execPath(), {
    args: ["test", "-A", ...(tests.length > 0 ? tests : ["tests/e2e/"])],
    cwd: repoRoot,
    env: { [DIGEST_DIR_VARIABLE]: dir },
    stdin: "null",
    stdout: "inherit",
    stderr: "inherit",
  }).spawn().status;
  const digest = await digestOfDir(dir);
  await Deno.writeTextFile(out, JSON.stringify(digest, null, 2) + "\n");
  console.error(
    `[behaviour-digest] ${digest.inputs.auditFiles} audit log(s), ` +
      `${digest.inputs.operatorRequests} operator request(s), ${digest.inputs.scrapes} scrape(s) ` +
      `→ ${out}; the test run exited ${status.code}`,
  );
  if (values.keep) console.error(`[behaviour-digest] kept ${dir}`);
  else await Deno.remove(dir, { recursive: true });
  return status.code;
}

if (import.meta.main) Deno.exit(await main(Deno.args));
