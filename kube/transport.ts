import { KubeConfig } from "@kubernetes/client-node";
import { realClock, sleep } from "./clock.ts";
import { restClientRequests } from "./metrics.ts";

/** A signal that never aborts, for waits nobody can cancel. */
const neverAborted = new AbortController().signal;

/** Connection facts for one API server, independent of how they were found. */
export interface RestConfig {
  /** https://host:port (no trailing slash). */
  server: string;
  /** PEM CA bundle to trust in addition to the system roots. */
  caPem?: string;
  /** PEM client certificate and key (mutual TLS). */
  certPem?: string;
  /** PEM private key of certPem. */
  keyPem?: string;
  /**
   * Returns the Authorization header value, or undefined. Called before requests so rotating
   * tokens (projected service-account tokens, exec plugins) are picked up.
   */
  authorization?: () => Promise<string | undefined>;
  /**
   * Client-side rate limit. Absent or ≤ 0 means none: controller-runtime's GetConfig sets QPS -1
   * and leaves fairness to the API server's Priority and Fairness.
   */
  qps?: number;
  /** Bucket size of the client-side rate limit (default 30 when qps is set). */
  burst?: number;
  /** Timeout for non-watch requests. */
  timeoutMs?: number;
  /** User-Agent header of every request. */
  userAgent?: string;
}

/** How often a kubeconfig-derived Authorization header is recomputed. */
const authRefreshMs = 60_000;

/**
 * Loads connection facts the way controller-runtime's GetConfig does: $KUBECONFIG, then
 * ~/.kube/config, then the in-cluster service account. client-node parses the kubeconfig
 * (contexts, exec plugins, token files); requests go through Deno's fetch.
 */
export async function loadRestConfig(kubeconfigPath?: string): Promise<RestConfig> {
  const kc = new KubeConfig();
  if (kubeconfigPath) kc.loadFromFile(kubeconfigPath);
  else kc.loadFromDefault();
  const cluster = kc.getCurrentCluster();
  if (!cluster) {
    throw new Error("no Kubernetes cluster configured (KUBECONFIG, ~/.kube/config or in-cluster)");
  }
  const tls: { ca?: unknown; cert?: unknown; key?: unknown; headers?: Record<string, unknown> } =
    {};
  await kc.applyToHTTPSOptions(tls);
  let cached: { at: number; value?: string } | undefined;
  const authorization = async (): Promise<string | undefined> => {
    const now = Date.now();
    if (cached && now - cached.at < authRefreshMs) return cached.value;
    const opts: { headers?: Record<string, unknown> } = {};
    await kc.applyToHTTPSOptions(opts);
    const value = opts.headers?.Authorization ?? opts.headers?.authorization;
    cached = { at: now, value: typeof value === "string" ? value : undefined };
    return cached.value;
  };
  return {
    server: cluster.server.replace(/\/+$/, ""),
    caPem: pemOf(tls.ca),
    certPem: pemOf(tls.cert),
    keyPem: pemOf(tls.key),
    authorization,
  };
}

function pemOf(v: unknown): string | undefined {
  if (v === undefined || v === null) return undefined;
  if (typeof v === "string") return v;
  if (v instanceof Uint8Array) return new TextDecoder().decode(v);
  return undefined;
}

/** A simple token bucket: take() waits until a token is free. */
class TokenBucket {
  #tokens: number;
  #last = performance.now();
  constructor(readonly qps: number, readonly burst: number) {
    this.#tokens = burst;
  }

  async take(signal?: AbortSignal): Promise<void> {
    while (true) {
      const now = performance.now();
      this.#tokens = Math.min(this.burst, this.#tokens + ((now - this.#last) / 1000) * this.qps);
      this.#last = now;
      if (this.#tokens >= 1) {
        this.#tokens -= 1;
        return;
      }
      const waitMs = ((1 - this.#tokens) / this.qps) * 1000;
      await sleep(realClock, waitMs, signal ?? neverAborted);
      signal?.throwIfAborted();
    }
  }
}

/** One HTTP request to the API server, as the API client builds it. */
export interface RequestSpec {
  /** HTTP method. */
  method: "GET" | "POST" | "PUT" | "PATCH" | "DELETE";
  /** Path below the server URL ("/api/v1/namespaces/ns/pods"). */
  path: string;
  /** Query parameters; undefined and "" values are left out. */
  query?: Record<string, string | undefined>;
  /** JSON body. */
  body?: unknown;
  /** Content-Type of the body (default application/json). */
  contentType?: string;
  /** Aborts the request. */
  signal?: AbortSignal;
  /** Watches stream for a long time and are exempt from the request timeout. */
  stream?: boolean;
}

/**
 * HTTP to one API server: TLS from the RestConfig, Authorization header, client-side rate
 * limiting, timeouts, and rest_client_requests_total accounting. It knows nothing about
 * resources; the API client builds paths.
 */
export class Transport {
  readonly #cfg: RestConfig;
  readonly #http: Deno.HttpClient;
  readonly #limiter?: TokenBucket;
  readonly #host: string;

  /** Opens an HTTP client with cfg's TLS settings; close() releases it. */
  constructor(cfg: RestConfig) {
    this.#cfg = cfg;
    this.#host = new URL(cfg.server).host;
    const tls = cfg.certPem && cfg.keyPem ? { cert: cfg.certPem, key: cfg.keyPem } : {};
    this.#http = Deno.createHttpClient({ caCerts: cfg.caPem ? [cfg.caPem] : [], ...tls });
    const qps = cfg.qps ?? -1;
    if (qps > 0) this.#limiter = new TokenBucket(qps, cfg.burst ?? 30);
  }

  /** The API server URL. */
  get server(): string {
    return this.#cfg.server;
  }

  /** Sends a request; the response body is left for the caller to read. */
  async fetch(spec: RequestSpec): Promise<Response> {
    await this.#limiter?.take(spec.signal);
    const url = new URL(this.#cfg.server + spec.path);
    for (const [k, v] of Object.entries(spec.query ?? {})) {
      if (v !== undefined && v !== "") url.searchParams.set(k, v);
    }
    const headers = new Headers({ Accept: "application/json" });
    if (this.#cfg.userAgent) headers.set("User-Agent", this.#cfg.userAgent);
    const auth = await this.#cfg.authorization?.();
    if (auth) headers.set("Authorization", auth);
    let body: string | undefined;
    if (spec.body !== undefined) {
      body = JSON.stringify(spec.body);
      headers.set("Content-Type", spec.contentType ?? "application/json");
    }
    const timeout = spec.stream ? undefined : AbortSignal.timeout(this.#cfg.timeoutMs ?? 30_000);
    const signal = timeout && spec.signal
      ? AbortSignal.any([timeout, spec.signal])
      : timeout ?? spec.signal;
    let res: Response;
    try {
      res = await fetch(url, { method: spec.method, headers, body, signal, client: this.#http });
    } catch (err) {
      restClientRequests.inc({ code: "<error>", method: spec.method, host: this.#host });
      throw err;
    }
    restClientRequests.inc({ code: String(res.status), method: spec.method, host: this.#host });
    return res;
  }

  /** Releases pooled connections. */
  close(): void {
    this.#http.close();
  }
}
