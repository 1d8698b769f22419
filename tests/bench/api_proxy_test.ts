import assert from "node:assert/strict";
import { waitFor } from "../harness/wait.ts";
import { startApiProxy } from "./api_proxy.ts";
import { createCertificateAuthority } from "../../kube/x509.ts";

/** An upstream that echoes what reached it, and streams a watch until the client leaves. */
function startUpstream() {
  const seen: { method: string; path: string; auth: string | null; body: string }[] = [];
  let watchCancelled = false;
  const server = Deno.serve({ hostname: "127.0.0.1", port: 0, onListen: () => {} }, async (req) => {
    const url = new URL(req.url);
    seen.push({
      method: req.method,
      path: url.pathname + url.search,
      auth: req.headers.get("authorization"),
      body: await req.text(),
    });
    if (url.searchParams.get("watch") === "true") {
      const body = new ReadableStream<Uint8Array>({
        start(c) {
          c.enqueue(new TextEncoder().encode('{"type":"ADDED"}\n'));
        },
        cancel() {
          watchCancelled = true;
        },
      });
      return new Response(body, { headers: { "content-type": "application/json" } });
    }
    if (req.method === "DELETE") return Response.json({ reason: "NotFound" }, { status: 404 });
    return Response.json({ ok: true }, { status: req.method === "POST" ? 201 : 200 });
  });
  return {
    url: `http://127.0.0.1:${server.addr.port}`,
    seen,
    get watchCancelled() {
      return watchCancelled;
    },
    close: () => server.shutdown(),
  };
}

Deno.test({
  name: "api_proxy: forwards requests with their credentials and counts verb and resource",
  async fn() {
    const upstream = startUpstream();
    const proxy = startApiProxy(upstream.url);
    try {
      const headers = { authorization: "Bearer op-token" };
      const created = await fetch(`${proxy.url}/api/v1/namespaces/a/pods`, {
        method: "POST",
        headers,
        body: '{"metadata":{"name":"p"}}',
      });
      assert.equal(created.status, 201);
      assert.deepEqual(await created.json(), { ok: true });
      const missing = await fetch(`${proxy.url}/api/v1/namespaces/a/pods/gone`, {
        method: "DELETE",
        headers,
      });
      assert.equal(missing.status, 404);
      await missing.body?.cancel();

      assert.deepEqual(upstream.seen.map((s) => [s.method, s.path, s.auth, s.body]), [
        ["POST", "/api/v1/namespaces/a/pods", "Bearer op-token", '{"metadata":{"name":"p"}}'],
        ["DELETE", "/api/v1/namespaces/a/pods/gone", "Bearer op-token", ""],
      ]);
      assert.deepEqual(
        proxy.requests.map((r) => [r.verb, r.resource, r.namespace, r.status]),
        [["create", "pods", "a", 201], ["delete", "pods", "a", 404]],
      );
      assert.equal(proxy.between(proxy.requests[1].at).length, 1);
    } finally {
      await proxy.close();
      await upstream.close();
    }
  },
});

Deno.test({
  name: "api_proxy: a watch streams through and ends upstream when the client leaves",
  async fn() {
    const upstream = startUpstream();
    const proxy = startApiProxy(upstream.url);
    try {
      const res = await fetch(`${proxy.url}/api/v1/pods?watch=true`);
      const reader = res.body!.getReader();
      const first = await reader.read();
      assert.equal(new TextDecoder().decode(first.value), '{"type":"ADDED"}\n');
      assert.deepEqual(proxy.requests.map((r) => [r.verb, r.resource, r.status]), [
        ["watch", "pods", 200],
      ]);
      await reader.cancel();
      await waitFor("the upstream watch to be cancelled", () => upstream.watchCancelled);
    } finally {
      await proxy.close();
      await upstream.close();
    }
  },
});

Deno.test({
  name: "api_proxy: the kubeconfig copy points at the proxy and keeps the credentials",
  async fn() {
    const proxy = startApiProxy("http://127.0.0.1:1");
    const dir = await Deno.makeTempDir();
    try {
      const original = `${dir}/sa.kubeconfig`;
      await Deno.writeTextFile(
        original,
        JSON.stringify({
          clusters: [{
            name: "c",
            cluster: { server: "https://127.0.0.1:6443", "certificate-authority-data": "Q0E=" },
          }],
          users: [{ name: "u", user: { token: "t0k" } }],
        }),
      );
      const copy = JSON.parse(await Deno.readTextFile(await proxy.rewriteKubeconfig(original)));
      assert.deepEqual(copy.clusters, [{ name: "c", cluster: { server: proxy.url } }]);
      assert.deepEqual(copy.users, [{ name: "u", user: { token: "t0k" } }]);
    } finally {
      await proxy.close();
      await Deno.remove(dir, { recursive: true });
    }
  },
});

Deno.test({
  name: "api_proxy: a stalled stream forwards nothing more and stays open; new requests pass",
  async fn() {
    const ticks = new Set<ReturnType<typeof setInterval>>();
    const upstream = Deno.serve({ hostname: "127.0.0.1", port: 0, onListen: () => {} }, () => {
      let tick: ReturnType<typeof setInterval>;
      const body = new ReadableStream<Uint8Array>({
        start(c) {
          let n = 0;
          tick = setInterval(() => c.enqueue(new TextEncoder().encode(`{"n":${n++}}\n`)), 20);
          ticks.add(tick);
        },
        cancel() {
          clearInterval(tick);
        },
      });
      return new Response(body);
    });
    const proxy = startApiProxy(`http://127.0.0.1:${upstream.addr.port}`);
    try {
      const res = await fetch(`${proxy.url}/api/v1/pods?watch=true`);
      const reader = res.body!.getReader();
      assert.equal((await reader.read()).done, false);
      assert.equal(proxy.stallOpenStreams(), 1);
      // Whatever was already on its way may still arrive; after that, neither data nor an end.
      const quiet = async () => {
        const next = reader.read();
        const timeout = new Promise<"quiet">((r) => setTimeout(() => r("quiet"), 300));
        return await Promise.race([next.then(() => "data" as const), timeout]);
      };
      await waitFor("the stream to go quiet", async () => (await quiet()) === "quiet", 5_000, 0);
      const other = await fetch(`${proxy.url}/api/v1/pods?watch=true`);
      const otherReader = other.body!.getReader();
      assert.equal((await otherReader.read()).done, false, "a new stream is forwarded");
      await otherReader.cancel();
      await reader.cancel();
    } finally {
      for (const t of ticks) clearInterval(t);
      await proxy.close();
      await upstream.shutdown();
    }
  },
});

Deno.test("api_proxy: with a serving certificate it answers over https and names its authority in the kubeconfig", async () => {
  // client-go 0.35 sends no bearer token to a plain-http server: the Go original needs TLS.
  const ca = await createCertificateAuthority("api-proxy-test-ca");
  const leaf = await ca.issue({ commonName: "proxy", ipAddresses: ["127.0.0.1"], usage: "server" });
  const upstream = startUpstream();
  const proxy = startApiProxy(upstream.url, undefined, undefined, { ...leaf, caPem: ca.certPem });
  const dir = await Deno.makeTempDir();
  const client = Deno.createHttpClient({ caCerts: [ca.certPem] });
  try {
    assert.match(proxy.url, /^https:\/\/127\.0\.0\.1:\d+$/);
    const res = await fetch(`${proxy.url}/api`, {
      headers: { authorization: "Bearer op-token" },
      client,
    });
    assert.equal(res.status, 200);
    await res.body?.cancel();
    assert.equal(upstream.seen.at(-1)?.auth, "Bearer op-token");
    await Deno.writeTextFile(
      `${dir}/op.kubeconfig`,
      JSON.stringify({
        clusters: [{ cluster: { server: "https://x", "certificate-authority-data": "old" } }],
      }),
    );
    const rewritten = JSON.parse(
      await Deno.readTextFile(await proxy.rewriteKubeconfig(`${dir}/op.kubeconfig`)),
    );
    assert.deepEqual(rewritten.clusters[0].cluster, {
      server: proxy.url,
      "certificate-authority-data": btoa(ca.certPem),
    });
  } finally {
    client.close();
    await proxy.close();
    await upstream.close();
    await Deno.remove(dir, { recursive: true });
  }
});
