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
  /**
   * Accept a manifest DELETE by tag, as registries such as Artifact Registry or Docker Hub do
   * (the distribution spec leaves it optional; docker-registry 2.8 answers 400 DIGEST_INVALID):
   * the proxy resolves the tag and deletes its digest, and refuses with 400 when another tag of
   * the repository names the same digest (deleting the digest would take that tag too). A
   * client that deletes by tag only, as the Go original's go-containerregistry does, needs it.
   */
  tagDeletes: boolean;
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

/** Starts a proxy forwarding to upstream (`http://127.0.0.1:<port>`) on a free loopback port. */
export function startRegistryProxy(upstream: string): RegistryProxy {
  const inFlight = new Map<string, number>();
  const peaks = new Map<string, number>();
  const requests: ProxiedRequest[] = [];
  const state = { down: false, delayMs: 0, tagDeletes: false };
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
      const tag = url.pathname.match(/^\/v2\/(.+)\/manifests\/([^/:]+)$/);
      if (state.tagDeletes && req.method === "DELETE" && tag) {
        const res = await deleteTag(upstream, tag[1], tag[2], headers);
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
    get tagDeletes() {
      return state.tagDeletes;
    },
    set tagDeletes(v: boolean) {
      state.tagDeletes = v;
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

/** What a manifest HEAD accepts, so the registry answers with the stored manifest's digest. */
const MANIFEST_TYPES = [
  "application/vnd.oci.image.manifest.v1+json",
  "application/vnd.oci.image.index.v1+json",
  "application/vnd.docker.distribution.manifest.v2+json",
  "application/vnd.docker.distribution.manifest.list.v2+json",
].join(", ");

/** A distribution error answer. */
function registryError(status: number, code: string, message: string): Response {
  return Response.json({ errors: [{ code, message }] }, { status });
}

/** DELETE repo:tag on a registry that deletes only by digest (see RegistryProxy.tagDeletes). */
async function deleteTag(
  upstream: string,
  repo: string,
  tag: string,
  headers: Headers,
): Promise<Response> {
  const digestOf = async (t: string) => {
    const res = await fetch(`${upstream}/v2/${repo}/manifests/${t}`, {
      method: "HEAD",
      headers: { ...Object.fromEntries(headers), accept: MANIFEST_TYPES },
    });
    await res.body?.cancel();
    return res.ok ? res.headers.get("docker-content-digest") ?? undefined : undefined;
  };
  const digest = await digestOf(tag);
  if (!digest) return registryError(404, "MANIFEST_UNKNOWN", `manifest unknown: ${repo}:${tag}`);
  const list = await fetch(`${upstream}/v2/${repo}/tags/list`, { headers });
  const others = list.ok ? ((await list.json()) as { tags?: string[] | null }).tags ?? [] : [];
  if (!list.ok) await list.body?.cancel();
  for (const other of others.filter((t) => t !== tag)) {
    if (await digestOf(other) === digest) {
      return registryError(
        400,
        "UNSUPPORTED",
        `${repo}:${tag} shares ${digest} with :${other}; the test registry cannot delete one alone`,
      );
    }
  }
  const res = await fetch(`${upstream}/v2/${repo}/manifests/${digest}`, {
    method: "DELETE",
    headers,
  });
  return new Response(await res.arrayBuffer(), { status: res.status, headers: res.headers });
}
