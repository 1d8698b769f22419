/**
 * The benchmarks' command line, shared by `deno task bench` and each benchmark run alone:
 * `--quick` (smaller N, shorter windows), `--operator-cmd "…"` (the operator under test, default
 * `deno task start`).
 *
 * @module
 */
import { parseArgs } from "node:util";
import { DEFAULT_OPERATOR_CMD } from "./operator_under_test.ts";

/** Parsed benchmark flags. */
export interface BenchFlags {
  quick: boolean;
  operatorCmd: string;
}

/** Parses the flags; unknown flags are an error, so a typo does not silently run the default. */
export function parseBenchFlags(args: string[]): BenchFlags {
  const { values } = parseArgs({
    args,
    options: {
      quick: { type: "boolean", default: false },
      "operator-cmd": { type: "string", default: DEFAULT_OPERATOR_CMD },
    },
    strict: true,
    allowPositionals: false,
  });
  return {
    quick: values.quick,
    operatorCmd: values["operator-cmd"],
  };
}
