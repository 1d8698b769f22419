/**
 * A renewed metrics certificate (cert-manager rewrites the mounted Secret) is served without a
 * restart, on the HTTP/1.1 listener and on the HTTP/2 one; a pair that cannot be used leaves the
 * one in use. Observed as a client sees it: which CA the handshake's certificate chains to, and
 * that /metrics still answers.
 */
import assert from "node:assert/strict";
import { Registry } from "./prom_client.ts";
import { Servers, type TlsPair } from "./servers.ts";
import { createCertificateAuthority } from "./x509.ts";
import { waitFor } from "./testing/wait.ts";

async function issued(name: string): Promise<{ caPem: string; tls: TlsPair }> {
  const ca = await createCertificateAuthority(`${name}-ca`);
  const leaf = await ca.issue({
    commonName: name,
    dnsNames: ["localhost"],
    ipAddresses: ["127.0.0.1"],
    usage: "server",
  });
  return { caPem: ca.certPem, tls: { cert: leaf.certPem + ca.certPem, key: leaf.keyPem } };
}

/** Whether a TLS handshake trusting only caPem succeeds against the listener. */
async function trustedBy(port: number, caPem: string): Promise<boolean> {
  try {
    const conn = await Deno.connectTls({ hostname: "127.0.0.1", port, caCerts: [caPem] });
    await conn.handshake();
    conn.close();
    return true;
  } catch {
    return false;
  }
}

async function scrape(port: number, caPem: string): Promise<number> {
  const client = Deno.createHttpClient({ caCerts: [caPem] });
  try {
    const res = await fetch(`https://127.0.0.1:${port}/metrics`, { client });
    await res.body?.cancel();
    return res.status;
  } finally {
    client.close();
  }
}

for (const http2 of [false, true]) {
  Deno.test(`metrics certificate: a renewed pair is served without a restart (${http2 ? "HTTP/2" : "HTTP/1.1"} listener)`, async () => {
    const first = await issued("first");
    const renewed = await issued("renewed");
    let onDisk: TlsPair = first.tls;
    const servers = new Servers({
      healthProbeBindAddress: "0",
      metricsBindAddress: "127.0.0.1:0",
      registry: new Registry(),
      metricsHttp2: http2,
      metricsSecurity: {
        tls: first.tls,
        filter: (handler) => handler,
        reloadTls: () => Promise.resolve(onDisk),
        certPollMs: 20,
      },
    });
    await servers.start();
    try {
      const port = servers.metricsAddr!.port;
      assert.equal(await trustedBy(port, first.caPem), true);
      assert.equal(await trustedBy(port, renewed.caPem), false);

      // A pair that cannot be used (the key of another certificate) is not taken.
      onDisk = { cert: renewed.tls.cert, key: first.tls.key };
      await new Promise((resolve) => setTimeout(resolve, 200));
      assert.equal(await trustedBy(port, first.caPem), true, "the pair in use stays");
      assert.equal(await scrape(port, first.caPem), 200);

      onDisk = renewed.tls;
      await waitFor("the renewed certificate served", () => trustedBy(port, renewed.caPem));
      assert.equal(await trustedBy(port, first.caPem), false);
      assert.equal(await scrape(port, renewed.caPem), 200);
      assert.equal(servers.metricsAddr!.port, port, "same port");
    } finally {
      await servers.close();
    }
  });
}
