import assert from "node:assert/strict";
import { getLogger } from "@logtape/logtape";
import {
  LogConfigError,
  parseLogFormat,
  parseLogLevelName,
  resetLogging,
  setupLogging,
} from "./log.ts";

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
  assert.equal(rec.message, 'reconciled "demo"');
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
