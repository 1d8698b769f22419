import assert from "node:assert/strict";
import { OPERATOR_V8_FLAGS, runtimeEnvFor, v8FlagsArg } from "./runtime_flags.ts";

Deno.test("runtime flags: one --v8-flags argument; the allocator env unless already set", () => {
  assert.equal(v8FlagsArg(), `--v8-flags=${OPERATOR_V8_FLAGS.join(",")}`);
  assert.match(v8FlagsArg(), /--max-semi-space-size=2/);
  assert.deepEqual(runtimeEnvFor({}), { MALLOC_ARENA_MAX: "2" });
  assert.deepEqual(runtimeEnvFor({ MALLOC_ARENA_MAX: "8" }), {});
});

Deno.test("runtime flags: V8 runs with memory saver mode, and knows every flag", async () => {
  // Memory saver mode keeps the heap of a creation burst near what is live (docs/architecture.md).
  assert.ok(OPERATOR_V8_FLAGS.includes("--memory-saver-mode"));
  // Deno refuses a V8 flag the engine does not know, so a misspelt one fails here.
  const out = await new Deno.Command(Deno.execPath(), {
    args: ["eval", v8FlagsArg(), "console.log('ok')"],
    stdout: "piped",
    stderr: "piped",
  }).output();
  assert.equal(new TextDecoder().decode(out.stderr), "");
  assert.equal(new TextDecoder().decode(out.stdout).trim(), "ok");
});
