import assert from "node:assert/strict";
import {
  type AccessToken,
  parseTokenResponse,
  requestToken,
  reuseTokenSource,
  type TokenSource,
} from "./oauth.ts";

Deno.test("reuseTokenSource reuses a token until 10 s before expiry", async () => {
  let now = 0;
  let calls = 0;
  const src: TokenSource = {
    token: () => Promise.resolve({ accessToken: `t${++calls}`, expiresAt: now + 60_000 }),
  };
  const reuse = reuseTokenSource(src, () => now);
  assert.equal((await reuse.token()).accessToken, "t1");
  now = 49_000;
  assert.equal((await reuse.token()).accessToken, "t1");
  now = 50_001;
  assert.equal((await reuse.token()).accessToken, "t2");
  const [a, b] = await Promise.all([reuse.token(), reuse.token()]);
  assert.equal(a.accessToken, b.accessToken);
  assert.equal(calls, 2);
});

Deno.test("parseTokenResponse reads access_token, expires_in and refresh_token", () => {
  assert.deepEqual(parseTokenResponse("x", '{"access_token":"a","expires_in":3599}', 1000), {
    accessToken: "a",
    expiresAt: 1000 + 3_599_000,
    refreshToken: undefined,
  });
  assert.equal(parseTokenResponse("x", '{"access_token":"a"}', 0).expiresAt, Infinity);
  assert.equal(
    parseTokenResponse("x", '{"access_token":"a","refresh_token":"r"}', 0).refreshToken,
    "r",
  );
  assert.throws(() => parseTokenResponse("x", "{}", 0), /no access_token/);
  assert.throws(() => parseTokenResponse("x", "<html>", 0), /not JSON/);
});

Deno.test("requestToken reports the OAuth error code but never the form it sent", async () => {
  const fakeFetch = () =>
    Promise.resolve(
      Response.json({ error: "invalid_grant", error_description: "Bad Request" }, { status: 400 }),
    );
  const err = await requestToken("svc", "https://oauth2.example/token", {
    refresh_token: "SECRET-R",
  }, {
    fetch: fakeFetch,
  }).catch((e: unknown) => e);
  assert.ok(err instanceof Error);
  assert.equal(
    err.message,
    "svc: token endpoint https://oauth2.example/token answered 400 (invalid_grant: Bad Request)",
  );
  assert.ok(!err.message.includes("SECRET-R"));
});

Deno.test("reuseTokenSource: one caller aborting neither fails the shared refresh nor blocks its own exit", async () => {
  let release!: (t: AccessToken) => void;
  const seen: (AbortSignal | undefined)[] = [];
  const src: TokenSource = {
    token: (signal) => {
      seen.push(signal);
      return new Promise<AccessToken>((resolve, reject) => {
        release = resolve;
        signal?.addEventListener("abort", () => reject(signal.reason), { once: true });
      });
    },
  };
  const reuse = reuseTokenSource(src, () => 0);
  const first = new AbortController();
  const second = new AbortController();
  const a = reuse.token(first.signal);
  const b = reuse.token(second.signal);
  const c = reuse.token();
  // The first caller gives up: only its own call fails.
  first.abort(new Error("reconcile A cancelled"));
  await assert.rejects(a, /reconcile A cancelled/);
  // The second caller's signal is honoured while it waits on a refresh it did not start.
  second.abort(new Error("reconcile B cancelled"));
  await assert.rejects(b, /reconcile B cancelled/);
  release({ accessToken: "shared", expiresAt: Infinity });
  assert.equal((await c).accessToken, "shared");
  assert.equal(seen.length, 1);
});
