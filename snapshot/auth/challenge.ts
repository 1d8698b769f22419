/**
 * WWW-Authenticate handling: parse challenges, pick the one we can answer, and vet a Bearer
 * realm before any credential is sent to it (go-containerregistry's SSRF guard).
 */

/** One auth challenge: lower-cased scheme and lower-cased parameter names. */
export interface Challenge {
  scheme: string;
  params: Record<string, string>;
}

const TOKEN_CHAR = /[!#$%&'*+\-.^_`|~0-9A-Za-z]/;

/**
 * Parses a WWW-Authenticate value into challenges. Fetch joins repeated headers with ", ", so
 * this reads several challenges from one string: a token not followed by "=" starts the next one.
 */
export function parseChallenges(header: string | null): Challenge[] {
  if (!header) return [];
  const out: Challenge[] = [];
  let i = 0;
  const n = header.length;
  const skip = (chars: string) => {
    while (i < n && chars.includes(header[i])) i++;
  };
  const token = (): string => {
    const start = i;
    while (i < n && TOKEN_CHAR.test(header[i])) i++;
    return header.slice(start, i);
  };
  const quoted = (): string | undefined => {
    // header[i] is the opening quote
    i++;
    let v = "";
    while (i < n) {
      const c = header[i++];
      if (c === '"') return v;
      if (c === "\\" && i < n) v += header[i++];
      else v += c;
    }
    return undefined; // unterminated
  };
  while (i < n) {
    skip(" \t,");
    const scheme = token();
    if (scheme === "") break;
    const params: Record<string, string> = {};
    for (;;) {
      skip(" \t");
      const mark = i;
      const key = token();
      skip(" \t");
      if (key === "" || header[i] !== "=") {
        i = mark;
        break;
      }
      i++;
      skip(" \t");
      const value = header[i] === '"' ? quoted() : token();
      if (value === undefined) return [...out, { scheme: scheme.toLowerCase(), params }];
      params[key.toLowerCase()] = value;
      skip(" \t");
      if (header[i] !== ",") break;
      i++;
    }
    out.push({ scheme: scheme.toLowerCase(), params });
  }
  return out;
}

/** Prefers a Basic or Bearer challenge (the ones we can answer), else the first. */
export function pickChallenge(challenges: Challenge[]): Challenge | undefined {
  return challenges.find((c) => c.scheme === "basic" || c.scheme === "bearer") ?? challenges[0];
}

/**
 * Rejects a Bearer realm we must not send credentials to: schemes other than https (http only
 * when the registry itself is spoken to over http), and IP literals in loopback, link-local,
 * private or unspecified ranges unless the realm is the registry's own host:port. Host names are
 * not resolved (as in go-containerregistry, DNS-based redirection is out of scope).
 */
export function validateRealm(realm: string, registry: string, insecure: boolean): URL {
  let u: URL;
  try {
    u = new URL(realm);
  } catch {
    throw new Error(`invalid realm in www-authenticate: cannot parse ${JSON.stringify(realm)}`);
  }
  if (u.protocol === "http:") {
    if (!insecure) {
      throw new Error(
        `invalid realm in www-authenticate: realm scheme "http" not allowed for a secure registry`,
      );
    }
  } else if (u.protocol !== "https:") {
    throw new Error(
      `invalid realm in www-authenticate: realm scheme ${
        JSON.stringify(u.protocol.replace(/:$/, ""))
      } not allowed`,
    );
  }
  if (u.host === canonicalHost(u.protocol, registry)) return u;
  if (isRestrictedIp(u.hostname)) {
    throw new Error(
      `invalid realm in www-authenticate: realm host ${
        JSON.stringify(u.hostname)
      } is a private or link-local address`,
    );
  }
  return u;
}

/** registry (`host[:port]`) as URL.host spells it under protocol: lower case, no default port. */
function canonicalHost(protocol: string, registry: string): string {
  try {
    return new URL(`${protocol}//${registry}`).host;
  } catch {
    return registry.toLowerCase();
  }
}

/** Loopback, link-local (unicast/multicast), private or unspecified IP literal. */
export function isRestrictedIp(hostname: string): boolean {
  const host = hostname.replace(/^\[|\]$/g, "");
  const v4 = parseIpv4(host);
  if (v4) return restrictedV4(v4);
  const v6 = parseIpv6(host);
  if (!v6) return false;
  // IPv4-mapped (::ffff:a.b.c.d) is judged as IPv4, as Go's net.IP does.
  if (v6.slice(0, 5).every((w) => w === 0) && v6[5] === 0xffff) {
    return restrictedV4([v6[6] >> 8, v6[6] & 0xff, v6[7] >> 8, v6[7] & 0xff]);
  }
  if (v6.every((w) => w === 0)) return true; // ::
  if (v6.slice(0, 7).every((w) => w === 0) && v6[7] === 1) return true; // ::1
  if ((v6[0] & 0xffc0) === 0xfe80) return true; // fe80::/10
  if ((v6[0] & 0xff0f) === 0xff02) return true; // link-local multicast ff02::/16 (any flags)
  return (v6[0] & 0xfe00) === 0xfc00; // fc00::/7
}

function restrictedV4([a, b, c]: number[]): boolean {
  return a === 127 || a === 10 || (a === 172 && b >= 16 && b <= 31) || (a === 192 && b === 168) ||
    (a === 169 && b === 254) || (a === 224 && b === 0 && c === 0) ||
    (a === 0 && b === 0 && c === 0);
}

function parseIpv4(s: string): number[] | undefined {
  const m = /^(\d{1,3})\.(\d{1,3})\.(\d{1,3})\.(\d{1,3})$/.exec(s);
  if (!m) return undefined;
  const o = m.slice(1).map(Number);
  return o.every((x) => x <= 255) ? o : undefined;
}

function parseIpv6(s: string): number[] | undefined {
  if (!s.includes(":")) return undefined;
  // Rewrite an embedded dotted quad (::ffff:1.2.3.4) as two hex words first.
  const dotted = /(\d+\.\d+\.\d+\.\d+)$/.exec(s);
  if (dotted) {
    const o = parseIpv4(dotted[1]);
    if (!o) return undefined;
    const hex = `${((o[0] << 8) | o[1]).toString(16)}:${((o[2] << 8) | o[3]).toString(16)}`;
    s = s.slice(0, -dotted[1].length) + hex;
  }
  const halves = s.split("::");
  if (halves.length > 2) return undefined;
  const words = (p: string) =>
    p === "" ? [] : p.split(":").map((w) => (/^[0-9a-fA-F]{1,4}$/.test(w) ? parseInt(w, 16) : NaN));
  const head = words(halves[0]);
  if (halves.length === 1) {
    return head.length === 8 && head.every(Number.isInteger) ? head : undefined;
  }
  const tail = words(halves[1]);
  const fill = 8 - head.length - tail.length;
  if (fill < 1) return undefined;
  const all = [...head, ...new Array<number>(fill).fill(0), ...tail];
  return all.every(Number.isInteger) ? all : undefined;
}
