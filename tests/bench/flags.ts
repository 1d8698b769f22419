/**
 * The benchmarks' command line, shared by `deno task bench` and each benchmark run alone:
 * `--quick` (smaller N, shorter windows), `--operator-cmd "…"` (the operator under test, default
 * `deno task start`).
 *
 * @module
 */
import { parseArgs } from "node:util";
import { errorMessage } from "../../kube/errors.ts";
import { DEFAULT_OPERATOR_CMD } from "./operator_under_test.ts";

/** Parsed benchmark flags. */
export interface BenchFlags {
  quick: boolean;
  operatorCmd: string;
  /** `--sets 100,1000`: the CocoonSet counts of the convergence benchmark (undefined: its own). */
  sets?: number[];
}

/** What `--help` prints, and what follows a refused command line. */
export const BENCH_USAGE =
  `usage: deno task bench[:<name>] [--quick] [--operator-cmd "<command>"] [--sets N,…]
  --quick                 smaller N and shorter windows
  --operator-cmd <cmd>    the operator under test (default: ${DEFAULT_OPERATOR_CMD})
  --sets <N,…>            CocoonSet counts of the convergence runs (default 100,1000)`;

/** A command line the benchmarks refuse; the message is one line. */
export class BenchFlagsError extends Error {
  override name = "BenchFlagsError";
}

/**
 * Parses the flags; unknown flags are an error, so a typo does not silently run the default.
 * Returns "help" for `--help`.
 */
export function parseBenchFlags(args: string[]): BenchFlags | "help" {
  let values;
  try {
    ({ values } = parseArgs({
      args,
      options: {
        quick: { type: "boolean", default: false },
        "operator-cmd": { type: "string", default: DEFAULT_OPERATOR_CMD },
        sets: { type: "string" },
        help: { type: "boolean", short: "h", default: false },
      },
      strict: true,
      allowPositionals: false,
    }));
  } catch (err) {
    throw new BenchFlagsError(errorMessage(err));
  }
  if (values.help) return "help";
  let sets: number[] | undefined;
  if (values.sets !== undefined) {
    sets = values.sets.split(",").map((v) => Number(v.trim()));
    if (sets.some((n) => !Number.isSafeInteger(n) || n < 1)) {
      throw new BenchFlagsError(
        `--sets ${values.sets}: want positive whole numbers, e.g. 100,1000`,
      );
    }
  }
  return {
    quick: values.quick,
    operatorCmd: values["operator-cmd"],
    ...(sets ? { sets } : {}),
  };
}

/**
 * The flags of a benchmark run from the command line: `--help` prints the usage and exits 0, a
 * refused command line prints one line and the usage and exits 2.
 */
export function benchFlagsOrExit(args: string[]): BenchFlags {
  let flags;
  try {
    flags = parseBenchFlags(args);
  } catch (err) {
    if (!(err instanceof BenchFlagsError)) throw err;
    console.error(`bench: ${err.message}\n${BENCH_USAGE}`);
    Deno.exit(2);
  }
  if (flags === "help") {
    console.log(BENCH_USAGE);
    Deno.exit(0);
  }
  return flags;
}
