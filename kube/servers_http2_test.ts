/**
 * HTTP/2 on the metrics listener: off by default (HTTP/1.1 only, over TLS and plain http), on
 * with `metricsHttp2` (the operator's --enable-http2). Observed from the client side: the
 * protocol ALPN settles on, and what answers an HTTP/2 connection preface sent without ALPN
 * (prior knowledge), the way the rapid-reset attack of CVE-2023-44487 would open.
 */
import assert from "node:assert/strict";
import { Counter, Registry } from "./prom_client.ts";
import { Servers } from "./servers.ts";
import { createCertificateAuthority } from "./x509.ts";

const ca = await createCertificateAuthority("servers-http2-test-ca");
const leaf = await ca.issue({
  commonName: "metrics",
  dnsNames: ["localhost"],
  ipAddresses: ["127.0.0.1"],
  usage: "server",
});

/** The client-to-server preface of HTTP/2 followed by an empty SETTINGS frame (RFC 9113 §3.4). */
const H2_PREFACE = new Uint8Array([
  ...new TextEncoder().encode("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"),
  ...[0, 0, 0, 0x04, 0, 0, 0, 0, 0],
]);

function registryWithOneCounter(): Registry {
  const registry = new Registry();
  new Counter({ name: "test_scrapes_total", help: "Scrapes.", registers: [registry] }).inc(2);
  return registry;
}

/** A metrics-only Servers; TLS with a filter that wants `Authorization: Bearer ok`. */
async function startMetrics(opts: { tls: boolean; http2?: boolean }): Promise<Servers> {
  const servers = new Servers({
    healthProbeBindAddress: "0",
    metricsBindAddress: "127.0.0.1:0",
    registry: registryWithOneCounter(),
    metricsHttp2: opts.http2,
    metricsSecurity: opts.tls
      ? {
        tls: { cert: leaf.certPem + ca.certPem, key: leaf.keyPem },
        filter: (handler) => (req) =>
          req.headers.get("authorization") === "Bearer ok"
            ? handler(req)
            : Promise.resolve(new Response("Unauthorized\n", { status: 401 })),
      }
      : undefined,
  });
  await servers.start();
  return servers;
}

/** The protocol the TLS handshake settles on when the client offers h2 and http/1.1. */
async function negotiated(addr: Deno.NetAddr): Promise<string | null> {
  const conn = await Deno.connectTls({
    hostname: "127.0.0.1",
    port: addr.port,
    caCerts: [ca.certPem],
    alpnProtocols: ["h2", "http/1.1"],
  });
  try {
    return (await conn.handshake()).alpnProtocol;
  } finally {
    conn.close();
  }
}

/**
 * Sends the HTTP/2 preface (no ALPN) and returns what the server answers before it closes or
 * within two seconds.
 */
async function answerToPreface(addr: Deno.NetAddr, tls: boolean): Promise<Uint8Array> {
  const conn = tls
    ? await Deno.connectTls({ hostname: "127.0.0.1", port: addr.port, caCerts: [ca.certPem] })
    : await Deno.connect({ hostname: "127.0.0.1", port: addr.port });
  const received: number[] = [];
  try {
    await conn.write(H2_PREFACE);
    const buf = new Uint8Array(4096);
    const deadline = Date.now() + 2000;
    while (received.length < 9 && Date.now() < deadline) {
      const timer = setTimeout(() => conn.close(), deadline - Date.now());
      let n: number | null;
      try {
        n = await conn.read(buf);
      } catch {
        n = null;
      } finally {
        clearTimeout(timer);
      }
      if (n === null) break;
      received.push(...buf.subarray(0, n));
    }
  } finally {
    try {
      conn.close();
    } catch {
      // Closed by the deadline or the server.
    }
  }
  return new Uint8Array(received);
}

/** Whether bytes start with an HTTP/2 frame header of type SETTINGS (the server's preface). */
function isHttp2Settings(bytes: Uint8Array): boolean {
  return bytes.length >= 9 && bytes[3] === 0x04;
}

/** What a server that refuses the preface answers: nothing, or an HTTP/1.1 error. */
function assertRefusedAsHttp1(bytes: Uint8Array): void {
  assert.ok(!isHttp2Settings(bytes), "the server answered with HTTP/2 SETTINGS");
  const text = new TextDecoder().decode(bytes);
  assert.ok(text === "" || /^HTTP\/1\.1 4\d\d /.test(text), JSON.stringify(text.slice(0, 80)));
}

Deno.test("metrics over TLS: HTTP/1.1 only by default, with the filter and the registry", async () => {
  const servers = await startMetrics({ tls: true });
  try {
    const addr = servers.metricsAddr!;
    assert.equal(await negotiated(addr), "http/1.1");
    assertRefusedAsHttp1(await answerToPreface(addr, true));

    const client = Deno.createHttpClient({ caCerts: [ca.certPem] });
    try {
      const url = `https://127.0.0.1:${addr.port}/metrics`;
      const denied = await fetch(url, { client });
      assert.equal(denied.status, 401);
      await denied.body?.cancel();
      // Two scrapes on one client: keep-alive answers both the same.
      for (let i = 0; i < 2; i++) {
        const res = await fetch(url, { client, headers: { authorization: "Bearer ok" } });
        assert.equal(res.status, 200);
        assert.match(res.headers.get("content-type") ?? "", /^text\/plain; version=0\.0\.4/);
        assert.match(await res.text(), /^test_scrapes_total 2$/m);
      }
      const missing = await fetch(`https://127.0.0.1:${addr.port}/nope`, {
        client,
        headers: { authorization: "Bearer ok" },
      });
      assert.equal(missing.status, 404);
      await missing.body?.cancel();
    } finally {
      client.close();
    }
  } finally {
    await servers.close();
  }
});

Deno.test("metrics over TLS with HTTP/2 enabled: ALPN h2 and an HTTP/2 answer to the preface", async () => {
  const servers = await startMetrics({ tls: true, http2: true });
  try {
    const addr = servers.metricsAddr!;
    assert.equal(await negotiated(addr), "h2");
    assert.ok(isHttp2Settings(await answerToPreface(addr, true)));
  } finally {
    await servers.close();
  }
});

Deno.test("metrics over plain http: no HTTP/2 with prior knowledge unless enabled", async () => {
  const off = await startMetrics({ tls: false });
  try {
    assertRefusedAsHttp1(await answerToPreface(off.metricsAddr!, false));
    const res = await fetch(`http://127.0.0.1:${off.metricsAddr!.port}/metrics`);
    assert.equal(res.status, 200);
    assert.match(await res.text(), /^test_scrapes_total 2$/m);
  } finally {
    await off.close();
  }
  const on = await startMetrics({ tls: false, http2: true });
  try {
    assert.ok(isHttp2Settings(await answerToPreface(on.metricsAddr!, false)));
  } finally {
    await on.close();
  }
});

Deno.test("metrics over HTTP/1.1: shutdown closes idle keep-alive connections and lets a scrape finish", async () => {
  let release: () => void = () => {};
  const held = new Promise<void>((resolve) => (release = resolve));
  let entered: () => void = () => {};
  const inside = new Promise<void>((resolve) => (entered = resolve));
  const servers = new Servers({
    healthProbeBindAddress: "0",
    metricsBindAddress: "127.0.0.1:0",
    registry: registryWithOneCounter(),
    metricsSecurity: {
      tls: { cert: leaf.certPem + ca.certPem, key: leaf.keyPem },
      // The second request waits inside the filter until released.
      filter: (handler) => async (req) => {
        if (req.headers.get("x-hold")) {
          entered();
          await held;
        }
        return handler(req);
      },
    },
  });
  await servers.start();
  const client = Deno.createHttpClient({ caCerts: [ca.certPem] });
  const slowClient = Deno.createHttpClient({ caCerts: [ca.certPem] });
  try {
    const url = `https://127.0.0.1:${servers.metricsAddr!.port}/metrics`;
    // An idle keep-alive connection left in the client's pool.
    await (await fetch(url, { client })).text();
    const slow = fetch(url, { client: slowClient, headers: { "x-hold": "1" } }).then(async (r) => ({
      status: r.status,
      body: await r.text(),
    }));
    // Shut down while the held request is inside the server.
    await inside;
    const closing = servers.close();
    release();
    await closing;
    const answered = await slow;
    assert.equal(answered.status, 200);
    assert.match(answered.body, /^test_scrapes_total 2$/m);
    await assert.rejects(() => fetch(url, { client }));
  } finally {
    release();
    client.close();
    slowClient.close();
  }
});
