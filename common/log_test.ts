import assert from "node:assert/strict";
import { getLogger } from "@logtape/logtape";
import { parseLogFormat, renderMessage, resetLogging, setupLogging } from "./log.ts";
import { LogConfigError, parseLogLevelName } from "./log_level.ts";

/** Collects the lines the sink would print. */
function capture(): { lines: string[]; write: (line: string) => void } {
  const lines: string[] = [];
  return { lines, write: (line) => lines.push(line) };
}

Deno.test("parseLogLevelName accepts the four levels and rejects others", () => {
  assert.equal(parseLogLevelName("debug"), "debug");
  assert.equal(parseLogLevelName("INFO"), "info");
  assert.equal(parseLogLevelName("warning"), "warn");
  assert.equal(parseLogLevelName(" error "), "error");
  assert.throws(() => parseLogLevelName("verbose"), LogConfigError);
  // zerolog's other names, which the Go operator's OPERATOR_LOG_LEVEL takes.
  assert.equal(parseLogLevelName("trace"), "debug");
  assert.equal(parseLogLevelName("fatal"), "error");
  assert.equal(parseLogLevelName("panic"), "error");
  assert.equal(parseLogLevelName("disabled"), "error");
  assert.throws(() => parseLogLevelName(""), /invalid log level "": want one of/);
  assert.equal(parseLogFormat("JSON"), "json");
  assert.throws(() => parseLogFormat("xml"), LogConfigError);
});

Deno.test("setupLogging json: one JSON line per record with category and properties", async () => {
  const { lines, write } = capture();
  try {
    await setupLogging({ level: "info", format: "json", write });
    const log = getLogger(["cocoon-operator", "test"]);
    log.info("reconciled {name}", { name: "demo", namespace: "ns" });
    log.debug("hidden at info level");
    getLogger(["other"]).info("not an operator category");
  } finally {
    await resetLogging();
  }
  assert.equal(lines.length, 1);
  assert.ok(!lines[0].includes("\n"));
  const rec = JSON.parse(lines[0]);
  assert.equal(rec.level, "INFO");
  assert.equal(rec.logger, "cocoon-operator.test");
  assert.equal(rec.message, "reconciled demo");
  assert.deepEqual(rec.properties, { name: "demo", namespace: "ns" });
  assert.equal(typeof rec["@timestamp"], "string");
});

Deno.test("setupLogging level debug lets debug records through; bad level throws", async () => {
  const { lines, write } = capture();
  try {
    await setupLogging({ level: "DEBUG", format: "text", stream: "stdout", write });
    getLogger(["cocoon-operator", "x"]).debug("details");
  } finally {
    await resetLogging();
  }
  assert.equal(lines.length, 1);
  assert.match(lines[0], /DBG.*cocoon-operator.x.*details/);
  await assert.rejects(() => setupLogging({ level: "loud" }), LogConfigError);
});

Deno.test("log messages print values without added quotes, in both formats", async () => {
  const { lines, write } = capture();
  try {
    for (const format of ["json", "text"] as const) {
      await setupLogging({ level: "info", format, write });
      getLogger(["cocoon-operator", "x"]).info(
        "received {signal} n={n} ok={ok} err={error} obj={obj}",
        { signal: "SIGTERM", n: 3, ok: true, error: new Error("boom"), obj: { a: "b" } },
      );
    }
  } finally {
    await resetLogging();
  }
  const want = 'received SIGTERM n=3 ok=true err=boom obj={"a":"b"}';
  assert.equal(JSON.parse(lines[0]).message, want);
  assert.equal(JSON.parse(lines[0]).properties.signal, "SIGTERM");
  assert.ok(lines[1].endsWith(want), lines[1]);
  assert.equal(renderMessage(["a ", "x", ""]), "a x");
});
