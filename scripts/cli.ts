/**
 * The command line of the repository's scripts: what node:util parseArgs refuses (an unknown
 * flag, a missing value, a stray argument) becomes one line and the usage on stderr and exit 2,
 * as main.ts does for the operator, instead of an uncaught TypeError with its stack.
 *
 * @module
 */
import { parseArgs, type ParseArgsConfig } from "node:util";
import { errorMessage } from "../kube/errors.ts";

/**
 * Parses as parseArgs (strict by default: unknown flags and positionals are refused unless config
 * allows them); exits 2 on a refused line.
 */
export function parseArgsOrExit<T extends ParseArgsConfig>(
  program: string,
  usage: string,
  config: T,
): ReturnType<typeof parseArgs<T>> {
  try {
    return parseArgs(config);
  } catch (err) {
    console.error(`${program}: ${errorMessage(err)}\n${usage}`);
    Deno.exit(2);
  }
}
