/**
 * The manager's two side listeners, as controller-runtime runs them: a health-probe server with
 * /healthz and /readyz (pkg/healthz response format, sub-paths per check) and a metrics server
 * with /metrics from the shared registry (kube/metrics.ts). Either is disabled by the address "0".
 *
 * The metrics listener speaks HTTP/1.1 only unless `metricsHttp2` is set, as controller-runtime's
 * with kubebuilder's `--enable-http2=false` default (CVE-2023-44487, HTTP/2 rapid reset): then it
 * runs on kube/http1_server.ts instead of `Deno.serve`, which always offers HTTP/2.
 */
import type { Registry } from "./prom_client.ts";
import { registry as defaultRegistry } from "./metrics.ts";
import { type BindAddress, parseBindAddress } from "./bind_address.ts";
import { errorMessage } from "./errors.ts";
import { getLogger } from "@logtape/logtape";

const log = getLogger(["cocoon-operator", "metrics"]);

/** A health check: returning means healthy, throwing (or rejecting) means unhealthy. */
export type Checker = (req: Request) => void | Promise<void>;

/** A check that always passes (controller-runtime's healthz.Ping). */
export const ping: Checker = (): void => {};

export interface ServersOptions {
  /** Probe listener address (":8081"); "0" disables. */
  healthProbeBindAddress: string;
  /** Metrics listener address (":8080"); "0" disables. */
  metricsBindAddress: string;
  /** Registry served at /metrics; defaults to the runtime's shared registry. */
  registry?: Registry;
  /**
   * Secure metrics (controller-runtime's SecureServing plus FilterProvider): serve over TLS with
   * this certificate and key, each request passing the filter first (kube/metrics_auth.ts).
   */
  metricsSecurity?: {
    tls: TlsPair;
    filter: (handler: (req: Request) => Promise<Response>) => (req: Request) => Promise<Response>;
    /**
     * Reads the certificate and key again, as controller-runtime's certwatcher does: a Secret
     * cert-manager renews is served without a restart. Polled every `certPollMs` while the
     * servers run; a pair that cannot be read or used is logged and the old one kept.
     */
    reloadTls?: () => Promise<TlsPair>;
    /** How often reloadTls is polled (ms); default CERT_POLL_MS. */
    certPollMs?: number;
  };
  /**
   * Serve HTTP/2 on the metrics listener as well (`--enable-http2`): negotiated by ALPN over
   * TLS, with prior knowledge over plain http. Default false: HTTP/1.1 only.
   */
  metricsHttp2?: boolean;
}

/** A PEM certificate chain and its key. */
export interface TlsPair {
  cert: string;
  key: string;
}

/** How often a reloadable metrics certificate is read again (controller-runtime polls every 10 s). */
export const CERT_POLL_MS = 10_000;

/** A listener the servers can stop: `Deno.HttpServer` or kube/http1_server.ts's server. */
interface Listening {
  readonly addr: Deno.NetAddr;
  shutdown(): Promise<void>;
}

/** The probe and metrics HTTP servers of one operator process. */
export class Servers {
  readonly #opts: ServersOptions;
  readonly #healthz = new Map<string, Checker>();
  readonly #readyz = new Map<string, Checker>();
  readonly #servers: Listening[] = [];
  #probeAddr?: Deno.NetAddr;
  #metricsAddr?: Deno.NetAddr;
  #started = false;
  /** Swaps the metrics certificate (set once the metrics listener serves TLS). */
  #swapCertificate?: (tls: TlsPair) => Promise<void>;
  #certPoll?: ReturnType<typeof setInterval>;

  constructor(opts: ServersOptions) {
    // Validate now so a bad address fails before anything else starts.
    parseBindAddress(opts.healthProbeBindAddress);
    parseBindAddress(opts.metricsBindAddress);
    this.#opts = opts;
  }

  /** Registers a liveness check under /healthz (and /healthz/<name>). */
  addHealthzCheck(name: string, check: Checker): void {
    this.#addCheck(this.#healthz, name, check);
  }

  /** Registers a readiness check under /readyz (and /readyz/<name>). */
  addReadyzCheck(name: string, check: Checker): void {
    this.#addCheck(this.#readyz, name, check);
  }

  /** Address the probe server listens on (port resolved when ":0" was asked). */
  get probeAddr(): Deno.NetAddr | undefined {
    return this.#probeAddr;
  }

  /** Address the metrics server listens on. */
  get metricsAddr(): Deno.NetAddr | undefined {
    return this.#metricsAddr;
  }

  /** Binds both listeners; rejects with a clear error when a port cannot be bound. */
  async start(): Promise<void> {
    if (this.#started) throw new Error("servers already started");
    this.#started = true;
    try {
      const probe = parseBindAddress(this.#opts.healthProbeBindAddress);
      if (probe) {
        const server = listen(
          "health probe",
          this.#opts.healthProbeBindAddress,
          probe,
          (req) => this.#serveProbe(req),
        );
        this.#servers.push(server);
        this.#probeAddr = server.addr;
      }
      const metrics = parseBindAddress(this.#opts.metricsBindAddress);
      if (metrics) {
        const reg = this.#opts.registry ?? defaultRegistry;
        const security = this.#opts.metricsSecurity;
        const plain = (req: Request) => serveMetrics(reg, req);
        const handler = security ? security.filter(plain) : plain;
        const server = this.#opts.metricsHttp2
          ? listen("metrics", this.#opts.metricsBindAddress, metrics, handler, security?.tls)
          : await listenHttp1("metrics", this.#opts.metricsBindAddress, metrics, handler, {
            tls: security?.tls,
          });
        this.#servers.push(server);
        this.#metricsAddr = server.addr;
        if (security) {
          this.#swapCertificate = this.#certificateSwapper(server, metrics, handler);
          if (security.reloadTls) this.#pollCertificate(security.tls, security.reloadTls);
        }
      }
    } catch (err) {
      // Do not leave the first listener open when the second fails.
      for (const s of this.#servers.splice(0)) s.shutdown().catch(() => {});
      throw err;
    }
  }

  /** Stops accepting connections and waits for in-flight requests. */
  async close(): Promise<void> {
    clearInterval(this.#certPoll);
    this.#certPoll = undefined;
    const servers = this.#servers.splice(0);
    await Promise.all(servers.map((s) => s.shutdown()));
  }

  /**
   * How the metrics certificate is swapped: Node's HTTP/1.1 server takes a new secure context for
   * new connections; `Deno.serve` cannot, so its listener is bound again on the same port.
   */
  #certificateSwapper(
    server: Listening,
    addr: BindAddress,
    handler: (req: Request) => Response | Promise<Response>,
  ): (tls: TlsPair) => Promise<void> {
    if ("setCertificate" in server) {
      const http1 = server as Listening & { setCertificate(tls: TlsPair): void };
      return (tls) => Promise.resolve(http1.setCertificate(tls));
    }
    let current = server;
    return async (tls) => {
      await current.shutdown();
      const next = listen(
        "metrics",
        this.#opts.metricsBindAddress,
        {
          ...addr,
          hostname: current.addr.hostname,
          port: current.addr.port,
        },
        handler,
        tls,
      );
      this.#servers.splice(this.#servers.indexOf(current), 1, next);
      current = next;
    };
  }

  /** Reads the certificate every certPollMs and serves a changed one. */
  #pollCertificate(first: TlsPair, reload: () => Promise<TlsPair>): void {
    let served = first;
    let busy = false;
    this.#certPoll = setInterval(async () => {
      if (busy) return;
      busy = true;
      try {
        const next = await reload();
        if (next.cert === served.cert && next.key === served.key) return;
        await checkPair(next);
        await this.#swapCertificate!(next);
        served = next;
        log.info("metrics certificate reloaded");
      } catch (err) {
        log.warn("metrics certificate not reloaded, the one in use stays: {error}", {
          error: errorMessage(err),
        });
      } finally {
        busy = false;
      }
    }, this.#opts.metricsSecurity?.certPollMs ?? CERT_POLL_MS);
    Deno.unrefTimer(this.#certPoll as unknown as number);
  }

  #addCheck(checks: Map<string, Checker>, name: string, check: Checker): void {
    if (this.#started) {
      throw new Error(`cannot add check ${JSON.stringify(name)}: servers already started`);
    }
    if (!name || name.includes("/")) throw new Error(`invalid check name ${JSON.stringify(name)}`);
    // Same name replaces the earlier check, as controller-runtime's map assignment does.
    checks.set(name, check);
  }

  #serveProbe(req: Request): Promise<Response> | Response {
    const url = new URL(req.url);
    for (
      const [prefix, checks] of [["/healthz", this.#healthz], ["/readyz", this.#readyz]] as const
    ) {
      if (url.pathname === prefix || url.pathname.startsWith(prefix + "/")) {
        return serveChecks(checks, url.pathname.slice(prefix.length), url, req);
      }
    }
    return notFound();
  }
}

/**
 * Throws unless key is the private key of cert's first certificate: a Secret caught between its
 * two files, or a broken one, must not replace the pair that works.
 */
async function checkPair(tls: TlsPair): Promise<void> {
  const { X509Certificate, createPrivateKey } = await import("node:crypto");
  if (!new X509Certificate(tls.cert).checkPrivateKey(createPrivateKey(tls.key))) {
    throw new Error("tls.key is not the key of tls.crt");
  }
}

/** `Deno.serve` on a bind address (HTTP/1.1 and HTTP/2). */
function listen(
  what: string,
  raw: string,
  addr: BindAddress,
  handler: (req: Request) => Response | Promise<Response>,
  tls?: { cert: string; key: string },
): Deno.HttpServer<Deno.NetAddr> {
  const serve = (hostname: string) =>
    Deno.serve({ hostname, port: addr.port, onListen: () => {}, ...tls }, handler);
  try {
    if (addr.hostname !== undefined) return serve(addr.hostname);
    // ":PORT" means every interface. Like Go, prefer the dual-stack IPv6 wildcard and fall
    // back to IPv4 where IPv6 is unavailable.
    try {
      return serve("::");
    } catch (err) {
      if (err instanceof Deno.errors.AddrInUse || err instanceof Deno.errors.PermissionDenied) {
        throw err;
      }
      return serve("0.0.0.0");
    }
  } catch (err) {
    const msg = errorMessage(err);
    throw new Error(`${what} server: cannot listen on ${raw}: ${msg}`, { cause: err });
  }
}

/** kube/http1_server.ts on a bind address (HTTP/1.1 only), with `listen`'s fallbacks. */
async function listenHttp1(
  what: string,
  raw: string,
  addr: BindAddress,
  handler: (req: Request) => Response | Promise<Response>,
  opts: { tls?: { cert: string; key: string } },
): Promise<Listening> {
  const { serveHttp1, listenErrorCode } = await import("./http1_server.ts");
  const serve = (hostname: string) =>
    serveHttp1({ hostname, port: addr.port, tls: opts.tls }, handler);
  try {
    if (addr.hostname !== undefined) return await serve(addr.hostname);
    try {
      return await serve("::");
    } catch (err) {
      const code = listenErrorCode(err);
      if (
        code === "EADDRINUSE" || code === "EACCES" || err instanceof Deno.errors.NotCapable ||
        err instanceof Deno.errors.PermissionDenied
      ) {
        throw err;
      }
      return await serve("0.0.0.0");
    }
  } catch (err) {
    const msg = errorMessage(err);
    throw new Error(`${what} server: cannot listen on ${raw}: ${msg}`, { cause: err });
  }
}

interface CheckResult {
  name: string;
  healthy: boolean;
  excluded: boolean;
}

async function serveChecks(
  checks: Map<string, Checker>,
  subPath: string,
  url: URL,
  req: Request,
): Promise<Response> {
  const path = cleanPath(subPath);
  if (path === "/") return await serveAggregated(checks, url, req);
  const name = path.slice(1);
  if (checks.size === 0 && name === "ping") return text(200, "ok");
  const check = checks.get(name);
  if (!check) return notFound();
  try {
    await check(req);
    return text(200, "ok");
  } catch (err) {
    const msg = errorMessage(err);
    return text(500, `internal server error: ${msg}\n`);
  }
}

async function serveAggregated(
  checks: Map<string, Checker>,
  url: URL,
  req: Request,
): Promise<Response> {
  const excluded = new Set(url.searchParams.getAll("exclude"));
  const results: CheckResult[] = [];
  // Checks run concurrently: a slow check should not delay the others past the probe timeout.
  await Promise.all([...checks].map(async ([name, check]) => {
    if (excluded.delete(name)) {
      results.push({ name, healthy: true, excluded: true });
      return;
    }
    try {
      await check(req);
      results.push({ name, healthy: true, excluded: false });
    } catch {
      results.push({ name, healthy: false, excluded: false });
    }
  }));
  if (checks.size === 0) results.push({ name: "ping", healthy: true, excluded: false });
  results.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  const failed = results.some((r) => !r.healthy);
  const verbose = url.searchParams.has("verbose");
  if (!failed && !verbose) return text(200, "ok");
  let body = "";
  for (const r of results) {
    if (r.excluded) body += `[+]${r.name} excluded: ok\n`;
    else if (r.healthy) body += `[+]${r.name} ok\n`;
    else body += `[-]${r.name} failed: reason withheld\n`;
  }
  if (excluded.size > 0) {
    const names = [...excluded].map((n) => JSON.stringify(n)).join(",");
    body += `warn: some health checks cannot be excluded: no matches for ${names}\n`;
  }
  body += failed ? "healthz check failed\n" : "healthz check passed\n";
  return text(failed ? 500 : 200, body);
}

async function serveMetrics(reg: Registry, req: Request): Promise<Response> {
  if (new URL(req.url).pathname !== "/metrics") return notFound();
  try {
    const body = await reg.metrics();
    return new Response(body, { headers: { "content-type": reg.contentType } });
  } catch (err) {
    const msg = errorMessage(err);
    return text(500, `An error has occurred while serving metrics:\n\n${msg}\n`);
  }
}

function text(status: number, body: string): Response {
  return new Response(body, {
    status,
    headers: {
      "content-type": "text/plain; charset=utf-8",
      "x-content-type-options": "nosniff",
    },
  });
}

function notFound(): Response {
  return text(404, "404 page not found\n");
}

/** Go's path.Clean for the part after the endpoint prefix ("" → "/"). */
function cleanPath(p: string): string {
  const out: string[] = [];
  for (const seg of p.split("/")) {
    if (seg === "" || seg === ".") continue;
    if (seg === "..") out.pop();
    else out.push(seg);
  }
  return "/" + out.join("/");
}
