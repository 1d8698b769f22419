import assert from "node:assert/strict";
import { errorMessage, errorText } from "./errors.ts";

Deno.test("errorText shows an Error as String() does (class first), other values as errorMessage", () => {
  assert.equal(errorText(new TypeError("bad URL")), String(new TypeError("bad URL")));
  assert.equal(errorText(new TypeError("bad URL")), "TypeError: bad URL");
  assert.equal(errorText("plain"), "plain");
  assert.equal(errorText({ code: 1 }), errorMessage({ code: 1 }));
  assert.equal(errorMessage(new TypeError("bad URL")), "bad URL");
});
