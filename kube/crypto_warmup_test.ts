import assert from "node:assert/strict";
import { cryptoWarmedUp } from "./crypto_warmup.ts";

Deno.test("the crypto warm-up settles without an error", async () => {
  assert.equal(await cryptoWarmedUp, undefined);
});

Deno.test("main.ts loads the crypto warm-up before any other module", async () => {
  const source = await Deno.readTextFile(new URL("../main.ts", import.meta.url));
  const imports = [...source.matchAll(/^import\s[^;]*?["']([^"']+)["'];/gms)].map((m) => m[1]);
  assert.equal(imports[0], "./kube/crypto_warmup.ts", `first import is ${imports[0]}`);
});
