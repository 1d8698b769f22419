/**
 * Log level names as OPERATOR_LOG_LEVEL takes them, apart from the logging setup (common/log.ts):
 * the configuration check and `deno task start`'s launcher parse them without loading LogTape.
 *
 * @module
 */

/** The levels the operator accepts in OPERATOR_LOG_LEVEL. */
export type LogLevelName = "debug" | "info" | "warn" | "error";

/** Thrown when a level or format string cannot be parsed. */
export class LogConfigError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "LogConfigError";
  }
}

/**
 * The Go operator's level names are zerolog's: besides the four it takes trace (mapped to debug,
 * the most this operator logs) and fatal, panic and disabled (mapped to error, the least it logs),
 * so a Deployment written for the Go operator still starts.
 */
const LEVEL_ALIASES: Record<string, LogLevelName> = {
  trace: "debug",
  debug: "debug",
  info: "info",
  warn: "warn",
  warning: "warn",
  error: "error",
  fatal: "error",
  panic: "error",
  disabled: "error",
};

/** Parses a level name case-insensitively ("warning" is accepted for "warn"; see LEVEL_ALIASES). */
export function parseLogLevelName(value: string): LogLevelName {
  const level = LEVEL_ALIASES[value.trim().toLowerCase()];
  if (!level) {
    throw new LogConfigError(
      `invalid log level ${JSON.stringify(value)}: want one of debug, info, warn, error`,
    );
  }
  return level;
}
