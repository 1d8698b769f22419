import assert from "node:assert/strict";
import process from "node:process";
import { realClock, sleep } from "./clock.ts";

Deno.test("realClock: a deadline already past fires at once, without Deno's negative-delay warning", async () => {
  const warnings: string[] = [];
  const onWarning = (w: Error) => warnings.push(w.name);
  process.on("warning", onWarning);
  try {
    await new Promise<void>((resolve) => realClock.setTimeout(resolve, -7));
    await sleep(realClock, -1, new AbortController().signal);
    // Warnings are emitted on a later tick than the timer call.
    await new Promise((resolve) => setTimeout(resolve, 0));
    assert.deepEqual(warnings, []);
  } finally {
    process.off("warning", onWarning);
  }
});
