/**
 * A minimal ASN.1 DER encoder: just the types an X.509 certificate needs (kube/x509.ts). The
 * metrics server and the test control plane issue their certificates with it, no `openssl` needed.
 *
 * @module
 */

/** Byte arrays backed by a plain ArrayBuffer, as WebCrypto wants them. */
export type Bytes = Uint8Array<ArrayBuffer>;

/** Encodes a length in DER's definite form. */
function encodeLength(length: number): Bytes {
  if (length < 0x80) return Uint8Array.of(length);
  const bytes: number[] = [];
  for (let n = length; n > 0; n = Math.floor(n / 256)) bytes.unshift(n & 0xff);
  return Uint8Array.of(0x80 | bytes.length, ...bytes);
}

/** Concatenates byte arrays. */
export function concatBytes(...parts: Uint8Array[]): Bytes {
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let offset = 0;
  for (const part of parts) {
    out.set(part, offset);
    offset += part.length;
  }
  return out;
}

/** A tag-length-value element with the given tag byte and raw content. */
export function tlv(tag: number, content: Uint8Array): Bytes {
  return concatBytes(Uint8Array.of(tag), encodeLength(content.length), content);
}

/** SEQUENCE of already-encoded elements. */
export function sequence(...items: Uint8Array[]): Bytes {
  return tlv(0x30, concatBytes(...items));
}

/** SET of already-encoded elements (callers pass a single element or pre-sorted ones). */
export function set(...items: Uint8Array[]): Bytes {
  return tlv(0x31, concatBytes(...items));
}

/** Explicit context-specific tag `[n]` wrapping one element. */
export function explicit(n: number, item: Uint8Array): Bytes {
  return tlv(0xa0 | n, item);
}

/** INTEGER from unsigned big-endian magnitude bytes (adds the sign byte DER requires). */
export function unsignedInteger(magnitude: Uint8Array): Bytes {
  let start = 0;
  while (start < magnitude.length - 1 && magnitude[start] === 0) start++;
  const trimmed = magnitude.subarray(start);
  const body = trimmed[0] & 0x80 ? concatBytes(Uint8Array.of(0), trimmed) : trimmed;
  return tlv(0x02, body);
}

/** INTEGER from a small non-negative number. */
export function smallInteger(value: number): Bytes {
  const bytes: number[] = [];
  for (let n = value; n > 0; n = Math.floor(n / 256)) bytes.unshift(n & 0xff);
  return unsignedInteger(Uint8Array.from(bytes.length ? bytes : [0]));
}

/** BOOLEAN. */
export function boolean(value: boolean): Bytes {
  return tlv(0x01, Uint8Array.of(value ? 0xff : 0));
}

/** OBJECT IDENTIFIER from dotted notation. */
export function oid(dotted: string): Bytes {
  const arcs = dotted.split(".").map(Number);
  const bytes: number[] = [arcs[0] * 40 + arcs[1]];
  for (const arc of arcs.slice(2)) {
    const chunk: number[] = [arc & 0x7f];
    for (let n = Math.floor(arc / 128); n > 0; n = Math.floor(n / 128)) {
      chunk.unshift(0x80 | (n & 0x7f));
    }
    bytes.push(...chunk);
  }
  return tlv(0x06, Uint8Array.from(bytes));
}

/** UTF8String. */
export function utf8String(value: string): Bytes {
  return tlv(0x0c, new TextEncoder().encode(value));
}

/** OCTET STRING. */
export function octetString(content: Uint8Array): Bytes {
  return tlv(0x04, content);
}

/** BIT STRING whose last byte has `unusedBits` padding bits. */
export function bitString(content: Uint8Array, unusedBits = 0): Bytes {
  return tlv(0x03, concatBytes(Uint8Array.of(unusedBits), content));
}

/** A certificate time: UTCTime up to 2049 and GeneralizedTime after, as X.509 requires. */
export function time(date: Date): Bytes {
  const digits = date.toISOString().slice(0, 19).replace(/[-:T]/g, ""); // YYYYMMDDhhmmss
  if (date.getUTCFullYear() < 2050) {
    return tlv(0x17, new TextEncoder().encode(digits.slice(2) + "Z"));
  }
  return tlv(0x18, new TextEncoder().encode(digits + "Z"));
}

/** Wraps DER bytes in a PEM block. */
export function toPem(label: string, der: Uint8Array): string {
  let binary = "";
  for (const byte of der) binary += String.fromCharCode(byte);
  const lines = btoa(binary).match(/.{1,64}/g) ?? [];
  return `-----BEGIN ${label}-----\n${lines.join("\n")}\n-----END ${label}-----\n`;
}
