/**
 * Process-wide logging setup on LogTape. The Go operator configures its logger once from
 * OPERATOR_LOG_LEVEL (cocoon-common's log.Setup); here main.ts calls setupLogging once and every
 * module logs through getLogger(["cocoon-operator", "<area>"]).
 */
import {
  configure,
  getJsonLinesFormatter,
  getTextFormatter,
  type LogLevel,
  reset,
  type Sink,
} from "@logtape/logtape";
import { LogConfigError, type LogLevelName, parseLogLevelName } from "./log_level.ts";

/** "json" = one JSON object per line (production); "text" = human-readable lines. */
export type LogFormat = "json" | "text";

/** Root category of every operator logger. */
const ROOT_CATEGORY = "cocoon-operator";

/** Parses a format name ("json" or "text"). */
export function parseLogFormat(value: string): LogFormat {
  const format = value.trim().toLowerCase();
  if (format !== "json" && format !== "text") {
    throw new LogConfigError(`invalid log format ${JSON.stringify(value)}: want json or text`);
  }
  return format;
}

const TO_LOG_TAPE: Record<LogLevelName, LogLevel> = {
  debug: "debug",
  info: "info",
  warn: "warning",
  error: "error",
};

export interface LogSetupOptions {
  /** Lowest level emitted; a string is parsed with parseLogLevelName. */
  level: LogLevelName | string;
  format?: LogFormat;
  /** Where lines go; defaults to stderr (as controller-runtime's zap logger does). */
  stream?: "stderr" | "stdout";
  /** Receives each formatted line (no trailing newline); tests capture with it. */
  write?: (line: string) => void;
  /** Replaces the console sink entirely. */
  sink?: Sink;
}

/**
 * Configures LogTape for the whole process. Calling it again replaces the previous setup, so
 * tests can reconfigure; use resetLogging() to go back to "no output".
 */
export async function setupLogging(opts: LogSetupOptions): Promise<void> {
  const level = parseLogLevelName(opts.level);
  const format = opts.format ?? "json";
  const sink = opts.sink ?? lineSink(format, opts.write ?? consoleWriter(opts.stream ?? "stderr"));
  await configure({
    reset: true,
    sinks: { out: sink },
    loggers: [
      // LogTape announces its own configuration on the meta logger; only its problems matter.
      { category: ["logtape", "meta"], sinks: ["out"], lowestLevel: "warning" },
      { category: [ROOT_CATEGORY], sinks: ["out"], lowestLevel: TO_LOG_TAPE[level] },
    ],
  });
}

/** Drops the logging configuration (tests). */
export async function resetLogging(): Promise<void> {
  await reset();
}

function lineSink(format: LogFormat, write: (line: string) => void): Sink {
  const formatter = format === "json"
    ? getJsonLinesFormatter({ properties: "nest:properties" })
    : getTextFormatter({ timestamp: "rfc3339" });
  return (record) =>
    write(formatter({ ...record, message: [renderMessage(record.message)] }).replace(/\r?\n$/, ""));
}

/**
 * Joins a message template with its values the way a reader expects: strings as they are (no
 * added quotes), errors by their message, other values as JSON. The structured properties keep
 * the original values.
 */
export function renderMessage(message: readonly unknown[]): string {
  let out = "";
  for (let i = 0; i < message.length; i++) {
    out += i % 2 === 0 ? String(message[i]) : renderValue(message[i]);
  }
  return out;
}

function renderValue(value: unknown): string {
  if (typeof value === "string") return value;
  if (value instanceof Error) return value.message;
  if (value === undefined || typeof value === "bigint" || typeof value === "symbol") {
    return String(value);
  }
  try {
    return JSON.stringify(value) ?? String(value);
  } catch {
    return String(value);
  }
}

// Deno's console writes synchronously, so a line is out before the process can exit; every
// level goes to one stream so the output stays a single ordered sequence.
function consoleWriter(stream: "stderr" | "stdout"): (line: string) => void {
  return stream === "stderr" ? (line) => console.error(line) : (line) => console.log(line);
}
