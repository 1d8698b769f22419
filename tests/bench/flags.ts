/**
 * The benchmarks' command line, shared by `deno task bench` and each benchmark run alone:
 * `--quick` (smaller N, shorter windows), `--operator-cmd "…"` (the operator under test, default
 * `deno task start`), and the sizes or parts of one benchmark (`--sets`, `--fleet-sets`,
 * `--flows`).
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
  /** `--fleet-sets 1000,5000,10000`: the fleet sizes of the memory benchmark (undefined: its own). */
  fleetSets?: number[];
  /** `--flows hibernateWake,…`: which flows bench:flows runs (undefined: all). */
  flows?: FlowName[];
}

/** The flows of bench:flows (tests/bench/flows.ts), in the order they run. */
export const FLOW_NAMES = ["hibernateWake", "suspendResume", "releaseWake"] as const;
export type FlowName = typeof FLOW_NAMES[number];

/** What `--help` prints, and what follows a refused command line. */
export const BENCH_USAGE =
  `usage: deno task bench[:<name>] [--quick] [--operator-cmd "<command>"] [--sets N,…]
  --quick                 smaller N and shorter windows
  --operator-cmd <cmd>    the operator under test (default: ${DEFAULT_OPERATOR_CMD})
  --sets <N,…>            CocoonSet counts of the convergence runs (default 100,1000)
  --fleet-sets <N,…>      fleet sizes of the memory runs, in sets (default 1000,5000,10000;
                          given to bench:memory, it runs the fleet alone)
  --flows <name,…>        flows of bench:flows (default all: ${FLOW_NAMES.join(",")})`;

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
        "fleet-sets": { type: "string" },
        flows: { type: "string" },
        help: { type: "boolean", short: "h", default: false },
      },
      strict: true,
      allowPositionals: false,
    }));
  } catch (err) {
    throw new BenchFlagsError(errorMessage(err));
  }
  if (values.help) return "help";
  const sets = counts("--sets", values.sets);
  const fleetSets = counts("--fleet-sets", values["fleet-sets"]);
  let flows: FlowName[] | undefined;
  if (values.flows !== undefined) {
    const names = values.flows.split(",").map((v) => v.trim());
    const unknown = names.filter((n) => !(FLOW_NAMES as readonly string[]).includes(n));
    if (unknown.length > 0 || names.length === 0) {
      throw new BenchFlagsError(
        `--flows ${values.flows}: want some of ${FLOW_NAMES.join(", ")}`,
      );
    }
    flows = names as FlowName[];
  }
  return {
    quick: values.quick,
    operatorCmd: values["operator-cmd"],
    ...(sets ? { sets } : {}),
    ...(fleetSets ? { fleetSets } : {}),
    ...(flows ? { flows } : {}),
  };
}

/** A comma-separated list of set counts (undefined when the flag is absent). */
function counts(flag: string, value: string | undefined): number[] | undefined {
  if (value === undefined) return undefined;
  const out = value.split(",").map((v) => Number(v.trim()));
  if (out.some((n) => !Number.isSafeInteger(n) || n < 1)) {
    throw new BenchFlagsError(`${flag} ${value}: want positive whole numbers, e.g. 100,1000`);
  }
  return out;
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
