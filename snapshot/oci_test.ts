import assert from "node:assert/strict";
import { configure, type LogRecord, reset } from "@logtape/logtape";
import { type Keychain, staticAuthenticator } from "./auth/keychain.ts";
import { dockerConfigKeychain } from "./auth/docker_config.ts";
import { envFrom } from "./auth/env.ts";
import { DeadlineError } from "./deadline.ts";
import { RegistryError } from "./errors.ts";
import { buildRegistry, MANIFEST_ACCEPT, newOciRegistry } from "./oci.ts";
import { startStubRegistry, type StubOptions, type StubRegistry } from "./testing/stub_registry.ts";

const USER = "robot";
const PASSWORD = "pw-0f1e2d3c-never-log-me";
const D1 = `sha256:${"1".repeat(64)}`;
const D2 = `sha256:${"2".repeat(64)}`;

function keychainFor(user = USER, password = PASSWORD): Keychain {
  return {
    resolve: () => Promise.resolve(staticAuthenticator("test", { username: user, password })),
  };
}

async function withStub(
  opts: StubOptions,
  fn: (stub: StubRegistry) => Promise<void>,
): Promise<void> {
  const stub = startStubRegistry({ user: USER, password: PASSWORD, ...opts });
  try {
    await fn(stub);
  } finally {
    await stub.close();
  }
}

Deno.test("HEAD probes present/absent manifests over http for loopback, with every manifest type accepted", async () => {
  await withStub({ auth: "none" }, async (stub) => {
    stub.put("snap/vm", "hibernate", D1);
    const reg = newOciRegistry(`${stub.host}/snap`, { keychain: keychainFor() });
    assert.equal(await reg.hasManifest("vm", "hibernate"), true);
    assert.equal(await reg.hasManifest("vm", "latest"), false);
    assert.equal(await reg.hasManifest("other", "hibernate"), false);
    const heads = stub.requests.filter((r) => r.method === "HEAD");
    assert.deepEqual(heads.map((r) => r.path), [
      "/v2/snap/vm/manifests/hibernate",
      "/v2/snap/vm/manifests/latest",
      "/v2/snap/other/manifests/hibernate",
    ]);
    assert.equal(heads[0].accept, MANIFEST_ACCEPT);
    for (
      const t of [
        "application/vnd.oci.image.manifest.v1+json",
        "application/vnd.oci.image.index.v1+json",
        "application/vnd.docker.distribution.manifest.v2+json",
        "application/vnd.docker.distribution.manifest.list.v2+json",
      ]
    ) assert.ok(MANIFEST_ACCEPT.split(",").includes(t), t);
    // One ping for the client's lifetime; a 200 ping still presents Basic credentials (as ggcr).
    assert.equal(stub.requests.filter((r) => r.path === "/v2/").length, 1);
    assert.equal(heads[0].authorization, `Basic ${btoa(`${USER}:${PASSWORD}`)}`);
  });
});

Deno.test("bearer: HEAD asks pull, DELETE asks push,pull,delete, tokens are reused per scope", async () => {
  await withStub({ auth: "bearer", expiresIn: 300 }, async (stub) => {
    stub.put("snap/vm", "hibernate", D1);
    stub.put("snap/vm", "latest", D2);
    let now = 1_000_000;
    const reg = newOciRegistry(`${stub.host}/snap`, { keychain: keychainFor(), now: () => now });
    assert.equal(await reg.hasManifest("vm", "hibernate"), true);
    assert.equal(await reg.hasManifest("vm", "latest"), true);
    await reg.deleteManifest("vm", "hibernate");
    await reg.deleteManifest("vm", "hibernate"); // now absent: 404 is success
    const tokenReqs = stub.requests.filter((r) => r.path === "/token");
    assert.deepEqual(tokenReqs.map((r) => r.query.getAll("scope")), [
      ["repository:snap/vm:pull"],
      ["repository:snap/vm:push,pull,delete"],
    ]);
    assert.equal(tokenReqs[0].query.get("service"), "stub");
    assert.equal(tokenReqs[0].authorization, `Basic ${btoa(`${USER}:${PASSWORD}`)}`);
    assert.deepEqual([...stub.tags.get("snap/vm")!.keys()], ["latest"]);

    // Past expires_in (minus margin) the token is fetched again.
    now += 296_000;
    assert.equal(await reg.hasManifest("vm", "latest"), true);
    assert.equal(stub.requests.filter((r) => r.path === "/token").length, 3);
  });
});

Deno.test("bearer: a token the registry stops accepting is replaced once, then the call succeeds", async () => {
  await withStub({ auth: "bearer" }, async (stub) => {
    stub.put("snap/vm", "hibernate", D1);
    const reg = newOciRegistry(`${stub.host}/snap`, { keychain: keychainFor() });
    assert.equal(await reg.hasManifest("vm", "hibernate"), true);
    stub.validTokens.clear(); // e.g. the registry restarted with a new key
    assert.equal(await reg.hasManifest("vm", "hibernate"), true);
    assert.equal(stub.requests.filter((r) => r.path === "/token").length, 2);
  });
});

Deno.test("concurrent calls share one ping and one token exchange", async () => {
  await withStub({ auth: "bearer", expiresIn: 300 }, async (stub) => {
    stub.put("snap/vm", "hibernate", D1);
    const reg = newOciRegistry(`${stub.host}/snap`, { keychain: keychainFor() });
    const results = await Promise.all(
      Array.from({ length: 8 }, () => reg.hasManifest("vm", "hibernate")),
    );
    assert.deepEqual(results, Array(8).fill(true));
    // The https attempt never reaches this plain-http stub: exactly one /v2/ over http.
    assert.equal(stub.requests.filter((r) => r.path === "/v2/").length, 1);
    assert.equal(stub.requests.filter((r) => r.path === "/token").length, 1);
  });
});

Deno.test("one caller aborting does not fail the token exchange others wait on", async () => {
  let release!: () => void;
  const tokenGate = new Promise<void>((r) => (release = r));
  await withStub({
    auth: "bearer",
    intercept: async (_req, url) => {
      if (url.pathname === "/token") await tokenGate;
      return undefined;
    },
  }, async (stub) => {
    stub.put("snap/vm", "hibernate", D1);
    const reg = newOciRegistry(`${stub.host}/snap`, { keychain: keychainFor() });
    const ac = new AbortController();
    const a = reg.hasManifest("vm", "hibernate", ac.signal);
    const b = reg.hasManifest("vm", "hibernate");
    await waitFor(() => stub.requests.some((r) => r.path === "/token"));
    ac.abort(new Error("caller A cancelled"));
    await assert.rejects(a, /caller A cancelled/);
    release();
    assert.equal(await b, true);
    assert.equal(stub.requests.filter((r) => r.path === "/token").length, 1);
  });
});

Deno.test("a registry that challenges only on repositories is learned once", async () => {
  await withStub({
    auth: "bearer",
    // /v2/ answers 200 without auth; manifests still need a token.
    intercept: (_req, url) => url.pathname === "/v2/" ? Response.json({}) : undefined,
  }, async (stub) => {
    stub.put("snap/vm", "hibernate", D1);
    const reg = newOciRegistry(`${stub.host}/snap`, { keychain: keychainFor() });
    assert.equal(await reg.hasManifest("vm", "hibernate"), true);
    assert.equal(await reg.hasManifest("vm", "hibernate"), true);
    const heads = stub.requests.filter((r) => r.method === "HEAD");
    // First call: an unauthenticated try, then with a token; second call: token straight away.
    assert.deepEqual(heads.map((r) => r.authorization?.split(" ")[0] ?? null), [
      "Basic",
      "Bearer",
      "Bearer",
    ]);
  });
});

Deno.test("a scope the registry asks for on 401 is requested up front from then on", async () => {
  const EXTRA = "repository:snap/base:pull";
  let registry!: StubRegistry;
  await withStub({
    auth: "bearer",
    expiresIn: 300,
    // Manifests of snap/vm also need pull on snap/base (as for a cross-repository mount).
    intercept: (req, url) => {
      if (!url.pathname.includes("/manifests/")) return undefined;
      const token = (req.headers.get("authorization") ?? "").replace(/^Bearer /, "");
      if (registry.validTokens.get(token)?.includes(EXTRA)) return undefined;
      return new Response(null, {
        status: 401,
        headers: {
          "WWW-Authenticate":
            `Bearer realm="http://${url.host}/token",service="stub",scope="${EXTRA}"`,
        },
      });
    },
  }, async (stub) => {
    registry = stub;
    stub.put("snap/vm", "hibernate", D1);
    const reg = newOciRegistry(`${stub.host}/snap`, { keychain: keychainFor() });
    for (let i = 0; i < 3; i++) assert.equal(await reg.hasManifest("vm", "hibernate"), true);
    const tokenReqs = stub.requests.filter((r) => r.path === "/token");
    assert.deepEqual(tokenReqs.map((r) => r.query.getAll("scope")), [
      ["repository:snap/vm:pull"],
      [EXTRA, "repository:snap/vm:pull"],
    ]);
    assert.equal(stub.requests.filter((r) => r.method === "HEAD").length, 4);
    // A token the registry later rejects is replaced under the widened scopes too.
    stub.validTokens.clear();
    assert.equal(await reg.hasManifest("vm", "hibernate"), true);
    assert.deepEqual(
      stub.requests.filter((r) => r.path === "/token").slice(2).map((r) => r.query.getAll("scope")),
      [[EXTRA, "repository:snap/vm:pull"]],
    );
  });
});

Deno.test("wrong password is an auth error naming repo:tag, status and code, never 'absent'", async () => {
  for (const auth of ["basic", "bearer"] as const) {
    await withStub({ auth }, async (stub) => {
      const reg = newOciRegistry(`${stub.host}/snap`, { keychain: keychainFor(USER, "wrong") });
      const err = await reg.hasManifest("vm", "hibernate").then(
        (v) => assert.fail(`expected an error, got ${v}`),
        (e: unknown) => e,
      );
      assert.ok(err instanceof RegistryError, String(err));
      assert.equal(err.status, 401);
      assert.equal(err.code, "UNAUTHORIZED");
      assert.ok(err.isAuth);
      assert.match(err.message, /snap\/vm:hibernate/);
      assert.match(err.message, /401/);
      await assert.rejects(reg.deleteManifest("vm", "hibernate"), RegistryError);
    });
  }
});

Deno.test("a 401 whose Bearer challenge has no realm keeps the known realm (RFC 6750 error-only)", async () => {
  let rejectOnce = false;
  await withStub({
    auth: "bearer",
    intercept: (_req, url) => {
      if (!rejectOnce || !url.pathname.includes("/manifests/")) return undefined;
      rejectOnce = false;
      return new Response(null, {
        status: 401,
        headers: { "WWW-Authenticate": 'Bearer error="invalid_token"' },
      });
    },
  }, async (stub) => {
    stub.put("snap/vm", "hibernate", D1);
    const reg = newOciRegistry(`${stub.host}/snap`, { keychain: keychainFor() });
    assert.equal(await reg.hasManifest("vm", "hibernate"), true);
    rejectOnce = true;
    assert.equal(await reg.hasManifest("vm", "hibernate"), true);
    assert.equal(await reg.hasManifest("vm", "hibernate"), true);
    assert.equal(stub.requests.filter((r) => r.path === "/token").length, 2);
  });
});

Deno.test("a shared token exchange that fails names each caller's own repo:tag", async () => {
  await withStub({ auth: "bearer" }, async (stub) => {
    stub.put("snap/vm", "hibernate", D1);
    const reg = newOciRegistry(`${stub.host}/snap`, { keychain: keychainFor(USER, "wrong") });
    const [latest, hibernate] = await Promise.all(
      ["latest", "hibernate"].map((tag) => reg.hasManifest("vm", tag).catch((e: unknown) => e)),
    );
    assert.equal(stub.requests.filter((r) => r.path === "/token").length, 1);
    for (const [err, tag] of [[latest, "latest"], [hibernate, "hibernate"]] as const) {
      assert.ok(err instanceof RegistryError, String(err));
      assert.equal(err.status, 401);
      assert.match(err.message, new RegExp(`^HEAD manifest snap/vm:${tag}: `));
      assert.ok(!err.message.includes(tag === "latest" ? "vm:hibernate" : "vm:latest"));
    }
  });
});

Deno.test("anonymous client against an auth-requiring registry says no credentials were found", async () => {
  await withStub({ auth: "bearer" }, async (stub) => {
    const reg = newOciRegistry(`${stub.host}/snap`, {
      keychain: { resolve: () => Promise.resolve(undefined) },
    });
    await assert.rejects(reg.hasManifest("vm", "hibernate"), /no matching credentials/);
  });
});

Deno.test("tag delete refused (400 DIGEST_INVALID / 405 UNSUPPORTED): delete by digest unless the sibling shares it", async () => {
  for (const tagDelete of ["digest-invalid", "unsupported"] as const) {
    await withStub({ auth: "none", tagDelete }, async (stub) => {
      const reg = newOciRegistry(`${stub.host}/snap`, { keychain: keychainFor() });
      stub.put("snap/a", "hibernate", D1);
      stub.put("snap/a", "latest", D2);
      assert.deepEqual(await reg.deleteManifestWithOutcome("a", "hibernate"), { deleted: true });
      assert.deepEqual([...stub.tags.get("snap/a")!.keys()], ["latest"]);
      assert.ok(
        stub.requests.some((r) => r.method === "DELETE" && r.path === `/v2/snap/a/manifests/${D1}`),
      );

      stub.put("snap/b", "hibernate", D1);
      stub.put("snap/b", "latest", D1);
      const outcome = await reg.deleteManifestWithOutcome("b", "hibernate");
      assert.equal(outcome.deleted, false);
      assert.match(outcome.skippedReason ?? "", /share/);
      assert.deepEqual([...stub.tags.get("snap/b")!.keys()].sort(), ["hibernate", "latest"]);
      assert.ok(
        !stub.requests.some((r) =>
          r.method === "DELETE" && r.path === `/v2/snap/b/manifests/${D1}`
        ),
      );

      // Absent tag: nothing to resolve, success.
      assert.deepEqual(await reg.deleteManifestWithOutcome("c", "hibernate"), { deleted: false });
    });
  }
});

Deno.test("HEAD failures carry the registry's error code (fetched with GET) and never read as absent", async () => {
  await withStub({
    auth: "none",
    intercept: (req, url) =>
      url.pathname.includes("/manifests/")
        ? Response.json(
          { errors: [{ code: "UNAVAILABLE", message: "backend down" }] },
          { status: 503, statusText: "Service Unavailable" },
        )
        : req.method === "X"
        ? new Response()
        : undefined,
  }, async (stub) => {
    const reg = newOciRegistry(`${stub.host}/snap`, { keychain: keychainFor() });
    const err = await reg.hasManifest("vm", "hibernate").catch((e: unknown) => e);
    assert.ok(err instanceof RegistryError);
    assert.equal(err.status, 503);
    assert.equal(err.code, "UNAVAILABLE");
    assert.equal(
      err.message,
      "HEAD manifest snap/vm:hibernate: 503 Service Unavailable: UNAVAILABLE: backend down",
    );
    const delErr = await reg.deleteManifest("vm", "hibernate").catch((e: unknown) => e);
    assert.ok(delErr instanceof RegistryError);
    assert.equal(delErr.code, "UNAVAILABLE");
    assert.match(delErr.message, /^delete manifest snap\/vm:hibernate: 503/);
  });
});

Deno.test("registry down is an error, not absent", async () => {
  const l = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const port = (l.addr as Deno.NetAddr).port;
  l.close();
  const reg = newOciRegistry(`127.0.0.1:${port}/snap`, {
    keychain: keychainFor(),
    timeoutMs: 5_000,
  });
  await assert.rejects(reg.hasManifest("vm", "hibernate"), /ping 127\.0\.0\.1:\d+/);
  await assert.rejects(reg.deleteManifest("vm", "hibernate"), /ping 127\.0\.0\.1:\d+/);
});

/** A stub interceptor that holds every manifest request until release() is called. */
function hangingManifests() {
  let release!: () => void;
  const hang = new Promise<void>((r) => (release = r));
  const intercept = async (_req: Request, url: URL): Promise<Response | undefined> => {
    if (!url.pathname.includes("/manifests/")) return undefined;
    await hang;
    return new Response(null, { status: 500 });
  };
  return { release: () => release(), intercept };
}

Deno.test("every request has a timeout", async () => {
  const { release, intercept } = hangingManifests();
  await withStub({ auth: "none", intercept }, async (stub) => {
    const reg = newOciRegistry(`${stub.host}/snap`, { keychain: keychainFor(), timeoutMs: 300 });
    try {
      const err = await reg.hasManifest("vm", "hibernate").catch((e: unknown) => e);
      assert.ok(err instanceof DeadlineError, String(err));
      assert.match(err.message, /HEAD manifest snap\/vm:hibernate: timed out after 300ms/);
    } finally {
      release();
    }
  });
});

Deno.test("caller's AbortSignal cancels a call", async () => {
  const { release, intercept } = hangingManifests();
  await withStub({ auth: "none", intercept }, async (stub) => {
    const reg = newOciRegistry(`${stub.host}/snap`, { keychain: keychainFor() });
    const ac = new AbortController();
    try {
      const p = reg.hasManifest("vm", "hibernate", ac.signal);
      await waitFor(() => stub.requests.some((r) => r.path.includes("/manifests/")));
      ac.abort(new Error("reconcile cancelled"));
      await assert.rejects(p, /reconcile cancelled/);
    } finally {
      release();
    }
  });
});

Deno.test("redirects are followed without forwarding credentials to another host", async () => {
  const other = startStubRegistry({ auth: "none" });
  other.put("snap/vm", "hibernate", D1);
  try {
    await withStub({
      auth: "basic",
      intercept: (req, url) =>
        req.method === "HEAD" && url.pathname.includes("/manifests/")
          ? new Response(null, {
            status: 307,
            headers: { Location: `http://${other.host}${url.pathname}` },
          })
          : undefined,
    }, async (stub) => {
      const reg = newOciRegistry(`${stub.host}/snap`, { keychain: keychainFor() });
      assert.equal(await reg.hasManifest("vm", "hibernate"), true);
      const first = stub.requests.find((r) => r.method === "HEAD")!;
      assert.equal(first.authorization, `Basic ${btoa(`${USER}:${PASSWORD}`)}`);
      const redirected = other.requests.find((r) => r.method === "HEAD")!;
      assert.equal(redirected.path, "/v2/snap/vm/manifests/hibernate");
      assert.equal(redirected.authorization, null);
    });
  } finally {
    await other.close();
  }
});

Deno.test("a malformed Docker-Content-Digest is an error, never used to build a DELETE", async () => {
  await withStub({
    auth: "none",
    tagDelete: "digest-invalid",
    intercept: (req, url) =>
      req.method === "HEAD" && url.pathname.includes("/manifests/")
        ? new Response(null, { status: 200, headers: { "Docker-Content-Digest": "../../../x" } })
        : undefined,
  }, async (stub) => {
    stub.put("snap/vm", "hibernate", D1);
    const reg = newOciRegistry(`${stub.host}/snap`, { keychain: keychainFor() });
    await assert.rejects(
      reg.deleteManifest("vm", "hibernate"),
      /HEAD manifest snap\/vm:hibernate: .*invalid Docker-Content-Digest/,
    );
    assert.deepEqual(
      stub.requests.filter((r) => r.method === "DELETE").map((r) => r.path),
      ["/v2/snap/vm/manifests/hibernate"],
    );
  });
});

Deno.test("a redirected DELETE stays a DELETE (a GET answering 200 is not a deletion)", async () => {
  for (const status of [301, 302, 303]) {
    await withStub({
      auth: "none",
      intercept: (req, url) =>
        req.method === "DELETE" && !url.searchParams.has("moved")
          ? new Response(null, {
            status,
            headers: { Location: `${url.pathname}?moved=1` },
          })
          : undefined,
    }, async (stub) => {
      stub.put("snap/vm", "hibernate", D1);
      const reg = newOciRegistry(`${stub.host}/snap`, { keychain: keychainFor() });
      const outcome = await reg.deleteManifestWithOutcome("vm", "hibernate").catch((e) => e);
      if (status === 303) {
        // "See other" means fetch something else: nothing was deleted, so it is an error.
        assert.ok(outcome instanceof RegistryError, String(outcome));
        assert.equal(outcome.status, 303);
        assert.deepEqual([...stub.tags.get("snap/vm")!.keys()], ["hibernate"]);
      } else {
        assert.deepEqual(outcome, { deleted: true });
        assert.deepEqual([...stub.tags.get("snap/vm")!.keys()], []);
      }
      assert.ok(!stub.requests.some((r) => r.method === "GET" && r.query.has("moved")));
    });
  }
});

Deno.test("a realm on another loopback address is refused before any credential is sent", async () => {
  const other = startStubRegistry({ auth: "none" });
  try {
    await withStub({ auth: "bearer", realm: `http://${other.host}/token` }, async (stub) => {
      const reg = newOciRegistry(`${stub.host}/snap`, { keychain: keychainFor() });
      await assert.rejects(reg.hasManifest("vm", "hibernate"), /private or link-local/);
      assert.equal(other.requests.length, 0);
    });
  } finally {
    await other.close();
  }
});

Deno.test("docker config identitytoken is redeemed with the OAuth2 refresh-token POST", async () => {
  await withStub({ auth: "bearer" }, async (stub) => {
    stub.put("snap/vm", "hibernate", D1);
    const files: Record<string, string> = {
      "/home/u/.docker/config.json": JSON.stringify({
        auths: { [`http://${stub.host}`]: { identitytoken: "refresh-0a9b-never-log-me" } },
      }),
    };
    const reg = newOciRegistry(`${stub.host}/snap`, {
      keychain: dockerConfigKeychain({
        env: envFrom({ HOME: "/home/u" }),
        readTextFile: (p) =>
          files[p] !== undefined
            ? Promise.resolve(files[p])
            : Promise.reject(new Deno.errors.NotFound(p)),
      }),
    });
    assert.equal(await reg.hasManifest("vm", "hibernate"), true);
    const tokenReq = stub.requests.find((r) => r.path === "/token")!;
    assert.equal(tokenReq.method, "POST");
    assert.equal(tokenReq.authorization, null);
    const form = new URLSearchParams(tokenReq.body);
    assert.equal(form.get("grant_type"), "refresh_token");
    assert.equal(form.get("refresh_token"), "refresh-0a9b-never-log-me");
    assert.equal(form.get("scope"), "repository:snap/vm:pull");
    assert.equal(form.get("service"), "stub");
  });
});

Deno.test("logs never contain a password, refresh token or registry token", async () => {
  const records: LogRecord[] = [];
  await configure({
    sinks: { capture: (r: LogRecord) => records.push(r) },
    loggers: [
      { category: ["cocoon-operator"], lowestLevel: "debug", sinks: ["capture"] },
      { category: ["logtape", "meta"], lowestLevel: "warning", sinks: [] },
    ],
    reset: true,
  });
  try {
    const tokens: string[] = [];
    for (const auth of ["basic", "bearer"] as const) {
      for (const tagDelete of ["allow", "digest-invalid"] as const) {
        await withStub({ auth, tagDelete }, async (stub) => {
          stub.put("snap/vm", "hibernate", D1);
          stub.put("snap/vm", "latest", D1);
          const good = newOciRegistry(`${stub.host}/snap`, { keychain: keychainFor() });
          await good.hasManifest("vm", "hibernate");
          await good.deleteManifest("vm", "hibernate");
          stub.validTokens.clear();
          await good.hasManifest("vm", "latest");
          const bad = newOciRegistry(`${stub.host}/snap`, {
            keychain: keychainFor(USER, `${PASSWORD}-x`),
          });
          await bad.hasManifest("vm", "latest").catch(() => {});
          tokens.push(
            ...stub.requests.map((r) => r.authorization ?? "").filter((a) =>
              a.startsWith("Bearer ")
            ).map((a) => a.slice(7)),
          );
        });
      }
    }
    const logged = records.map((r) => JSON.stringify({ m: r.message, p: r.properties })).join("\n");
    assert.ok(records.length > 0, "expected some debug/warning records");
    assert.ok(tokens.length > 0);
    for (const secret of [PASSWORD, btoa(`${USER}:${PASSWORD}`), ...tokens]) {
      assert.ok(!logged.includes(secret), `log output contains a secret`);
    }
  } finally {
    await reset();
  }
});

Deno.test("newOciRegistry and buildRegistry validate their input", () => {
  assert.throws(() => newOciRegistry("http://registry.example.com/x"), /without a scheme/);
  assert.throws(() => newOciRegistry(""), /must not be empty/);
  assert.throws(() => newOciRegistry("registry.example.com/a b"), /whitespace/);
  assert.throws(() => newOciRegistry("registry.example.com/x", { timeoutMs: 0 }), /timeoutMs/);
  assert.throws(() => buildRegistry({ env: {} }), /OCI_REGISTRY must be set/);
  assert.deepEqual(buildRegistry({ env: { OCI_REGISTRY: "example.com/proj/repo" } }).base, {
    registry: "example.com",
    prefix: "proj/repo",
  });
});

Deno.test("invalid VM names and tags are rejected before any request", async () => {
  const reg = newOciRegistry("127.0.0.1:1/snap", { keychain: keychainFor() });
  await assert.rejects(reg.hasManifest("Bad_VM", "hibernate"), /invalid repository/);
  await assert.rejects(reg.deleteManifest("vm", "bad/tag"), /invalid tag/);
});

async function waitFor(cond: () => boolean, timeoutMs = 5_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!cond()) {
    if (Date.now() > deadline) throw new Error("condition not met before deadline");
    await new Promise((r) => setTimeout(r, 5));
  }
}
