import assert from "node:assert/strict";
import { fileTokenSource } from "./transport.ts";

Deno.test("file token: re-read once a minute; a failed re-read keeps the last token (client-go)", async () => {
  const dir = await Deno.makeTempDir();
  try {
    const path = `${dir}/token`;
    await Deno.writeTextFile(path, "first\n");
    let now = 1_000_000;
    const token = fileTokenSource(path, () => now);
    assert.equal(await token(), "Bearer first");
    // Rotated on disk: the cached value holds until a minute has passed.
    await Deno.writeTextFile(path, "second");
    now += 30_000;
    assert.equal(await token(), "Bearer first");
    now += 31_000;
    assert.equal(await token(), "Bearer second");
    // The file is briefly unreadable (kubelet swapping the projected volume): keep the last one,
    // and read again on the next call rather than a minute later.
    await Deno.remove(path);
    now += 61_000;
    assert.equal(await token(), "Bearer second");
    await Deno.writeTextFile(path, "third");
    now += 1;
    assert.equal(await token(), "Bearer third");
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("file token: without any token read yet, a missing file is an error", async () => {
  const token = fileTokenSource("/nonexistent/token", () => 0);
  await assert.rejects(() => token(), Deno.errors.NotFound);
});
