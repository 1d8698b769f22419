/**
 * Transport rules of RegistrySession that need host names a loopback stub cannot have (default
 * ports, https, other hosts): driven through an injected fetch, no network at all.
 */

import assert from "node:assert/strict";
import { type Keychain, staticAuthenticator } from "./auth/keychain.ts";
import type { FetchFn } from "./deadline.ts";
import { RegistryError } from "./errors.ts";
import { newOciRegistry } from "./oci.ts";

const USER = "robot";
const PASSWORD = "pw-7c1d-never-send-elsewhere";
const BASIC = `Basic ${btoa(`${USER}:${PASSWORD}`)}`;
const DIGEST = `sha256:${"a".repeat(64)}`;

interface Seen {
  method: string;
  url: string;
  authorization: string | null;
  body: string;
}

type Route = (url: URL, init: RequestInit, seen: Seen) => Response;

/** A fetch that answers from route and records every request it was asked to send. */
function fakeFetch(route: Route): { fetch: FetchFn; seen: Seen[] } {
  const seen: Seen[] = [];
  const fetch: FetchFn = (input, init = {}) => {
    const url = new URL(input instanceof Request ? input.url : input);
    const headers = new Headers(init.headers);
    const s: Seen = {
      method: init.method ?? "GET",
      url: url.href,
      authorization: headers.get("authorization"),
      body: typeof init.body === "string" ? init.body : "",
    };
    seen.push(s);
    return Promise.resolve(route(url, init, s));
  };
  return { fetch, seen };
}

const keychain: Keychain = {
  resolve: () =>
    Promise.resolve(staticAuthenticator("test", { username: USER, password: PASSWORD })),
};

const anonymous: Keychain = { resolve: () => Promise.resolve(undefined) };

const basicChallenge = () =>
  new Response(null, { status: 401, headers: { "WWW-Authenticate": 'Basic realm="r"' } });

const manifest = () =>
  new Response(null, { status: 200, headers: { "Docker-Content-Digest": DIGEST } });

Deno.test("credentials reach a registry written with its default port (host:443)", async () => {
  const { fetch, seen } = fakeFetch((url, _init, s) => {
    if (url.pathname === "/v2/") return basicChallenge();
    return s.authorization === BASIC ? manifest() : basicChallenge();
  });
  const reg = newOciRegistry("reg.example.com:443/snap", { keychain, fetch });
  assert.equal(await reg.hasManifest("vm", "hibernate"), true);
  const head = seen.find((s) => s.method === "HEAD")!;
  assert.equal(head.url, "https://reg.example.com/v2/snap/vm/manifests/hibernate");
  assert.equal(head.authorization, BASIC);
});

Deno.test("a redirect from https to plain http on the same host does not carry credentials", async () => {
  const { fetch, seen } = fakeFetch((url) => {
    if (url.pathname === "/v2/") return basicChallenge();
    if (url.protocol === "https:") {
      return new Response(null, {
        status: 307,
        headers: { Location: `http://reg.example.com${url.pathname}` },
      });
    }
    return manifest();
  });
  const reg = newOciRegistry("reg.example.com/snap", { keychain, fetch });
  assert.equal(await reg.hasManifest("vm", "hibernate"), true);
  const plain = seen.filter((s) => s.url.startsWith("http://"));
  assert.equal(plain.length, 1);
  assert.equal(plain[0].authorization, null);
});

Deno.test("a 401 from a host we were redirected to never sends credentials to its realm", async () => {
  const { fetch, seen } = fakeFetch((url) => {
    if (url.host === "reg.example.com") {
      if (url.pathname === "/v2/") return basicChallenge();
      return new Response(null, {
        status: 307,
        headers: { Location: `https://cdn.example.net${url.pathname}` },
      });
    }
    if (url.host === "cdn.example.net") {
      return Response.json({ errors: [{ code: "UNAUTHORIZED", message: "who are you" }] }, {
        status: 401,
        headers: {
          "WWW-Authenticate": 'Bearer realm="https://evil.example.net/token",service="x"',
        },
      });
    }
    return Response.json({ token: "stolen" });
  });
  const reg = newOciRegistry("reg.example.com/snap", { keychain, fetch });
  const err = await reg.hasManifest("vm", "hibernate").catch((e: unknown) => e);
  assert.ok(err instanceof RegistryError, String(err));
  assert.equal(err.status, 401);
  assert.match(err.message, /snap\/vm:hibernate/);
  assert.deepEqual(seen.filter((s) => s.url.includes("evil.example.net")), []);
  assert.ok(
    seen.every((s) => s.authorization === null || new URL(s.url).host === "reg.example.com"),
  );
});

/**
 * A registry that challenges for a Bearer token whose token server answers with a redirect;
 * any other host hands out a token.
 */
function tokenServerRedirecting(status: number, location: string) {
  return fakeFetch((url) => {
    if (url.host === "reg.example.com") {
      return new Response(null, {
        status: 401,
        headers: {
          "WWW-Authenticate": 'Bearer realm="https://auth.example.com/token",service="reg"',
        },
      });
    }
    if (url.host === "auth.example.com") {
      return new Response(null, { status, headers: { Location: location } });
    }
    return Response.json({ token: "t" });
  });
}

Deno.test("token endpoint redirects are vetted like the realm (no private addresses)", async () => {
  const { fetch, seen } = tokenServerRedirecting(
    302,
    "https://169.254.169.254/computeMetadata/v1/token",
  );
  const reg = newOciRegistry("reg.example.com/snap", { keychain, fetch });
  await assert.rejects(reg.hasManifest("vm", "hibernate"), /snap\/vm:hibernate.*redirect/);
  assert.deepEqual(seen.filter((s) => s.url.includes("169.254.169.254")), []);
});

Deno.test("a token POST redirected to another origin is refused: its body holds the refresh token", async () => {
  const refresh = "refresh-93af-never-send-elsewhere";
  const idKeychain: Keychain = {
    resolve: () => Promise.resolve(staticAuthenticator("test", { identityToken: refresh })),
  };
  const { fetch, seen } = tokenServerRedirecting(307, "https://other.example.net/token");
  const reg = newOciRegistry("reg.example.com/snap", { keychain: idKeychain, fetch });
  await assert.rejects(reg.hasManifest("vm", "hibernate"), /snap\/vm:hibernate/);
  assert.deepEqual(
    seen.filter((s) => s.body.includes(refresh) && !s.url.includes("auth.example.com")),
    [],
  );
});

Deno.test("ping failures name the request (repo:tag) and keep the status", async () => {
  const { fetch } = fakeFetch(() =>
    Response.json({ errors: [{ code: "UNAVAILABLE", message: "maintenance" }] }, {
      status: 503,
      statusText: "Service Unavailable",
    })
  );
  const reg = newOciRegistry("reg.example.com/snap", { keychain, fetch });
  const err = await reg.hasManifest("vm", "hibernate").catch((e: unknown) => e);
  assert.ok(err instanceof RegistryError, String(err));
  assert.equal(err.status, 503);
  assert.equal(err.code, "UNAVAILABLE");
  assert.match(err.message, /^HEAD manifest snap\/vm:hibernate: ping .*503/);

  const down: FetchFn = () => Promise.reject(new TypeError("connection refused"));
  const reg2 = newOciRegistry("reg.example.com/snap", { keychain, fetch: down });
  await assert.rejects(
    reg2.deleteManifest("vm", "latest"),
    /^Error: delete manifest snap\/vm:latest: .*connection refused/,
  );
});

Deno.test("credential lookup failures name the request", async () => {
  const broken: Keychain = {
    resolve: () => Promise.reject(new Error("docker config /h/config.json: not valid JSON")),
  };
  const { fetch } = fakeFetch(() => basicChallenge());
  const reg = newOciRegistry("reg.example.com/snap", { keychain: broken, fetch });
  await assert.rejects(
    reg.hasManifest("vm", "hibernate"),
    /^Error: HEAD manifest snap\/vm:hibernate: .*not valid JSON/,
  );
});

Deno.test("a private-range registry is https only unless allowed by name; no http race", async () => {
  const { fetch, seen } = fakeFetch((url) => {
    if (url.protocol === "https:") throw new TypeError("connection refused");
    return url.pathname === "/v2/" ? new Response(null, { status: 200 }) : manifest();
  });
  const implicit = newOciRegistry("10.1.2.3:5000/snap", { keychain: anonymous, fetch });
  await assert.rejects(() => implicit.hasManifest("vm", "hibernate"));
  assert.deepEqual(seen.map((s) => new URL(s.url).protocol), ["https:"]);
  seen.length = 0;
  // Allowed by name: plain http straight away, https never tried (nothing to race).
  const allowed = newOciRegistry("10.1.2.3:5000/snap", {
    keychain: anonymous,
    fetch,
    plainHttpHosts: ["10.1.2.3:5000"],
  });
  assert.equal(await allowed.hasManifest("vm", "hibernate"), true);
  assert.ok(seen.length > 0 && seen.every((s) => s.url.startsWith("http://10.1.2.3:5000/")));
  assert.ok(seen.every((s) => s.authorization === null));
});

Deno.test("credentials never go over plain http off loopback, even to an allowed host", async () => {
  const { fetch, seen } = fakeFetch((url, _init, s) => {
    if (url.pathname === "/v2/") return basicChallenge();
    return s.authorization === BASIC ? manifest() : basicChallenge();
  });
  const reg = newOciRegistry("registry.lan:5000/snap", {
    keychain,
    fetch,
    plainHttpHosts: ["registry.lan"],
  });
  await assert.rejects(
    () => reg.hasManifest("vm", "hibernate"),
    (e: unknown) =>
      e instanceof Error &&
      /refusing to send test credentials to registry\.lan:5000 over plain http/.test(e.message) &&
      !e.message.includes(PASSWORD),
  );
  assert.ok(seen.every((s) => s.authorization === null), JSON.stringify(seen));
  // Loopback is the exception: nothing leaves the machine.
  const local = fakeFetch((url, _init, s) => {
    if (url.protocol === "https:") throw new TypeError("connection refused");
    if (url.pathname === "/v2/") return basicChallenge();
    return s.authorization === BASIC ? manifest() : basicChallenge();
  });
  const loopback = newOciRegistry("127.0.0.1:5000/snap", { keychain, fetch: local.fetch });
  assert.equal(await loopback.hasManifest("vm", "hibernate"), true);
});
