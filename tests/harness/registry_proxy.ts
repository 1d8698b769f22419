/**
 * An instrumented HTTP proxy in front of a test registry: the operator talks to the proxy as its
 * OCI_REGISTRY, and the test reads what reached the registry — every request with its outcome,
 * and how many requests per repository were in flight at once. It can also hold each request for
 * a while (to widen overlap windows) and play an outage (every request answered 503).
 *
 * @module
 */

/** One proxied request. */
export interface ProxiedRequest {
  method: string;
  path: string;
  /** Repository named by the path (`/v2/<repo>/manifests/...`), "" for `/v2/`. */
  repo: string;
  /** Status sent back (503 while down). */
  status: number;
  /** Wall-clock time (ms) the request arrived, before any hold. */
  at: number;
}

/** A running proxy. */
export interface RegistryProxy {
  /** `127.0.0.1:<port>`, usable as the OCI_REGISTRY host. */
  readonly host: string;
  /** While true every request is answered 503 without reaching the registry. */
  down: boolean;
  /** Milliseconds each request is held before it is forwarded. */
  delayMs: number;
  /** Every request answered so far, in completion order. */
  readonly requests: ProxiedRequest[];
  /** Requests for repo currently in flight. */
  inFlight(repo: string): number;
  /** Highest number of simultaneous requests for repo seen so far. */
  maxInFlight(repo: string): number;
  /** Requests answered for repo (optionally only one method). */
  requestsFor(repo: string, method?: string): ProxiedRequest[];
  close(): Promise<void>;
}

/** The repository a distribution API path names. */
export function repositoryOf(path: string): string {
  const m = path.match(/^\/v2\/(.+?)\/(manifests|blobs|tags)\//);
  return m ? m[1] : "";
}

/** How the proxy behaves besides forwarding. */
export interface RegistryProxyOptions {
  /**
   * Accept a manifest DELETE by tag, as the OCI distribution spec allows a registry to and
   * distribution 3 does, where the registry behind (distribution 2.8) answers 400: the tag is
   * resolved (HEAD) and the manifest it names deleted by digest, which also removes any other
   * tag of that digest. The request is recorded once, with the status sent back. For a
   * client that deletes by tag (the Go original), whose wakes and migrations otherwise never
   * complete against distribution 2.8.
   */
  tagDeletes?: boolean;
}

/** Media types a tag may name, for resolving it. */
const MANIFEST_TYPES = [
  "application/vnd.oci.image.manifest.v1+json",
  "application/vnd.oci.image.index.v1+json",
  "application/vnd.docker.distribution.manifest.v2+json",
  "application/vnd.docker.distribution.manifest.list.v2+json",
].join(", ");

/** The repository and tag of a manifest DELETE by tag; undefined for any other request. */
export function tagDeleteOf(
  method: string,
  path: string,
): { repo: string; tag: string } | undefined {
  if (method !== "DELETE") return undefined;
  const m = path.match(/^\/v2\/(.+)\/manifests\/([^/]+)$/);
  // A digest is `<algorithm>:<hex>`; a tag can hold no colon.
  return m && !m[2].includes(":") ? { repo: m[1], tag: m[2] } : undefined;
}

/** Resolves the tag upstream and deletes its manifest by digest (RegistryProxyOptions.tagDeletes). */
async function deleteByTag(
  upstream: string,
  target: { repo: string; tag: string },
  headers: Headers,
): Promise<Response> {
  const head = await fetch(`${upstream}/v2/${target.repo}/manifests/${target.tag}`, {
    method: "HEAD",
    headers: { ...Object.fromEntries(headers), accept: MANIFEST_TYPES },
  });
  await head.body?.cancel();
  const digest = head.headers.get("docker-content-digest");
  if (head.status !== 200 || !digest) {
    const code = head.status === 404 ? "MANIFEST_UNKNOWN" : "UNKNOWN";
    return Response.json(
      { errors: [{ code, message: `resolving ${target.tag}: ${head.status}` }] },
      {
        status: head.status === 200 ? 502 : head.status,
      },
    );
  }
  const res = await fetch(`${upstream}/v2/${target.repo}/manifests/${digest}`, {
    method: "DELETE",
    headers,
  });
  return new Response(await res.arrayBuffer(), { status: res.status, headers: res.headers });
}

/** Starts a proxy forwarding to upstream (`http://127.0.0.1:<port>`) on a free loopback port. */
export function startRegistryProxy(
  upstream: string,
  opts: RegistryProxyOptions = {},
): RegistryProxy {
  const inFlight = new Map<string, number>();
  const peaks = new Map<string, number>();
  const requests: ProxiedRequest[] = [];
  const state = { down: false, delayMs: 0 };
  const server = Deno.serve({ hostname: "127.0.0.1", port: 0, onListen: () => {} }, async (req) => {
    const at = Date.now();
    const url = new URL(req.url);
    const repo = repositoryOf(url.pathname);
    const n = (inFlight.get(repo) ?? 0) + 1;
    inFlight.set(repo, n);
    peaks.set(repo, Math.max(n, peaks.get(repo) ?? 0));
    let status = 502;
    try {
      if (state.delayMs > 0) await new Promise((r) => setTimeout(r, state.delayMs));
      if (state.down) {
        status = 503;
        return new Response("registry down (test proxy)", { status });
      }
      const headers = new Headers(req.headers);
      headers.delete("host");
      const byTag = opts.tagDeletes ? tagDeleteOf(req.method, url.pathname) : undefined;
      if (byTag) {
        const res = await deleteByTag(upstream, byTag, headers);
        status = res.status;
        return res;
      }
      const res = await fetch(`${upstream}${url.pathname}${url.search}`, {
        method: req.method,
        headers,
        body: req.body,
        redirect: "manual",
      });
      status = res.status;
      const body = req.method === "HEAD" ? null : await res.arrayBuffer();
      return new Response(body, { status: res.status, headers: res.headers });
    } finally {
      inFlight.set(repo, (inFlight.get(repo) ?? 1) - 1);
      requests.push({ method: req.method, path: url.pathname, repo, status, at });
    }
  });
  const addr = server.addr as Deno.NetAddr;
  return {
    host: `127.0.0.1:${addr.port}`,
    get down() {
      return state.down;
    },
    set down(v: boolean) {
      state.down = v;
    },
    get delayMs() {
      return state.delayMs;
    },
    set delayMs(v: number) {
      state.delayMs = v;
    },
    requests,
    inFlight: (repo) => inFlight.get(repo) ?? 0,
    maxInFlight: (repo) => peaks.get(repo) ?? 0,
    requestsFor: (repo, method) =>
      requests.filter((r) => r.repo === repo && (method === undefined || r.method === method)),
    async close() {
      await server.shutdown();
    },
  };
}
