import assert from "node:assert/strict";
import { X509Certificate } from "node:crypto";
import { createCertificateAuthority, generateKeyPair } from "./x509.ts";

Deno.test("issued certificates chain to the CA and carry the requested names", async () => {
  const ca = await createCertificateAuthority("test-ca");
  const caCert = new X509Certificate(ca.certPem);
  assert.equal(caCert.ca, true);
  assert.ok(caCert.checkIssued(caCert));

  const client = await ca.issue({
    commonName: "alice",
    organizations: ["system:masters", "devs"],
    usage: "client",
  });
  const clientCert = new X509Certificate(client.certPem);
  assert.equal(clientCert.ca, false);
  assert.ok(clientCert.checkIssued(caCert));
  assert.ok(clientCert.verify(caCert.publicKey));
  assert.match(clientCert.subject, /CN=alice/);
  assert.match(clientCert.subject, /O=system:masters/);
  assert.match(clientCert.subject, /O=devs/);

  const server = await ca.issue({
    commonName: "srv",
    dnsNames: ["localhost"],
    ipAddresses: ["127.0.0.1"],
    usage: "server",
  });
  const serverCert = new X509Certificate(server.certPem);
  assert.ok(serverCert.verify(caCert.publicKey));
  assert.equal(serverCert.checkIP("127.0.0.1"), "127.0.0.1");
  assert.equal(serverCert.checkHost("localhost"), "localhost");
});

Deno.test("a TLS client trusting the CA accepts the issued serving certificate", async () => {
  const ca = await createCertificateAuthority("test-ca");
  const server = await ca.issue({
    commonName: "srv",
    ipAddresses: ["127.0.0.1"],
    usage: "server",
  });
  const httpServer = Deno.serve({
    hostname: "127.0.0.1",
    port: 0,
    cert: server.certPem,
    key: server.keyPem,
    onListen: () => {},
  }, () => new Response("hello"));
  const client = Deno.createHttpClient({ caCerts: [ca.certPem] });
  try {
    const res = await fetch(`https://127.0.0.1:${httpServer.addr.port}/`, { client });
    assert.equal(await res.text(), "hello");
  } finally {
    client.close();
    await httpServer.shutdown();
  }
});

Deno.test("generateKeyPair returns PKCS#8 and SPKI PEM", async () => {
  const pair = await generateKeyPair();
  assert.match(pair.privateKeyPem, /^-----BEGIN PRIVATE KEY-----\n/);
  assert.match(pair.publicKeyPem, /^-----BEGIN PUBLIC KEY-----\n/);
});
