import assert from "node:assert/strict";
import {
  guardFetch,
  installNetGuard,
  NetAllowList,
  NetRefusedError,
  removeNetGuard,
} from "./net_guard.ts";

/** A fetch that records what would have been sent and answers from a script. */
function recorder(answer: (url: string) => Response = () => new Response("ok")) {
  const sent: { url: string; auth: string | null }[] = [];
  const fetch = (input: string | URL | Request, init?: RequestInit) => {
    const url = input instanceof Request ? input.url : String(input);
    sent.push({ url, auth: new Headers(init?.headers).get("authorization") });
    return Promise.resolve(answer(url));
  };
  return { sent, fetch: fetch as typeof globalThis.fetch };
}

Deno.test("net guard: *.domain:port admits exactly one label, not the domain or deeper", () => {
  const allow = new NetAllowList(["*.pkg.dev:443", "api.example.com:6443"]);
  assert.equal(allow.allows("us-docker.pkg.dev", "443"), true);
  assert.equal(allow.allows("US-Docker.PKG.dev", "443"), true);
  assert.equal(allow.allows("pkg.dev", "443"), false);
  assert.equal(allow.allows("a.b.pkg.dev", "443"), false);
  assert.equal(allow.allows("us-docker.pkg.dev", "80"), false);
  assert.equal(allow.allows("evilpkg.dev", "443"), false);
  assert.equal(allow.allows("api.example.com", "6443"), true);
  assert.equal(allow.allows("api.example.com", "443"), false);
  assert.equal(allow.allows("x.api.example.com", "6443"), false);
});

Deno.test("net guard: a refused target names host and rule, and nothing is sent", async () => {
  const rec = recorder();
  const fetch = guardFetch(new NetAllowList(["*.pkg.dev:443"]), rec.fetch);
  await assert.rejects(
    () => fetch("https://a.b.pkg.dev/v2/", { headers: { Authorization: "Bearer secret" } }),
    (err: unknown) =>
      err instanceof NetRefusedError && /a\.b\.pkg\.dev:443/.test(err.message) &&
      /\*\.pkg\.dev:443 matches exactly one label/.test(err.message),
  );
  await assert.rejects(
    () => fetch("https://auth.elsewhere.io/token"),
    /auth\.elsewhere\.io:443.*no rule names it/,
  );
  assert.equal(rec.sent.length, 0);
  await fetch("https://us-docker.pkg.dev/v2/");
  assert.deepEqual(rec.sent.map((s) => s.url), ["https://us-docker.pkg.dev/v2/"]);
});

Deno.test("net guard: a followed redirect is checked hop by hop; a refused hop is never sent", async () => {
  const rec = recorder((url) =>
    url.startsWith("https://reg.example.com/")
      ? new Response(null, { status: 307, headers: { location: "https://x.y.example.com/blob" } })
      : new Response("ok")
  );
  const fetch = guardFetch(
    new NetAllowList(["reg.example.com:443", "*.example.com:443"]),
    rec.fetch,
  );
  await assert.rejects(
    () => fetch("https://reg.example.com/v2/x", { headers: { Authorization: "Basic c2VjcmV0" } }),
    /x\.y\.example\.com:443/,
  );
  assert.deepEqual(rec.sent.map((s) => s.url), ["https://reg.example.com/v2/x"]);
});

Deno.test("net guard: an allowed cross-host redirect is followed without the Authorization", async () => {
  const rec = recorder((url) =>
    url.startsWith("https://reg.example.com/")
      ? new Response(null, { status: 302, headers: { location: "https://blobs.example.com/b" } })
      : new Response("blob")
  );
  const fetch = guardFetch(
    new NetAllowList(["reg.example.com:443", "*.example.com:443"]),
    rec.fetch,
  );
  const res = await fetch("https://reg.example.com/v2/x", {
    headers: { Authorization: "Basic c2VjcmV0" },
  });
  assert.equal(await res.text(), "blob");
  assert.deepEqual(rec.sent, [
    { url: "https://reg.example.com/v2/x", auth: "Basic c2VjcmV0" },
    { url: "https://blobs.example.com/b", auth: null },
  ]);
});

Deno.test("net guard: installNetGuard checks every global fetch until removed", async () => {
  installNetGuard(new NetAllowList(["allowed.invalid:443"]));
  try {
    await assert.rejects(() => fetch("http://127.0.0.1:9/"), NetRefusedError);
  } finally {
    removeNetGuard();
  }
  // Restored: the original fetch is back (port 9 refuses the connection, not the guard).
  await assert.rejects(
    () => fetch("http://127.0.0.1:9/"),
    (err: unknown) => !(err instanceof NetRefusedError),
  );
});
