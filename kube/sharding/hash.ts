/**
 * The hash the API server shards by (k8s.io/apimachinery pkg/sharding, v1.36): 64-bit FNV-1a over
 * the UTF-8 bytes of the field value. The server compares hashes as "0x" plus 16 lowercase hex
 * digits; here the hash is a bigint, and {@linkcode hashHex} gives the server's text form.
 *
 * @module
 */

const FNV_OFFSET_BASIS = 0xcbf29ce484222325n;
const FNV_PRIME = 0x100000001b3n;
const MASK64 = 0xffffffffffffffffn;
const encoder = new TextEncoder();

/** 64-bit FNV-1a of the UTF-8 encoding of `value`, in [0, 2^64). */
export function fnv1a64(value: string): bigint {
  let hash = FNV_OFFSET_BASIS;
  for (const byte of encoder.encode(value)) {
    hash = ((hash ^ BigInt(byte)) * FNV_PRIME) & MASK64;
  }
  return hash;
}

/** The server's HashField: the hash as 16 lowercase hex digits, zero-padded, no "0x". */
export function hashHex(value: string): string {
  return fnv1a64(value).toString(16).padStart(16, "0");
}
