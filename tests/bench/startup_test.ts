import assert from "node:assert/strict";
import { stepName } from "./startup.ts";

Deno.test("stepName names each process of the `deno task start` chain", () => {
  const repo = "/work/repo";
  assert.equal(stepName("sh -c deno task start"), "sh");
  assert.equal(stepName("/usr/bin/sh -c /tmp/gobase/operator"), "sh");
  assert.equal(stepName("deno task start"), "deno task");
  assert.equal(
    stepName(
      `/usr/bin/deno run --no-prompt --allow-read --allow-run=deno ${repo}/scripts/start.ts`,
    ),
    "launcher (start.ts)",
  );
  assert.equal(
    stepName(`/usr/bin/deno run --no-prompt --allow-net=127.0.0.1:1 ${repo}/main.ts`),
    "operator (main.ts)",
  );
  assert.equal(stepName("/tmp/gobase/operator --leader-elect=false"), "operator");
});
