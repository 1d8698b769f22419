import assert from "node:assert/strict";
import { withAuthenticationAndAuthorization } from "./metrics_auth.ts";
import { metricsTls } from "./metrics_serving.ts";
import type { RequestSpec } from "./transport.ts";

/** An API server that knows two tokens; only "reader" may get /metrics. */
function fakeApiServer() {
  const calls: RequestSpec[] = [];
  const transport = {
    fetch(spec: RequestSpec): Promise<Response> {
      calls.push(spec);
      const body = spec.body as { spec: Record<string, unknown> };
      if (spec.path.endsWith("/tokenreviews")) {
        const users: Record<string, string> = { "t-reader": "reader", "t-other": "other" };
        const user = users[String(body.spec.token)];
        return Promise.resolve(Response.json({
          status: user
            ? { authenticated: true, user: { username: user, groups: ["g"] } }
            : { authenticated: false },
        }));
      }
      if (spec.path.endsWith("/subjectaccessreviews")) {
        const attrs = body.spec.nonResourceAttributes as { path: string; verb: string };
        const allowed = body.spec.user === "reader" && attrs.path === "/metrics" &&
          attrs.verb === "get";
        return Promise.resolve(Response.json({ status: { allowed } }));
      }
      return Promise.resolve(new Response(null, { status: 404 }));
    },
  };
  return { transport, calls };
}

const metrics = () => Promise.resolve(new Response("up 1\n"));
const get = (token?: string) =>
  new Request("https://op:8080/metrics", {
    headers: token ? { Authorization: `Bearer ${token}` } : {},
  });

Deno.test("metrics auth: no token 401, unknown token 401, no permission 403, reader 200", async () => {
  const { transport, calls } = fakeApiServer();
  const handler = withAuthenticationAndAuthorization(transport, metrics);
  assert.equal((await handler(get())).status, 401);
  assert.equal(calls.length, 0, "no review without a token");
  assert.equal((await handler(get("t-unknown"))).status, 401);
  const forbidden = await handler(get("t-other"));
  assert.equal(forbidden.status, 403);
  assert.match(await forbidden.text(), /user "other" may not get \/metrics/);
  const ok = await handler(get("t-reader"));
  assert.equal(ok.status, 200);
  assert.equal(await ok.text(), "up 1\n");
  // The reviews carry the token and the identity with its groups, and the verb of a GET.
  const sar = calls.find((c) =>
    c.path.endsWith("/subjectaccessreviews") &&
    (c.body as { spec: { user: string } }).spec.user === "reader"
  )!;
  assert.deepEqual((sar.body as { spec: unknown }).spec, {
    user: "reader",
    uid: undefined,
    groups: ["g"],
    extra: undefined,
    nonResourceAttributes: { path: "/metrics", verb: "get" },
  });
  assert.ok(calls.every((c) => c.method === "POST"));
});

Deno.test("metrics auth: answers are cached for a while, keyed by the token's hash", async () => {
  const { transport, calls } = fakeApiServer();
  let now = 0;
  const handler = withAuthenticationAndAuthorization(transport, metrics, {
    cacheTtlMs: 10_000,
    now: () => now,
  });
  for (let i = 0; i < 3; i++) assert.equal((await handler(get("t-reader"))).status, 200);
  assert.equal(calls.length, 2, "one TokenReview and one SubjectAccessReview");
  now = 10_001;
  assert.equal((await handler(get("t-reader"))).status, 200);
  assert.equal(calls.length, 4, "reviewed again after the TTL");
});

Deno.test("metrics auth: a failing review is a 500 for that scrape, not cached", async () => {
  let fail = true;
  const transport = {
    fetch: (spec: RequestSpec) =>
      Promise.resolve(
        fail
          ? new Response("forbidden", { status: 403 })
          : spec.path.endsWith("/tokenreviews")
          ? Response.json({ status: { authenticated: true, user: { username: "reader" } } })
          : Response.json({ status: { allowed: true } }),
      ),
  };
  const handler = withAuthenticationAndAuthorization(transport, metrics);
  const res = await handler(get("t-reader"));
  assert.equal(res.status, 500);
  assert.doesNotMatch(await res.text(), /t-reader/);
  fail = false;
  assert.equal((await handler(get("t-reader"))).status, 200);
});

Deno.test("metrics TLS: files from the folder, else self-signed; half a pair is an error", async () => {
  const selfSigned = await metricsTls(undefined);
  assert.equal(selfSigned.source, "self-signed");
  assert.match(selfSigned.cert, /^-----BEGIN CERTIFICATE-----/);
  assert.match(selfSigned.key, /^-----BEGIN PRIVATE KEY-----/);
  const files: Record<string, string> = { "/c/tls.crt": "CERT", "/c/tls.key": "KEY" };
  const read = (p: string) =>
    p in files ? Promise.resolve(files[p]) : Promise.reject(new Deno.errors.NotFound(p));
  assert.deepEqual(await metricsTls("/c/", "cocoon-system", read), {
    cert: "CERT",
    key: "KEY",
    source: "files",
  });
  // The optional Secret is not installed: an empty folder means self-signed.
  assert.equal((await metricsTls("/empty", "cocoon-system", read)).source, "self-signed");
  delete files["/c/tls.key"];
  await assert.rejects(
    () => metricsTls("/c", "cocoon-system", read),
    /holds tls\.crt but not tls\.key/,
  );
});

Deno.test("metrics TLS: the self-signed certificate names the metrics Service of the operator's namespace", async () => {
  const tls = await metricsTls(undefined, "team-ops");
  const leafPem = tls.cert.slice(0, tls.cert.indexOf("-----END CERTIFICATE-----"));
  const der = atob(leafPem.replace(/-----BEGIN CERTIFICATE-----|\s/g, ""));
  assert.ok(der.includes("cocoon-operator-metrics.team-ops.svc"));
  assert.ok(!der.includes("cocoon-system"));
});

Deno.test("metrics TLS: a self-signed certificate serves https", async () => {
  const tls = await metricsTls(undefined);
  const server = Deno.serve(
    { hostname: "127.0.0.1", port: 0, onListen: () => {}, cert: tls.cert, key: tls.key },
    () => new Response("ok"),
  );
  try {
    const ca = tls.cert.slice(tls.cert.indexOf("-----END CERTIFICATE-----") + 26);
    const client = Deno.createHttpClient({ caCerts: [ca] });
    try {
      const res = await fetch(`https://localhost:${server.addr.port}/`, { client });
      assert.equal(await res.text(), "ok");
    } finally {
      client.close();
    }
  } finally {
    await server.shutdown();
  }
});

Deno.test("metrics auth: while reviews are not allowed every request is 503 with the reason, none reviewed", async () => {
  const { transport, calls } = fakeApiServer();
  let reason: string | undefined = "the operator may not create tokenreviews";
  const handler = withAuthenticationAndAuthorization(transport, metrics, {
    unavailable: () => reason,
  });
  for (const token of [undefined, "t-unknown", "t-reader"]) {
    const res = await handler(get(token));
    assert.equal(res.status, 503);
    assert.equal(
      await res.text(),
      "Service Unavailable: the operator may not create tokenreviews\n",
    );
  }
  assert.equal(calls.length, 0, "no caller is reviewed, and none is let through");
  // Granted: the callers are reviewed again, with no restart.
  reason = undefined;
  assert.equal((await handler(get("t-reader"))).status, 200);
  assert.equal((await handler(get("t-other"))).status, 403);
  assert.equal((await handler(get())).status, 401);
});
