import { getLogger } from "@logtape/logtape";
import {
  type ClusterAccess,
  clusterAccess,
  type ClusterSource,
  type EnvLookup,
  locateCluster,
  readMaterial,
} from "./kubeconfig.ts";
import { type Clock, realClock, sleep } from "./clock.ts";
import { permittedEnv } from "./env.ts";
import { errorMessage } from "./errors.ts";
import { type ExecCredential, ExecCredentialSource } from "./exec_credential.ts";
import { countRequest } from "./request_counts.ts";

const log = getLogger(["cocoon-operator", "transport"]);

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
   * Credentials that change while the operator runs (an exec plugin): a token for the
   * Authorization header and/or a client certificate pair, asked for before every request and
   * told about a 401. Takes the place of `authorization`, certPem and keyPem.
   */
  credentials?: CredentialSource;
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

/** Credentials asked for per request (kube/exec_credential.ts ExecCredentialSource). */
export interface CredentialSource {
  /** The current credential (cached by the source; may run a plugin). */
  get(): Promise<ExecCredential>;
  /** The API server answered 401 to a request sent with `used`. */
  unauthorized(used: ExecCredential): void;
}

/** How often a file-backed bearer token is re-read. */
const TOKEN_REFRESH_MS = 60_000;

/**
 * Loads connection facts the way controller-runtime's GetConfig finds them: $KUBECONFIG, then the
 * in-cluster service account (addressed as kubernetes.default.svc), then ~/.kube/config (see
 * kube/kubeconfig.ts). With a path, that kubeconfig file is used. Throws NoClusterError or
 * KubeconfigError with a one-line message when nothing usable is found.
 */
export async function loadRestConfig(
  kubeconfigPath?: string,
  env: EnvLookup = permittedEnv,
): Promise<RestConfig> {
  const source: ClusterSource = kubeconfigPath
    ? { kind: "kubeconfig", origin: "KUBECONFIG", paths: [kubeconfigPath] }
    : locateCluster(env);
  return await restConfigFor(source);
}

/** Connection facts for a located source; reads its CA, certificates and tokens. */
export async function restConfigFor(source: ClusterSource | ClusterAccess): Promise<RestConfig> {
  const access = "files" in source ? source : clusterAccess(source);
  const caPem = await readMaterial(access.ca);
  if (access.exec) {
    const credentials = new ExecCredentialSource(access.exec, { server: access.server, caPem }, {
      env: permittedEnv,
    });
    // The first run happens now, so a broken plugin is a start-up error, not a failing request.
    await credentials.get();
    return { server: access.server, caPem, credentials };
  }
  let authorization: (() => Promise<string | undefined>) | undefined;
  if (access.token) {
    const header = `Bearer ${access.token}`;
    authorization = () => Promise.resolve(header);
  } else if (access.tokenFile) {
    authorization = fileTokenSource(access.tokenFile);
  } else if (access.basic) {
    const header = `Basic ${btoa(`${access.basic.username}:${access.basic.password}`)}`;
    authorization = () => Promise.resolve(header);
  }
  return {
    server: access.server,
    caPem,
    certPem: await readMaterial(access.cert),
    keyPem: await readMaterial(access.key),
    authorization,
  };
}

/**
 * A bearer token re-read from a file at most once a minute, so rotated tokens (projected
 * service-account tokens, a kubeconfig's tokenFile) are picked up. As client-go's caching token
 * source, a failed re-read keeps serving the last token and tries again on the next call; only
 * the first read's failure is an error.
 */
export function fileTokenSource(
  path: string,
  now: () => number = Date.now,
): () => Promise<string | undefined> {
  let cached: { at: number; value: string } | undefined;
  return async () => {
    const at = now();
    if (cached && at - cached.at < TOKEN_REFRESH_MS) return cached.value;
    let token: string;
    try {
      token = (await Deno.readTextFile(path)).trim();
      if (token === "") throw new Error(`token file ${path} is empty`);
    } catch (err) {
      if (!cached) throw err;
      log.warn("cannot re-read the API token from {path}, using the last one: {error}", {
        path,
        error: errorMessage(err),
      });
      return cached.value;
    }
    cached = { at, value: `Bearer ${token}` };
    return cached.value;
  };
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
  /** The client for the exec plugin's current certificate pair (one client per pair). */
  #rotated?: { certPem: string; keyPem: string; http: Deno.HttpClient };
  readonly #limiter?: TokenBucket;
  readonly #host: string;

  /** Times the request timeout (tests drive it). */
  readonly #clock: Clock;

  /** Opens an HTTP client with cfg's TLS settings; close() releases it. */
  constructor(cfg: RestConfig, clock: Clock = realClock) {
    this.#cfg = cfg;
    this.#clock = clock;
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

  /**
   * Sends a request. A watch's body is left for the caller to stream; any other response
   * comes back with its body already read (within the request timeout).
   */
  async fetch(spec: RequestSpec): Promise<Response> {
    await this.#limiter?.take(spec.signal);
    const url = new URL(this.#cfg.server + spec.path);
    for (const [k, v] of Object.entries(spec.query ?? {})) {
      if (v !== undefined && v !== "") url.searchParams.set(k, v);
    }
    let body: string | undefined;
    if (spec.body !== undefined) body = JSON.stringify(spec.body);
    const source = this.#cfg.credentials;
    if (!source) {
      return await this.#send(spec, url, body, await this.#cfg.authorization?.(), this.#http);
    }
    const used = await source.get();
    const res = await this.#send(spec, url, body, bearer(used), this.#clientFor(used));
    if (res.status !== 401) return res;
    // client-go reruns the plugin once per 401 to the current credential; a request refused
    // with the old one was not executed, so it is sent once more with the new one.
    source.unauthorized(used);
    const next = await source.get();
    if (next === used) return res;
    await res.body?.cancel();
    return await this.#send(spec, url, body, bearer(next), this.#clientFor(next));
  }

  async #send(
    spec: RequestSpec,
    url: URL,
    body: string | undefined,
    auth: string | undefined,
    client: Deno.HttpClient,
  ): Promise<Response> {
    const headers = new Headers({ Accept: "application/json" });
    if (this.#cfg.userAgent) headers.set("User-Agent", this.#cfg.userAgent);
    if (auth) headers.set("Authorization", auth);
    if (body !== undefined) headers.set("Content-Type", spec.contentType ?? "application/json");
    const timeout = spec.stream ? undefined : requestTimeout(
      this.#clock,
      this.#cfg.timeoutMs ?? 30_000,
    );
    const signal = timeout && spec.signal
      ? AbortSignal.any([timeout.signal, spec.signal])
      : timeout?.signal ?? spec.signal;
    try {
      let res: Response;
      try {
        res = await fetch(url, { method: spec.method, headers, body, signal, client });
      } catch (err) {
        countRequest("<error>", spec.method, this.#host);
        throw err;
      }
      countRequest(String(res.status), spec.method, this.#host);
      // The timeout covers reading the body too: read it here, then the timer can go.
      return timeout ? await buffered(res) : res;
    } finally {
      timeout?.clear();
    }
  }

  /**
   * The HTTP client for a credential: the base one without a certificate, else one per
   * certificate pair. Deno fixes a client's certificate when it is created, so a rotated pair
   * gets a new client (new connections present the new pair) and the old one is closed, as
   * client-go closes every connection when a plugin's certificate changes.
   */
  #clientFor(credential: ExecCredential): Deno.HttpClient {
    const { certPem, keyPem } = credential;
    if (!certPem || !keyPem) return this.#http;
    const current = this.#rotated;
    if (current && current.certPem === certPem && current.keyPem === keyPem) return current.http;
    const http = Deno.createHttpClient({
      caCerts: this.#cfg.caPem ? [this.#cfg.caPem] : [],
      cert: certPem,
      key: keyPem,
    });
    this.#rotated = { certPem, keyPem, http };
    if (current) {
      log.info("the exec plugin returned a new client certificate; new connections use it");
      current.http.close();
    }
    return http;
  }

  /** Releases pooled connections. */
  close(): void {
    this.#http.close();
    this.#rotated?.http.close();
    this.#rotated = undefined;
  }
}

/**
 * AbortSignal.timeout's signal, with a timer that is cleared once the request is done.
 * AbortSignal.timeout's own timer cannot be cleared: every request of a burst left one that
 * fired 30 s later (an abort with a fresh DOMException each, nobody listening), which showed
 * as the CPU of an idle operator half a minute after the burst and kept each request's
 * signal alive until then.
 */
function requestTimeout(clock: Clock, ms: number): { signal: AbortSignal; clear(): void } {
  const ac = new AbortController();
  const timer = clock.setTimeout(
    () => ac.abort(new DOMException("Signal timed out.", "TimeoutError")),
    ms,
  );
  return { signal: ac.signal, clear: () => clock.clearTimeout(timer) };
}

/** The response with its body read into memory (an empty body stays null). */
async function buffered(res: Response): Promise<Response> {
  const bytes = await res.arrayBuffer();
  return new Response(bytes.byteLength > 0 ? bytes : null, {
    status: res.status,
    statusText: res.statusText,
    headers: res.headers,
  });
}

function bearer(credential: ExecCredential): string | undefined {
  return credential.token ? `Bearer ${credential.token}` : undefined;
}
