/**
 * The metrics server's TLS material, as controller-runtime's metrics server gets it: tls.crt and
 * tls.key from a certificate folder (a cert-manager Secret mounted at --metrics-cert-dir), else
 * a self-signed certificate made at start and kept in memory only. Files are read again while the
 * operator runs (readCertificateFiles, polled by kube/servers.ts), so a renewed Secret is served
 * without a restart.
 *
 * @module
 */
import { createCertificateAuthority } from "./x509.ts";
import { errorText } from "./errors.ts";

/** PEM certificate chain and key for Deno.serve. */
export interface TlsMaterial {
  cert: string;
  key: string;
  /** Where it came from, for the start-up log line. */
  source: "files" | "self-signed";
}

/**
 * Names the self-signed certificate carries (a scraper that checks them still needs its CA): the
 * metrics Service in the operator's namespace.
 */
function selfSignedNames(namespace: string): string[] {
  return ["localhost", `cocoon-operator-metrics.${namespace}.svc`];
}

/**
 * tls.crt and tls.key from certDir, read again to follow a rotated Secret. Throws (naming the
 * file) when either is missing or unreadable: the pair in use then stays.
 */
export async function readCertificateFiles(
  certDir: string,
  read: (path: string) => Promise<string> = Deno.readTextFile,
): Promise<{ cert: string; key: string }> {
  const dir = certDir.replace(/\/+$/, "");
  const [cert, key] = await Promise.all(
    [`${dir}/tls.crt`, `${dir}/tls.key`].map((p) => readOptional(p, read)),
  );
  if (cert === undefined || key === undefined) {
    throw new Error(
      `metrics certificate folder ${dir} lacks ${cert === undefined ? "tls.crt" : "tls.key"}`,
    );
  }
  return { cert, key };
}

/** How long the self-signed certificate is valid (the process is replaced well before). */
const SELF_SIGNED_VALIDITY_DAYS = 365;

/**
 * tls.crt and tls.key from certDir when both are there; otherwise (no folder, or a folder without
 * them: the optional Secret is not installed) a fresh self-signed certificate. A folder with only
 * one of the two files, or files that cannot be read, is an error naming the file.
 */
export async function metricsTls(
  certDir: string | undefined,
  namespace = "cocoon-system",
  read: (path: string) => Promise<string> = Deno.readTextFile,
): Promise<TlsMaterial> {
  if (certDir) {
    const dir = certDir.replace(/\/+$/, "");
    const [cert, key] = await Promise.all(
      [`${dir}/tls.crt`, `${dir}/tls.key`].map((p) => readOptional(p, read)),
    );
    if (cert !== undefined && key !== undefined) return { cert, key, source: "files" };
    if (cert !== undefined || key !== undefined) {
      throw new Error(
        `metrics certificate folder ${dir} holds ${cert !== undefined ? "tls.crt" : "tls.key"} ` +
          `but not ${cert !== undefined ? "tls.key" : "tls.crt"}`,
      );
    }
  }
  const ca = await createCertificateAuthority("cocoon-operator-metrics-ca", {
    validityDays: SELF_SIGNED_VALIDITY_DAYS,
  });
  const leaf = await ca.issue({
    commonName: "cocoon-operator-metrics",
    dnsNames: selfSignedNames(namespace),
    ipAddresses: ["127.0.0.1"],
    usage: "server",
  });
  return { cert: `${leaf.certPem}${ca.certPem}`, key: leaf.keyPem, source: "self-signed" };
}

async function readOptional(
  path: string,
  read: (path: string) => Promise<string>,
): Promise<string | undefined> {
  try {
    return await read(path);
  } catch (err) {
    if (err instanceof Deno.errors.NotFound) return undefined;
    const why = err instanceof Deno.errors.NotCapable ? "no read permission" : errorText(err);
    throw new Error(`cannot read metrics certificate ${path}: ${why}`);
  }
}
