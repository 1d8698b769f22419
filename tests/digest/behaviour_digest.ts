/**
 * The behaviour digest's command line (docs/development.md, "Behaviour digest"):
 *
 * ```sh
 * # a recording folder → its digest (stdout, or --out)
 * deno run -A tests/digest/behaviour_digest.ts /tmp/rec [--out /tmp/digest.json]
 * # two digests → their differences; exit 1 when a non-advisory one is found
 * deno run -A tests/digest/behaviour_digest.ts --compare before.json after.json \
 *   [--absolute 3] [--relative 0.5]
 * # two digests of the same code → how much counts vary (to set a tolerance)
 * deno run -A tests/digest/behaviour_digest.ts --variation a.json b.json
 * ```
 *
 * @module
 */
import { parseArgs } from "node:util";
import {
  compareDigests,
  DEFAULT_TOLERANCE,
  formatFinding,
  type Tolerance,
  variation,
} from "./compare.ts";
import { type Digest, digestOfDir } from "./digest.ts";

const USAGE = `usage:
  behaviour_digest.ts <recording-dir> [--out <file>]
  behaviour_digest.ts --compare <before.json> <after.json> [--absolute N] [--relative R]
  behaviour_digest.ts --variation <a.json> <b.json>`;

async function readDigest(path: string): Promise<Digest> {
  return JSON.parse(await Deno.readTextFile(path)) as Digest;
}

function numberFlag(value: string | undefined, fallback: number, name: string): number {
  if (value === undefined) return fallback;
  const n = Number(value);
  if (!Number.isFinite(n) || n < 0) throw new Error(`--${name} must be a number >= 0: ${value}`);
  return n;
}

/** Runs the command line; returns the exit code. */
export async function main(args: string[]): Promise<number> {
  const { values, positionals } = parseArgs({
    args,
    allowPositionals: true,
    options: {
      out: { type: "string" },
      compare: { type: "boolean" },
      variation: { type: "boolean" },
      absolute: { type: "string" },
      relative: { type: "string" },
      help: { type: "boolean", short: "h" },
    },
  });
  if (values.help) {
    console.log(USAGE);
    return 0;
  }
  if (values.compare || values.variation) {
    if (positionals.length !== 2) {
      console.error(USAGE);
      return 2;
    }
    const [before, after] = await Promise.all(positionals.map(readDigest));
    if (values.variation) {
      console.log(JSON.stringify(variation(before, after), null, 2));
      return 0;
    }
    const tol: Tolerance = {
      absolute: numberFlag(values.absolute, DEFAULT_TOLERANCE.absolute, "absolute"),
      relative: numberFlag(values.relative, DEFAULT_TOLERANCE.relative, "relative"),
    };
    const findings = compareDigests(before, after, tol);
    for (const f of findings) console.log(formatFinding(f));
    const failing = findings.filter((f) => !f.advisory).length;
    console.log(
      `${failing} behaviour difference(s), ${findings.length - failing} advisory ` +
        `(tolerance: more than ${tol.absolute} and more than ${tol.relative * 100} %)`,
    );
    return failing > 0 ? 1 : 0;
  }
  if (positionals.length !== 1) {
    console.error(USAGE);
    return 2;
  }
  const text = JSON.stringify(await digestOfDir(positionals[0]), null, 2) + "\n";
  if (values.out) await Deno.writeTextFile(values.out, text);
  else console.log(text.trimEnd());
  return 0;
}

if (import.meta.main) Deno.exit(await main(Deno.args));
