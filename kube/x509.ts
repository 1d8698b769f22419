/**
 * Issues X.509 certificates (ECDSA P-256) with WebCrypto: a CA and server or client leaf
 * certificates. The metrics server's self-signed certificate comes from here
 * (kube/metrics_serving.ts), and so do the test control plane's CA, kube-apiserver serving
 * certificate and client certificates. Doing it in TypeScript needs no `openssl` and costs a few
 * milliseconds.
 *
 * @module
 */

import {
  bitString,
  boolean,
  explicit,
  octetString,
  oid,
  sequence,
  set,
  smallInteger,
  time,
  tlv,
  toPem,
  unsignedInteger,
  utf8String,
} from "./der.ts";

const EC_PARAMS = { name: "ECDSA", namedCurve: "P-256" } as const;
const SIGN_PARAMS = { name: "ECDSA", hash: "SHA-256" } as const;
const ECDSA_WITH_SHA256 = sequence(oid("1.2.840.10045.4.3.2"));

/** A PEM private key (PKCS#8) with its PEM public key (SPKI). */
export interface PemKeyPair {
  privateKeyPem: string;
  publicKeyPem: string;
}

/** A certificate and its private key, both PEM. */
export interface IssuedCertificate {
  certPem: string;
  keyPem: string;
}

/** What to put in an issued leaf certificate. */
export interface LeafOptions {
  commonName: string;
  /** Subject O= values; Kubernetes reads them as group names for client certificates. */
  organizations?: string[];
  dnsNames?: string[];
  ipAddresses?: string[];
  usage: "server" | "client";
  /** End of validity (default: the authority's validity from now), for expiring certificates. */
  notAfter?: Date;
}

/** A certificate authority able to sign leaf certificates. */
export interface CertificateAuthority extends IssuedCertificate {
  issue(opts: LeafOptions): Promise<IssuedCertificate>;
}

interface KeyMaterial {
  keys: CryptoKeyPair;
  spki: Uint8Array;
  keyId: Uint8Array;
  privateKeyPem: string;
}

async function newKey(): Promise<KeyMaterial> {
  const keys = await crypto.subtle.generateKey(EC_PARAMS, true, ["sign", "verify"]);
  const spki = new Uint8Array(await crypto.subtle.exportKey("spki", keys.publicKey));
  const point = new Uint8Array(await crypto.subtle.exportKey("raw", keys.publicKey));
  const keyId = new Uint8Array(await crypto.subtle.digest("SHA-1", point));
  const pkcs8 = new Uint8Array(await crypto.subtle.exportKey("pkcs8", keys.privateKey));
  return { keys, spki, keyId, privateKeyPem: toPem("PRIVATE KEY", pkcs8) };
}

/** A fresh ECDSA key pair in PEM, e.g. for service-account token signing. */
export async function generateKeyPair(): Promise<PemKeyPair> {
  const key = await newKey();
  return { privateKeyPem: key.privateKeyPem, publicKeyPem: toPem("PUBLIC KEY", key.spki) };
}

function name(commonName: string, organizations: string[] = []): Uint8Array {
  const rdn = (type: string, value: string) => set(sequence(oid(type), utf8String(value)));
  return sequence(...organizations.map((o) => rdn("2.5.4.10", o)), rdn("2.5.4.3", commonName));
}

function extension(id: string, critical: boolean, value: Uint8Array): Uint8Array {
  return sequence(oid(id), ...(critical ? [boolean(true)] : []), octetString(value));
}

/** keyUsage bits, numbered from the most significant bit as X.509 does. */
function keyUsage(bits: number[]): Uint8Array {
  let value = 0;
  for (const bit of bits) value |= 0x80 >> bit;
  const unused = Math.min(7, 7 - Math.max(...bits));
  return bitString(Uint8Array.of(value), unused);
}

function ipAddressBytes(ip: string): Uint8Array {
  const parts = ip.split(".").map(Number);
  if (parts.length !== 4 || parts.some((p) => !(p >= 0 && p <= 255))) {
    throw new Error(`only IPv4 addresses are supported in certificates: ${ip}`);
  }
  return Uint8Array.from(parts);
}

/** An ECDSA signature from WebCrypto (r||s) re-encoded as the DER SEQUENCE X.509 carries. */
function derSignature(raw: Uint8Array): Uint8Array {
  const half = raw.length / 2;
  return sequence(unsignedInteger(raw.subarray(0, half)), unsignedInteger(raw.subarray(half)));
}

interface CertSpec {
  subject: Uint8Array;
  subjectKey: KeyMaterial;
  issuer: Uint8Array;
  issuerKey: KeyMaterial;
  extensions: Uint8Array[];
  validityDays: number;
  /** Overrides validityDays when set. */
  notAfter?: Date;
}

/** How long certificates are valid by default (the test control plane's lifetime, with room). */
const DEFAULT_VALIDITY_DAYS = 30;

async function signCertificate(spec: CertSpec): Promise<string> {
  const serial = crypto.getRandomValues(new Uint8Array(16));
  serial[0] &= 0x7f;
  const now = Date.now();
  const tbs = sequence(
    explicit(0, smallInteger(2)), // v3
    unsignedInteger(serial),
    ECDSA_WITH_SHA256,
    spec.issuer,
    // Backdated a little so clock skew between processes never makes a fresh cert "not yet valid".
    sequence(
      time(new Date(now - 3600_000)),
      time(spec.notAfter ?? new Date(now + spec.validityDays * 24 * 3600_000)),
    ),
    spec.subject,
    spec.subjectKey.spki,
    explicit(
      3,
      sequence(
        ...spec.extensions,
        extension("2.5.29.14", false, octetString(spec.subjectKey.keyId)),
        extension("2.5.29.35", false, sequence(tlv(0x80, spec.issuerKey.keyId))),
      ),
    ),
  );
  const signature = new Uint8Array(
    await crypto.subtle.sign(SIGN_PARAMS, spec.issuerKey.keys.privateKey, tbs),
  );
  const cert = sequence(tbs, ECDSA_WITH_SHA256, bitString(derSignature(signature)));
  return toPem("CERTIFICATE", cert);
}

/** Creates a self-signed CA whose `issue` signs server or client leaf certificates. */
export async function createCertificateAuthority(
  commonName: string,
  opts: { validityDays?: number } = {},
): Promise<CertificateAuthority> {
  const validityDays = opts.validityDays ?? DEFAULT_VALIDITY_DAYS;
  const caKey = await newKey();
  const caName = name(commonName);
  const certPem = await signCertificate({
    subject: caName,
    subjectKey: caKey,
    issuer: caName,
    issuerKey: caKey,
    validityDays,
    extensions: [
      extension("2.5.29.19", true, sequence(boolean(true))),
      extension("2.5.29.15", true, keyUsage([0, 5, 6])), // digitalSignature, keyCertSign, cRLSign
    ],
  });

  async function issue(opts: LeafOptions): Promise<IssuedCertificate> {
    const key = await newKey();
    const altNames = [
      ...(opts.dnsNames ?? []).map((d) => tlv(0x82, new TextEncoder().encode(d))),
      ...(opts.ipAddresses ?? []).map((ip) => tlv(0x87, ipAddressBytes(ip))),
    ];
    const usageOid = opts.usage === "server" ? "1.3.6.1.5.5.7.3.1" : "1.3.6.1.5.5.7.3.2";
    const leafPem = await signCertificate({
      subject: name(opts.commonName, opts.organizations),
      subjectKey: key,
      issuer: caName,
      issuerKey: caKey,
      validityDays,
      extensions: [
        extension("2.5.29.19", true, sequence()),
        extension("2.5.29.15", true, keyUsage([0])), // digitalSignature
        extension("2.5.29.37", false, sequence(oid(usageOid))),
        ...(altNames.length ? [extension("2.5.29.17", false, sequence(...altNames))] : []),
      ],
      notAfter: opts.notAfter,
    });
    return { certPem: leafPem, keyPem: key.privateKeyPem };
  }

  return { certPem, keyPem: caKey.privateKeyPem, issue };
}
