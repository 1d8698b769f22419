import assert from "node:assert/strict";
import {
  ANONYMOUS,
  chainKeychains,
  isEmptyCredential,
  type Keychain,
  staticAuthenticator,
} from "./keychain.ts";

const TARGET = { registry: "r.example.com", repository: "p/vm" };

Deno.test("chainKeychains returns the first keychain that has credentials, else anonymous", async () => {
  const none: Keychain = { resolve: () => Promise.resolve(undefined) };
  const anon: Keychain = { resolve: () => Promise.resolve(ANONYMOUS) };
  const a = staticAuthenticator("a", { username: "u", password: "p" });
  const b = staticAuthenticator("b", { registryToken: "t" });
  const has = (auth: typeof a): Keychain => ({ resolve: () => Promise.resolve(auth) });
  assert.equal(await chainKeychains(none, anon, has(a), has(b)).resolve(TARGET), a);
  assert.equal(await chainKeychains(none, anon).resolve(TARGET), ANONYMOUS);
  assert.deepEqual(await a.authorization(), { username: "u", password: "p" });
});

Deno.test("chainKeychains stops at a keychain error", async () => {
  const broken: Keychain = { resolve: () => Promise.reject(new Error("bad config")) };
  const never: Keychain = { resolve: () => assert.fail("must not be asked") };
  await assert.rejects(chainKeychains(broken, never).resolve(TARGET), /bad config/);
});

Deno.test("isEmptyCredential", () => {
  assert.ok(isEmptyCredential({}));
  assert.ok(!isEmptyCredential({ identityToken: "x" }));
});
