/**
 * Names in the registry: parsing OCI_REGISTRY (`host[:port][/path/prefix]`), building a VM's
 * repository and picking http or https for a host. Ports go-containerregistry's `name` package
 * rules so the same OCI_REGISTRY value means the same thing to this client as to the Go operator.
 */
import { isLoopbackHost } from "../kube/loopback.ts";

/** The registry Docker Hub names resolve to, as in go-containerregistry. */
export const DOCKER_HUB_REGISTRY = "index.docker.io";

const REPOSITORY_CHARS = /^[a-z0-9_./-]*$/;
const TAG_PATTERN = /^[A-Za-z0-9_.-]{1,128}$/;
const DIGEST_PATTERN = /^[a-z0-9]+(?:[.+_-][a-z0-9]+)*:[a-zA-Z0-9=_-]+$/;
const HOST_PATTERN =
  /^(?:[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?|\[[0-9A-Fa-f:.]+\])(?::\d{1,5})?$/;

/** OCI_REGISTRY split into the registry host and the repository prefix ("" when none). */
export interface RegistryBase {
  /** `host[:port]`, e.g. `asia-docker.pkg.dev` or `127.0.0.1:5000`. */
  registry: string;
  /** Path under the registry every VM repository sits in, e.g. `proj/repo`; may be empty. */
  prefix: string;
}

/**
 * Parses OCI_REGISTRY. Like go-containerregistry, the first path element is the registry only
 * when it contains "." or ":" or is "localhost"; otherwise the whole value is a Docker Hub path.
 * Throws a message naming the value on anything ambiguous (scheme, spaces, empty elements).
 */
export function parseRegistryBase(base: string): RegistryBase {
  const bad = (why: string) => new Error(`invalid OCI_REGISTRY ${JSON.stringify(base)}: ${why}`);
  if (base === "") throw bad("must not be empty");
  if (/\s/.test(base)) throw bad("must not contain whitespace");
  if (base.includes("://")) {
    throw bad("must be host[:port][/path] without a scheme (http/https is chosen per host)");
  }
  if (base.startsWith("/") || base.endsWith("/") || base.includes("//")) {
    throw bad("must not have empty path elements");
  }
  if (/[@?#]/.test(base)) throw bad("must not contain '@', '?' or '#'");
  const slash = base.indexOf("/");
  const first = slash < 0 ? base : base.slice(0, slash);
  let registry = "";
  let prefix = base;
  if (slash >= 0 && (first === "localhost" || /[.:]/.test(first))) {
    registry = first;
    prefix = base.slice(slash + 1);
  } else if (slash < 0 && (first === "localhost" || /[.:]/.test(first))) {
    // A bare host (no path) is a registry root, not a Docker Hub repository.
    registry = first;
    prefix = "";
  }
  if (registry === "") registry = DOCKER_HUB_REGISTRY;
  if (registry === "docker.io") registry = DOCKER_HUB_REGISTRY;
  if (!HOST_PATTERN.test(registry)) {
    throw bad(`registry host ${JSON.stringify(registry)} is invalid`);
  }
  const port = /:(\d+)$/.exec(registry.replace(/^\[[^\]]*\]/, ""));
  if (port && Number(port[1]) > 65535) throw bad(`port ${port[1]} is out of range`);
  if (!REPOSITORY_CHARS.test(prefix)) {
    throw bad("repository path may only contain lowercase letters, digits and _ - . /");
  }
  return { registry, prefix };
}

/**
 * The repository holding vmName's snapshots: `<prefix>/<vmName>`. Docker Hub paths without a
 * namespace get the implicit `library/`, as go-containerregistry does.
 */
export function repositoryFor(base: RegistryBase, vmName: string): string {
  const repo = base.prefix === "" ? vmName : `${base.prefix}/${vmName}`;
  if (vmName === "" || vmName.includes("/") || !REPOSITORY_CHARS.test(vmName)) {
    throw new Error(
      `invalid repository name ${JSON.stringify(vmName)}: lowercase letters, digits, _ - . only`,
    );
  }
  if (repo.length < 2 || repo.length > 255) {
    throw new Error(`repository ${JSON.stringify(repo)} must be 2 to 255 characters long`);
  }
  if (base.registry === DOCKER_HUB_REGISTRY && !repo.includes("/")) return `library/${repo}`;
  return repo;
}

/** Whether reference is a digest (`sha256:...`) rather than a tag: it holds a ':'. */
export function isDigest(reference: string): boolean {
  return reference.includes(":");
}

/** Whether s is a well-formed digest (`algorithm:encoded`), e.g. one a registry sent back. */
export function isValidDigest(s: string): boolean {
  return DIGEST_PATTERN.test(s);
}

/** Checks a tag or digest reference, throwing a message naming it when malformed. */
export function checkReference(repo: string, reference: string): void {
  if (isDigest(reference)) {
    if (!DIGEST_PATTERN.test(reference)) {
      throw new Error(`invalid digest ${JSON.stringify(reference)} for ${repo}`);
    }
  } else if (!TAG_PATTERN.test(reference)) {
    throw new Error(`invalid tag ${JSON.stringify(reference)} for ${repo}`);
  }
}

/** `repo:tag` or `repo@digest`, the form used in messages. */
export function formatRef(repo: string, reference: string): string {
  return isDigest(reference) ? `${repo}@${reference}` : `${repo}:${reference}`;
}

const RFC1918 = [[10, 8], [172 << 8 | 16, 12], [192 << 8 | 168, 16]] as const;

/**
 * Whether plain http may be tried for registry: go-containerregistry's name.Registry.Scheme()
 * says "http" for `localhost:<port>`, `*.localhost[:port]`, `127.0.0.1[:port]`, `::1` /
 * `[::1][:port]` and RFC 1918 IPv4 addresses (10/8, 172.16/12, 192.168/16). Note the quirks it
 * keeps: bare `localhost` (no port) and other 127.x addresses are https-only. Kept as the Go
 * rule for reference; the client decides with plainHttpPolicy, which needs private ranges to be
 * allowed by name.
 */
export function allowsPlainHttp(registry: string): boolean {
  if (isRfc1918(registry.split(":")[0])) return true;
  if (registry.startsWith("localhost:")) return true;
  if (/^.*\.localhost(?::\d{1,5})?$/.test(registry)) return true;
  if (/^127\.0\.0\.1(?::\d{1,5})?$/.test(registry)) return true;
  return /^(?:::1|\[::1\](?::\d{1,5})?)$/.test(registry);
}

function isRfc1918(host: string): boolean {
  const m = /^(\d{1,3})\.(\d{1,3})\.(\d{1,3})\.(\d{1,3})$/.exec(host);
  if (!m) return false;
  const octets = m.slice(1).map(Number);
  if (octets.some((o) => o > 255)) return false;
  const ip = ((octets[0] << 24) | (octets[1] << 16) | (octets[2] << 8) | octets[3]) >>> 0;
  return RFC1918.some(([net, bits]) => {
    const netIp = (bits === 8 ? net << 24 : net << 16) >>> 0;
    const mask = (0xffffffff << (32 - bits)) >>> 0;
    return ((ip & mask) >>> 0) === netIp;
  });
}

/**
 * How a registry host may be spoken to without TLS, replacing allowsPlainHttp's implicit
 * private-range rule (which made any 10.x or 192.168.x registry race plain http against https
 * and send credentials over whichever answered first):
 * - "only": the host (or host:port) was allowed by name (--allow-plain-http): plain http, no https
 *   attempt and so no race;
 * - "fallback": a loopback host not named: https first, plain http once https failed or is slow
 *   (go-containerregistry's race), harmless since nothing leaves the machine;
 * - "never": https only.
 * Credentials go over plain http only to loopback either way (snapshot/session.ts).
 */
export function plainHttpPolicy(
  registry: string,
  allowed: readonly string[],
): "only" | "fallback" | "never" {
  const lower = registry.toLowerCase();
  const host = lower.replace(/:\d{1,5}$/, "");
  if (allowed.some((a) => a.toLowerCase() === lower || a.toLowerCase() === host)) return "only";
  return isLoopbackHost(host) ? "fallback" : "never";
}
