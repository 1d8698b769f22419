import assert from "node:assert/strict";
import { existingHelm, HELM_VERSION, helmCachePath } from "./helm.ts";

Deno.test("helm: the cache is keyed by the Helm release", () => {
  assert.match(HELM_VERSION, /^v4\.\d+\.\d+$/);
  assert.ok(helmCachePath().endsWith(`/cocoon-operator/helm/${HELM_VERSION}/bin/helm`));
});

Deno.test("helm: HELM_BIN wins when it names an executable, and only then", async () => {
  const dir = await Deno.makeTempDir();
  const before = Deno.env.get("HELM_BIN");
  try {
    const bin = `${dir}/helm`;
    await Deno.writeTextFile(bin, "#!/bin/sh\n");
    await Deno.chmod(bin, 0o755);
    Deno.env.set("HELM_BIN", bin);
    assert.equal(await existingHelm(), bin);
    await Deno.chmod(bin, 0o644);
    assert.notEqual(await existingHelm(), bin);
    Deno.env.set("HELM_BIN", `${dir}/missing`);
    assert.notEqual(await existingHelm(), `${dir}/missing`);
  } finally {
    if (before === undefined) Deno.env.delete("HELM_BIN");
    else Deno.env.set("HELM_BIN", before);
    await Deno.remove(dir, { recursive: true });
  }
});
