import assert from "node:assert/strict";
import { errorFromResponse, parseDiagnostics, RegistryError } from "./errors.ts";

Deno.test("RegistryError formats status, codes and messages", () => {
  const e = new RegistryError("HEAD manifest p/vm:hibernate", 401, "Unauthorized", [
    { code: "UNAUTHORIZED", message: "authentication required" },
    { code: "DENIED" },
  ]);
  assert.equal(
    e.message,
    "HEAD manifest p/vm:hibernate: 401 Unauthorized: UNAUTHORIZED: authentication required; DENIED",
  );
  assert.equal(e.code, "UNAUTHORIZED");
  assert.ok(e.isAuth);
  const plain = new RegistryError("x", 502, "Bad Gateway", [], "<html>upstream</html>\n");
  assert.equal(plain.message, "x: 502 Bad Gateway: <html>upstream</html>");
  assert.equal(plain.code, "");
  assert.ok(!plain.isAuth);
});

Deno.test("errorFromResponse reads the distribution error body", async () => {
  const res = Response.json({ errors: [{ code: "DIGEST_INVALID", message: "bad digest" }] }, {
    status: 400,
    statusText: "Bad Request",
  });
  const e = await errorFromResponse("delete manifest p/vm:hibernate", res);
  assert.equal(e.status, 400);
  assert.equal(e.code, "DIGEST_INVALID");
  assert.deepEqual(parseDiagnostics("not json"), []);
  assert.deepEqual(parseDiagnostics('{"errors":[{"code":1},{"code":"X"}]}'), [{
    code: "X",
    message: undefined,
  }]);
});
