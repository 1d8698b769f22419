/** RS256 JSON Web Tokens with WebCrypto: sign (for Google service-account assertions) and helpers. */

/** base64url without padding, of bytes or a UTF-8 string. */
export function base64url(data: Uint8Array | string): string {
  const bytes = typeof data === "string" ? new TextEncoder().encode(data) : data;
  let bin = "";
  for (const b of bytes) bin += String.fromCharCode(b);
  return btoa(bin).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
}

/** Decodes base64url (padding optional). */
export function fromBase64url(s: string): Uint8Array<ArrayBuffer> {
  const b64 = s.replace(/-/g, "+").replace(/_/g, "/");
  const bin = atob(b64 + "=".repeat((4 - (b64.length % 4)) % 4));
  return Uint8Array.from(bin, (c) => c.charCodeAt(0));
}

/**
 * The PKCS#8 DER inside a PEM private key. "PRIVATE KEY" is used as is; a PKCS#1
 * "RSA PRIVATE KEY" is wrapped into PKCS#8, since WebCrypto imports only PKCS#8.
 */
export function pemToPkcs8(pem: string): Uint8Array<ArrayBuffer> {
  const m = /-----BEGIN ([A-Z ]+)-----([\s\S]*?)-----END \1-----/.exec(pem);
  if (!m) throw new Error("private key: no PEM block found");
  const der = Uint8Array.from(atob(m[2].replace(/\s+/g, "")), (c) => c.charCodeAt(0));
  if (m[1] === "PRIVATE KEY") return der;
  if (m[1] === "RSA PRIVATE KEY") return wrapPkcs1(der);
  throw new Error(`private key: unsupported PEM type ${JSON.stringify(m[1])}`);
}

/** Imports an RSA private key PEM for RS256 signing. */
export function importRs256Key(pem: string): Promise<CryptoKey> {
  return crypto.subtle.importKey(
    "pkcs8",
    pemToPkcs8(pem),
    { name: "RSASSA-PKCS1-v1_5", hash: "SHA-256" },
    false,
    ["sign"],
  );
}

/** Signs header + claims as a compact RS256 JWT. */
export async function signRs256(
  header: Record<string, unknown>,
  claims: Record<string, unknown>,
  key: CryptoKey,
): Promise<string> {
  const input = `${base64url(JSON.stringify({ ...header, alg: "RS256" }))}.${
    base64url(JSON.stringify(claims))
  }`;
  const sig = await crypto.subtle.sign(
    "RSASSA-PKCS1-v1_5",
    key,
    new TextEncoder().encode(input),
  );
  return `${input}.${base64url(new Uint8Array(sig))}`;
}

// PrivateKeyInfo prefix pieces: version 0 and AlgorithmIdentifier rsaEncryption + NULL.
const VERSION_0 = [0x02, 0x01, 0x00];
const RSA_ALGORITHM = [
  0x30,
  0x0d,
  0x06,
  0x09,
  0x2a,
  0x86,
  0x48,
  0x86,
  0xf7,
  0x0d,
  0x01,
  0x01,
  0x01,
  0x05,
  0x00,
];

function wrapPkcs1(pkcs1: Uint8Array): Uint8Array<ArrayBuffer> {
  const octet = [0x04, ...derLength(pkcs1.length)];
  const bodyLen = VERSION_0.length + RSA_ALGORITHM.length + octet.length + pkcs1.length;
  const head = [0x30, ...derLength(bodyLen), ...VERSION_0, ...RSA_ALGORITHM, ...octet];
  const out = new Uint8Array(head.length + pkcs1.length);
  out.set(head, 0);
  out.set(pkcs1, head.length);
  return out;
}

function derLength(n: number): number[] {
  if (n < 0x80) return [n];
  const bytes: number[] = [];
  for (let v = n; v > 0; v >>= 8) bytes.unshift(v & 0xff);
  return [0x80 | bytes.length, ...bytes];
}
