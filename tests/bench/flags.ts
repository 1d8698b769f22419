/**
 * The benchmarks' command line, shared by `deno task bench` and each benchmark run alone:
 * `--quick` (smaller N, shorter windows), `--operator-cmd "…"` (the operator under test, default
 * `deno task start`) and `--only a,b` (bench.ts: which benchmarks to run).
 *
 * @module
 */
import { parseArgs } from "node:util";
import { DEFAULT_OPERATOR_CMD } from "./operator_under_test.ts";

/** Parsed benchmark flags. */
export interface BenchFlags {
  quick: boolean;
  operatorCmd: string;
  /** Benchmarks to run (bench.ts); empty = all. */
  only: string[];
}

/** Parses the flags; unknown flags are an error, so a typo does not silently run the default. */
export function parseBenchFlags(args: string[]): BenchFlags {
  const { values } = parseArgs({
    args,
    options: {
      quick: { type: "boolean", default: false },
      "operator-cmd": { type: "string", default: DEFAULT_OPERATOR_CMD },
      only: { type: "string", default: "" },
    },
    strict: true,
    allowPositionals: false,
  });
  return {
    quick: values.quick,
    operatorCmd: values["operator-cmd"],
    only: values.only.split(",").map((s) => s.trim()).filter((s) => s),
  };
}
