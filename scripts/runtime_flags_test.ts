import assert from "node:assert/strict";
import { OPERATOR_V8_FLAGS, runtimeEnvFor, v8FlagsArg } from "./runtime_flags.ts";

Deno.test("runtime flags: one --v8-flags argument; the allocator env unless already set", () => {
  assert.equal(v8FlagsArg(), `--v8-flags=${OPERATOR_V8_FLAGS.join(",")}`);
  assert.match(v8FlagsArg(), /--max-semi-space-size=2/);
  assert.deepEqual(runtimeEnvFor({}), { MALLOC_ARENA_MAX: "2" });
  assert.deepEqual(runtimeEnvFor({ MALLOC_ARENA_MAX: "8" }), {});
});
