/**
 * The API server's answer to GET /version (k8s.io/apimachinery's version.Info), reduced to what
 * a client compares: the release text and its major and minor numbers. Managed clusters write
 * the minor with a suffix ("28+" on EKS and GKE) and the release with a vendor tail
 * ("v1.28.3-eks-4f4795d"); both still name the upstream minor.
 *
 * @module
 */

/** A server's release, as /version reports it. */
export interface ServerVersion {
  /** The release as the server names it, e.g. "v1.35.4" or "v1.28.3-eks-4f4795d". */
  gitVersion: string;
  major: number;
  minor: number;
}

/** A minor release, e.g. { major: 1, minor: 33 }. */
export interface MinorVersion {
  major: number;
  minor: number;
}

/** Leading digits of a version field ("28+" → 28); undefined without any. */
function leadingNumber(value: unknown): number | undefined {
  if (typeof value !== "string") return undefined;
  const m = /^(\d+)/.exec(value);
  return m ? Number(m[1]) : undefined;
}

/**
 * Reads a /version answer; undefined when it names no release (not JSON of that shape). The
 * `major`/`minor` fields win; a server that leaves them empty (some builds do) is read from
 * gitVersion.
 */
export function parseServerVersion(body: unknown): ServerVersion | undefined {
  if (typeof body !== "object" || body === null) return undefined;
  const info = body as Record<string, unknown>;
  const gitVersion = typeof info.gitVersion === "string" ? info.gitVersion : "";
  let major = leadingNumber(info.major);
  let minor = leadingNumber(info.minor);
  if (major === undefined || minor === undefined) {
    const m = /^v?(\d+)\.(\d+)/.exec(gitVersion);
    if (!m) return undefined;
    major = Number(m[1]);
    minor = Number(m[2]);
  }
  return { gitVersion: gitVersion || `v${major}.${minor}`, major, minor };
}

/** Orders two minor releases (negative: a is older). */
export function compareMinor(a: MinorVersion, b: MinorVersion): number {
  return a.major !== b.major ? a.major - b.major : a.minor - b.minor;
}

/** "1.33" */
export function formatMinor(v: MinorVersion): string {
  return `${v.major}.${v.minor}`;
}
