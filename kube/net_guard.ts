/**
 * The operator's own check of every outgoing connection. Deno's `--allow-net` grants
 * `*.pkg.dev:443` to the bare domain and to subdomains at any depth, and a registry's Bearer realm
 * or a redirect may name any host it grants. The operator therefore checks each request's target
 * against its own allow-list (the exact `host:port` entries it computed for --allow-net, see
 * permissions.ts operatorNeeds) before anything is sent: `host:port` matches exactly, and
 * `*.domain:port` matches a host with exactly one more label than `domain` (not the domain itself,
 * not `a.b.domain`).
 *
 * installNetGuard puts the check in front of the global `fetch`, the one function every request
 * of the operator goes through (kube/transport.ts, snapshot/session.ts, snapshot/auth/*), so no
 * client can bypass it. Redirects a caller lets fetch follow are followed here, hop by hop, each
 * hop checked; callers that follow by hand (`redirect: "manual"`) call fetch again per hop.
 */

/** One allow-list entry. */
interface NetRule {
  /** The entry as written, for messages. */
  text: string;
  /** Lower-case host (IPv6 in brackets), or the domain after `*.`. */
  host: string;
  wildcard: boolean;
  /** Undefined: every port (only listener entries with port 0 are written so). */
  port?: string;
}

/** A request refused by the allow-list; nothing was sent. */
export class NetRefusedError extends Error {
  constructor(readonly target: string, message: string) {
    super(message);
    this.name = "NetRefusedError";
  }
}

function parseRule(entry: string): NetRule {
  const text = entry.trim();
  const m = /^(\*\.)?(\[[0-9a-fA-F:.]+\]|[A-Za-z0-9.-]+)(?::(\d{1,5}))?$/.exec(text);
  if (!m || m[2].startsWith(".") || m[2].endsWith(".")) {
    throw new Error(
      `invalid allow-list entry ${JSON.stringify(entry)}: want host:port or *.domain:port`,
    );
  }
  return { text, host: m[2].toLowerCase(), wildcard: m[1] !== undefined, port: m[3] };
}

/** `host:port` of a URL as Deno checks it: IPv6 in brackets, the scheme's port when none. */
export function targetOf(url: URL): { host: string; port: string } {
  const port = url.port ||
    (url.protocol === "http:" ? "80" : url.protocol === "https:" ? "443" : "");
  return { host: url.hostname.toLowerCase(), port };
}

/** The hosts and ports the operator may connect to. */
export class NetAllowList {
  readonly #rules: NetRule[];

  constructor(entries: readonly string[]) {
    this.#rules = entries.map(parseRule);
  }

  /** The entries, as written. */
  get entries(): string[] {
    return this.#rules.map((r) => r.text);
  }

  /** Whether a rule admits host:port. */
  allows(host: string, port: string): boolean {
    return this.#rules.some((r) => matches(r, host.toLowerCase(), port));
  }

  /** Throws NetRefusedError naming the target and the rules when url is not allowed. */
  check(url: URL): void {
    const { host, port } = targetOf(url);
    if (this.allows(host, port)) return;
    const target = `${host}:${port}`;
    // Name the wildcard that would admit it under Deno's any-depth reading, so the reason is clear.
    const near = this.#rules.find((r) =>
      r.wildcard && (host === r.host || host.endsWith(`.${r.host}`)) &&
      (r.port === undefined || r.port === port)
    );
    const why = near
      ? `rule ${near.text} matches exactly one label below ${near.host}`
      : `no rule names it (allowed: ${this.entries.join(", ") || "nothing"})`;
    throw new NetRefusedError(
      target,
      `refusing to connect to ${target} (${url.origin}): ${why}; nothing was sent`,
    );
  }
}

function matches(rule: NetRule, host: string, port: string): boolean {
  if (rule.port !== undefined && rule.port !== port) return false;
  if (!rule.wildcard) return rule.host === host;
  if (!host.endsWith(`.${rule.host}`)) return false;
  const label = host.slice(0, -rule.host.length - 1);
  return label !== "" && !label.includes(".");
}

type Fetch = typeof globalThis.fetch;
/** Deno's fetch init, which may name an HTTP client. */
type Init = RequestInit & { client?: Deno.HttpClient };

const MAX_REDIRECTS = 20;

/** fetch with every target (and every redirect hop) checked against allow first. */
export function guardFetch(allow: NetAllowList, inner: Fetch): Fetch {
  const guarded = async (input: string | URL | Request, init?: Init): Promise<Response> => {
    const isRequest = input instanceof Request;
    const first = new URL(isRequest ? input.url : String(input));
    allow.check(first);
    const mode = init?.redirect ?? (isRequest ? input.redirect : "follow");
    if (mode !== "follow") return await inner(input, init);
    // Follow by hand so each hop is checked before it is sent.
    let res = await inner(input, { ...init, redirect: "manual" });
    let current = first;
    let method = (init?.method ?? (isRequest ? input.method : "GET")).toUpperCase();
    let body = init?.body ?? undefined;
    let headers = new Headers(init?.headers ?? (isRequest ? input.headers : undefined));
    for (let hop = 0; isRedirect(res.status); hop++) {
      const location = res.headers.get("location");
      if (!location) return res;
      if (hop >= MAX_REDIRECTS) throw new TypeError(`too many redirects from ${first.origin}`);
      const next = new URL(location, current);
      allow.check(next);
      await res.body?.cancel();
      if (res.status === 303 || ((res.status === 301 || res.status === 302) && method === "POST")) {
        if (method !== "HEAD") method = "GET";
        body = undefined;
        headers.delete("content-type");
      } else if (body !== undefined && body !== null && typeof body !== "string") {
        throw new TypeError(
          `cannot follow the redirect to ${next.origin}: the body cannot be resent`,
        );
      }
      if (next.origin !== current.origin) {
        // As the Fetch standard: credentials stay with the origin they were meant for.
        headers = new Headers(headers);
        headers.delete("authorization");
      }
      current = next;
      res = await inner(next, {
        method,
        headers,
        body,
        signal: init?.signal ?? (isRequest ? input.signal : undefined),
        redirect: "manual",
        ...(init?.client ? { client: init.client } : {}),
      } as Init);
    }
    return res;
  };
  return guarded as Fetch;
}

function isRedirect(status: number): boolean {
  return status === 301 || status === 302 || status === 303 || status === 307 || status === 308;
}

let original: Fetch | undefined;

/**
 * Replaces the global fetch with one checked against allow. Installing again replaces the
 * previous list (the guard never stacks); removeNetGuard restores the original.
 */
export function installNetGuard(allow: NetAllowList): void {
  original ??= globalThis.fetch;
  globalThis.fetch = guardFetch(allow, original);
}

/** Restores the fetch installNetGuard replaced (a no-op when none is installed). */
export function removeNetGuard(): void {
  if (original) globalThis.fetch = original;
  original = undefined;
}
