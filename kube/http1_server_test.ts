/**
 * The HTTP/1.1 server's own limits: connections that say nothing, or stop saying anything, are
 * closed instead of held (with short timeouts here; controller-runtime's 32 s and 90 s by default).
 */
import assert from "node:assert/strict";
import { serveHttp1 } from "./http1_server.ts";
import { createCertificateAuthority } from "./x509.ts";

/** Resolves with true once the peer closes conn, false if it is still open after limitMs. */
async function closedWithin(conn: Deno.Conn, limitMs: number): Promise<boolean> {
  const buf = new Uint8Array(4096);
  let timer: ReturnType<typeof setTimeout> | undefined;
  const expired = new Promise<false>((
    resolve,
  ) => (timer = setTimeout(() => resolve(false), limitMs)));
  const closed = (async () => {
    try {
      while ((await conn.read(buf)) !== null) {
        // Drain whatever arrives until the close.
      }
    } catch {
      // A reset is a close too.
    }
    return true as const;
  })();
  try {
    return await Promise.race([closed, expired]);
  } finally {
    clearTimeout(timer);
    try {
      conn.close();
    } catch {
      // Already closed.
    }
  }
}

const fast = { headerTimeoutMs: 300, idleTimeoutMs: 300 };

Deno.test("http1 server: a connection that never sends a request is closed", async () => {
  const ca = await createCertificateAuthority("http1-test-ca");
  const leaf = await ca.issue({ commonName: "t", ipAddresses: ["127.0.0.1"], usage: "server" });
  for (const tls of [undefined, { cert: leaf.certPem, key: leaf.keyPem }]) {
    const server = await serveHttp1(
      { hostname: "127.0.0.1", port: 0, tls, ...fast },
      () => new Response("ok"),
    );
    try {
      // Plain TCP even against the TLS listener: no handshake ever starts.
      const conn = await Deno.connect({ hostname: "127.0.0.1", port: server.addr.port });
      assert.ok(await closedWithin(conn, 10_000), `silent connection held (tls: ${!!tls})`);
    } finally {
      await server.shutdown();
    }
  }
});

Deno.test("http1 server: a kept-alive connection is closed once idle, after its answer", async () => {
  const server = await serveHttp1(
    { hostname: "127.0.0.1", port: 0, ...fast },
    () => new Response("ok"),
  );
  try {
    const conn = await Deno.connect({ hostname: "127.0.0.1", port: server.addr.port });
    await conn.write(new TextEncoder().encode("GET /metrics HTTP/1.1\r\nHost: t\r\n\r\n"));
    const buf = new Uint8Array(4096);
    const n = await conn.read(buf);
    assert.match(new TextDecoder().decode(buf.subarray(0, n ?? 0)), /^HTTP\/1\.1 200 OK\r\n/);
    assert.ok(await closedWithin(conn, 10_000), "idle keep-alive connection held");
  } finally {
    await server.shutdown();
  }
});

Deno.test("http1 server: TRACE (which fetch cannot represent) is refused with 400, HEAD reaches the handler", async () => {
  const seen: string[] = [];
  const server = await serveHttp1({ hostname: "127.0.0.1", port: 0 }, (req) => {
    seen.push(`${req.method} ${new URL(req.url).pathname}`);
    return new Response(null, { status: 204 });
  });
  try {
    const cases = [["TRACE / HTTP/1.1", 400], ["HEAD /metrics HTTP/1.1", 204]] as const;
    for (const [line, status] of cases) {
      const conn = await Deno.connect({ hostname: "127.0.0.1", port: server.addr.port });
      try {
        await conn.write(
          new TextEncoder().encode(`${line}\r\nHost: t\r\nConnection: close\r\n\r\n`),
        );
        const buf = new Uint8Array(4096);
        const n = await conn.read(buf);
        assert.match(
          new TextDecoder().decode(buf.subarray(0, n ?? 0)),
          new RegExp(`^HTTP/1\\.1 ${status} `),
          line,
        );
      } finally {
        conn.close();
      }
    }
    assert.deepEqual(seen, ["HEAD /metrics"]);
  } finally {
    await server.shutdown();
  }
});
