import assert from "node:assert/strict";
import { parseRfc3339, rfc3339, rfc3339Micro, rfc3339Nano } from "./time.ts";

const at = Date.UTC(2026, 0, 2, 3, 4, 5, 120);
const whole = Date.UTC(2026, 0, 2, 3, 4, 5);

Deno.test("rfc3339 drops the fraction: metav1.Time has whole seconds", () => {
  assert.equal(rfc3339(at), "2026-01-02T03:04:05Z");
  assert.equal(rfc3339(new Date(whole)), "2026-01-02T03:04:05Z");
});

Deno.test("rfc3339Nano keeps significant fraction digits and trims trailing zeros, like Go", () => {
  assert.equal(rfc3339Nano(at), "2026-01-02T03:04:05.12Z");
  assert.equal(rfc3339Nano(at + 3), "2026-01-02T03:04:05.123Z");
  assert.equal(rfc3339Nano(at - 119), "2026-01-02T03:04:05.001Z");
  assert.equal(rfc3339Nano(whole), "2026-01-02T03:04:05Z", "a zero fraction disappears");
});

Deno.test("rfc3339Micro always writes six fraction digits, like metav1.MicroTime", () => {
  assert.equal(rfc3339Micro(at), "2026-01-02T03:04:05.120000Z");
  assert.equal(rfc3339Micro(whole), "2026-01-02T03:04:05.000000Z");
});

Deno.test("every form parses back to the same instant (to its precision)", () => {
  assert.equal(parseRfc3339(rfc3339Nano(at)), at);
  assert.equal(parseRfc3339(rfc3339Micro(at)), at);
  assert.equal(parseRfc3339(rfc3339(at)), whole);
  assert.equal(parseRfc3339(undefined), undefined);
  assert.equal(parseRfc3339("not a time"), undefined);
});
