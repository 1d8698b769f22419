/**
 * A counting reverse proxy between an operator under test and the API server: the operator is
 * given a kubeconfig whose server is this proxy's plain-HTTP loopback address, the proxy
 * forwards every request unchanged (its Authorization header included, so the API server still
 * authenticates and authorizes the operator's own identity) to the real HTTPS API server, and
 * records each request's verb and resource (request_info.ts) with its arrival time and status.
 *
 * Why a proxy rather than the operator's metrics: rest_client_requests_total keeps client-go's
 * labels (code, method, host) and cannot say which resource a request was for; adding a label
 * would make the family differ from client-go's, and an operator built elsewhere (the Go
 * original) could not be counted the same way. The proxy counts any build that honours
 * KUBECONFIG, from the outside. What it costs: one more loopback hop per request in the bench
 * process (HTTP/1.1 from the operator, HTTP/2 onward), which is not part of the operator's CPU
 * or memory figures.
 *
 * @module
 */
import { classifyRequest, type RequestInfo } from "./request_info.ts";
import { errorMessage } from "../../kube/errors.ts";

/** One request the operator made. */
export interface ProxiedApiRequest extends RequestInfo {
  method: string;
  path: string;
  /** The query string as sent ("?watch=1&…"), "" when none. */
  query: string;
  /** performance.now() when the request arrived. */
  at: number;
  /** Status the API server answered; 0 until the answer's headers arrive, 502 when unreachable. */
  status: number;
}

/** A running proxy. */
export interface ApiProxy {
  /** `http://127.0.0.1:<port>`: the server for the operator's kubeconfig. */
  readonly url: string;
  /** Every request so far, in arrival order. */
  readonly requests: readonly ProxiedApiRequest[];
  /** Requests that arrived in [from, to) (performance.now() times; to defaults to now). */
  between(from: number, to?: number): ProxiedApiRequest[];
  /**
   * Copies a kubeconfig with this proxy as every cluster's server (credentials kept); returns
   * the copy's path. JSON kubeconfigs only, as the test control plane writes them.
   */
  rewriteKubeconfig(kubeconfig: string): Promise<string>;
  /**
   * Turns every response still streaming (the open watches) into a half-open connection:
   * from now on nothing more of it is forwarded, yet it is not closed either. Later requests
   * are forwarded as usual. Returns how many streams were stalled.
   */
  stallOpenStreams(): number;
  close(): Promise<void>;
}

/** A response body being forwarded, which can be stalled. */
interface ForwardedStream {
  stall(): void;
  /** Ends a stalled stream (at close). */
  abandon(): void;
}

/** Headers that describe one hop, not the request (RFC 9110 §7.6.1), plus what fetch recomputes. */
const HOP_HEADERS = [
  "connection",
  "keep-alive",
  "proxy-connection",
  "transfer-encoding",
  "upgrade",
  "te",
  "trailer",
  "host",
  "content-length",
];

/**
 * Starts the proxy on a free loopback port, forwarding to `upstream` (`https://127.0.0.1:<port>`)
 * and trusting `caPem` for it (none needed for a plain-HTTP upstream).
 */
export function startApiProxy(
  upstream: string,
  caPem?: string,
  clientCert?: { cert: string; key: string },
  /**
   * Serve HTTPS with this certificate (for 127.0.0.1) and name `caPem` in rewritten kubeconfigs.
   * client-go 0.35 (the Go original) sends no bearer token to a plain-http server, so the
   * benchmarks serve it over TLS; without, the proxy listens on plain http.
   */
  serving?: { certPem: string; keyPem: string; caPem: string },
): ApiProxy {
  const client = Deno.createHttpClient({ caCerts: caPem ? [caPem] : [], ...clientCert });
  const streams = new Set<ForwardedStream>();
  const requests: ProxiedApiRequest[] = [];
  // Aborted by close(): ends the watches still streaming, so shutdown does not wait on them.
  const closing = new AbortController();
  const listen = serving
    ? { hostname: "127.0.0.1", port: 0, cert: serving.certPem, key: serving.keyPem }
    : { hostname: "127.0.0.1", port: 0 };
  const server = Deno.serve({ ...listen, onListen: () => {} }, async (req) => {
    const url = new URL(req.url);
    const record: ProxiedApiRequest = {
      ...classifyRequest(req.method, url),
      method: req.method,
      path: url.pathname,
      query: url.search,
      at: performance.now(),
      status: 0,
    };
    requests.push(record);
    const headers = new Headers(req.headers);
    for (const h of HOP_HEADERS) headers.delete(h);
    // fetch negotiates and undoes compression itself; the answer goes back uncompressed.
    headers.delete("accept-encoding");
    const body = req.method === "GET" || req.method === "HEAD"
      ? undefined
      : await req.arrayBuffer();
    let res: Response;
    try {
      res = await fetch(upstream + url.pathname + url.search, {
        method: req.method,
        headers,
        body,
        client,
        // A client that goes away cancels the body it was reading, which ends this fetch too.
        signal: closing.signal,
        redirect: "manual",
      });
    } catch (err) {
      record.status = 502;
      return new Response(`api proxy: ${errorMessage(err)}`, {
        status: 502,
      });
    }
    record.status = res.status;
    const out = new Headers(res.headers);
    for (const h of [...HOP_HEADERS, "content-encoding"]) out.delete(h);
    const forwarded = res.body ? stallable(res.body, streams) : null;
    return new Response(forwarded, {
      status: res.status,
      statusText: res.statusText,
      headers: out,
    });
  });
  const { port } = server.addr;
  const url = `${serving ? "https" : "http"}://127.0.0.1:${port}`;
  return {
    url,
    requests,
    between(from, to = Infinity) {
      return requests.filter((r) => r.at >= from && r.at < to);
    },
    async rewriteKubeconfig(kubeconfig) {
      const config = JSON.parse(await Deno.readTextFile(kubeconfig)) as {
        clusters?: { cluster: Record<string, unknown> }[];
      };
      for (const c of config.clusters ?? []) {
        c.cluster.server = url;
        delete c.cluster["certificate-authority-data"];
        if (serving) c.cluster["certificate-authority-data"] = btoa(serving.caPem);
      }
      const path = kubeconfig.replace(/(\.kubeconfig)?$/, ".via-proxy.kubeconfig");
      await Deno.writeTextFile(path, JSON.stringify(config, null, 2), { mode: 0o600 });
      return path;
    },
    stallOpenStreams() {
      for (const s of streams) s.stall();
      return streams.size;
    },
    async close() {
      for (const s of streams) s.abandon();
      closing.abort();
      await server.shutdown();
      client.close();
    },
  };
}

/** Forwards src chunk by chunk until stalled; a stalled stream neither forwards nor ends. */
function stallable(
  src: ReadableStream<Uint8Array>,
  streams: Set<ForwardedStream>,
): ReadableStream<Uint8Array> {
  const reader = src.getReader();
  let stalled = false;
  let abandoned = false;
  let wake: (() => void) | undefined;
  const entry: ForwardedStream = {
    stall: () => void (stalled = true),
    abandon: () => {
      abandoned = true;
      wake?.();
    },
  };
  streams.add(entry);
  const hold = async (ctrl: ReadableStreamDefaultController<Uint8Array>) => {
    if (!abandoned) await new Promise<void>((resolve) => (wake = resolve));
    streams.delete(entry);
    await reader.cancel().catch(() => {});
    if (abandoned) ctrl.close();
  };
  return new ReadableStream<Uint8Array>({
    async pull(ctrl) {
      if (stalled) return await hold(ctrl);
      const { done, value } = await reader.read();
      // A chunk that arrives after the stall is dropped, as a dead link would.
      if (stalled) return await hold(ctrl);
      if (done) {
        streams.delete(entry);
        ctrl.close();
      } else ctrl.enqueue(value);
    },
    cancel(reason) {
      streams.delete(entry);
      wake?.();
      return reader.cancel(reason);
    },
  });
}
