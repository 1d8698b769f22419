import assert from "node:assert/strict";
import { base64url, fromBase64url, importRs256Key, pemToPkcs8, signRs256 } from "./jwt.ts";

async function rsaKeyPair(): Promise<{ pem: string; pkcs8: Uint8Array; publicKey: CryptoKey }> {
  const kp = await crypto.subtle.generateKey(
    {
      name: "RSASSA-PKCS1-v1_5",
      modulusLength: 2048,
      publicExponent: new Uint8Array([1, 0, 1]),
      hash: "SHA-256",
    },
    true,
    ["sign", "verify"],
  );
  const pkcs8 = new Uint8Array(await crypto.subtle.exportKey("pkcs8", kp.privateKey));
  return { pem: toPem("PRIVATE KEY", pkcs8), pkcs8, publicKey: kp.publicKey };
}

function toPem(label: string, der: Uint8Array): string {
  const b64 = btoa(String.fromCharCode(...der)).replace(/(.{64})/g, "$1\n");
  return `-----BEGIN ${label}-----\n${b64}\n-----END ${label}-----\n`;
}

Deno.test("base64url round-trips and drops padding", () => {
  const bytes = new Uint8Array([0xfb, 0xff, 0xfe, 0x00, 0x01]);
  assert.equal(base64url(bytes), "-__-AAE");
  assert.deepEqual(fromBase64url("-__-AAE"), bytes);
  assert.equal(base64url("{}"), "e30");
});

Deno.test("signRs256 produces a JWT the public key verifies", async () => {
  const { pem, publicKey } = await rsaKeyPair();
  const jwt = await signRs256(
    { typ: "JWT", kid: "k1" },
    { iss: "me", n: 1 },
    await importRs256Key(pem),
  );
  const [h, c, s] = jwt.split(".");
  assert.deepEqual(JSON.parse(new TextDecoder().decode(fromBase64url(h))), {
    typ: "JWT",
    kid: "k1",
    alg: "RS256",
  });
  assert.deepEqual(JSON.parse(new TextDecoder().decode(fromBase64url(c))), { iss: "me", n: 1 });
  const ok = await crypto.subtle.verify(
    "RSASSA-PKCS1-v1_5",
    publicKey,
    fromBase64url(s),
    new TextEncoder().encode(`${h}.${c}`),
  );
  assert.ok(ok);
});

Deno.test("pemToPkcs8 wraps a PKCS#1 RSA key into the same PKCS#8 WebCrypto exports", async () => {
  const { pkcs8 } = await rsaKeyPair();
  // A 2048-bit PKCS#8 RSA key is a 26-byte header followed by the PKCS#1 structure.
  const pkcs1 = pkcs8.slice(26);
  assert.equal(pkcs1[0], 0x30);
  assert.deepEqual(pemToPkcs8(toPem("RSA PRIVATE KEY", pkcs1)), pkcs8);
  assert.deepEqual(pemToPkcs8(toPem("PRIVATE KEY", pkcs8)), pkcs8);
  await importRs256Key(toPem("RSA PRIVATE KEY", pkcs1));
  assert.throws(() => pemToPkcs8("nothing"), /no PEM block/);
  assert.throws(() => pemToPkcs8(toPem("EC PRIVATE KEY", pkcs1)), /unsupported PEM type/);
});
