/**
 * An HTTP/1.1-only server for a fetch-style handler, for the metrics listener with HTTP/2 off
 * (controller-runtime's `--enable-http2=false`, the answer to the HTTP/2 rapid-reset attack,
 * CVE-2023-44487). `Deno.serve` cannot do this: over TLS it offers `h2` by ALPN (and refuses an
 * `alpnProtocols` option), over plain TCP it accepts HTTP/2 with prior knowledge, and the older
 * `Deno.serveHttp` on a listener that offers only `http/1.1` still switches to HTTP/2 when a
 * client sends the connection preface without ALPN. Node's http and https servers (llhttp) speak
 * HTTP/1.x only: an HTTP/2 preface is a malformed request and the connection is closed.
 *
 * Only this module imports node:http / node:https; servers.ts loads it when the listener starts
 * with HTTP/2 off, so the Node layers are not part of the graph otherwise.
 *
 * @module
 */
import { createServer as createHttpServer } from "node:http";
import type { IncomingMessage, Server, ServerResponse } from "node:http";
import { createServer as createHttpsServer } from "node:https";
import type { Server as HttpsServer } from "node:https";
import type { Socket } from "node:net";
import { errorMessage } from "./errors.ts";

/** A fetch-style handler, as `Deno.serve` takes. */
export type FetchHandler = (req: Request) => Response | Promise<Response>;

/** Where and how to listen. */
export interface Http1ServerOptions {
  hostname: string;
  port: number;
  /** PEM certificate chain and key: serve HTTPS, offering only `http/1.1` by ALPN. */
  tls?: { cert: string; key: string };
  /**
   * How long a connection may take to complete its TLS handshake and send a request's headers,
   * and stay silent otherwise (controller-runtime's ReadHeaderTimeout: 32 s).
   */
  headerTimeoutMs?: number;
  /** How long a kept-alive connection may wait for its next request (IdleTimeout: 90 s). */
  idleTimeoutMs?: number;
}

/** controller-runtime's metrics server (its internal httpserver.New). */
const HEADER_TIMEOUT_MS = 32_000;
const IDLE_TIMEOUT_MS = 90_000;

/** A listening HTTP/1.1 server (the part of `Deno.HttpServer` the servers use). */
export interface Http1Server {
  readonly addr: Deno.NetAddr;
  /** Stops accepting, closes idle connections, and resolves once in-flight requests are done. */
  shutdown(): Promise<void>;
  /**
   * Serves new connections with another certificate and key (a rotated Secret); connections
   * already open keep theirs. Throws when the pair cannot be used, leaving the old one.
   */
  setCertificate(tls: { cert: string; key: string }): void;
}

/** A listen error with the system's code (`EADDRINUSE`, `EAFNOSUPPORT`, …) when there is one. */
export function listenErrorCode(err: unknown): string | undefined {
  if (typeof err !== "object" || err === null || !("code" in err)) return undefined;
  const code = (err as { code: unknown }).code;
  return typeof code === "string" ? code : undefined;
}

/**
 * Binds `hostname:port` and serves `handler` over HTTP/1.1 (HTTPS with `tls`). Rejects when the
 * address cannot be bound.
 */
export async function serveHttp1(
  opts: Http1ServerOptions,
  handler: FetchHandler,
): Promise<Http1Server> {
  const scheme = opts.tls ? "https" : "http";
  /** Every TCP connection, whatever its state (TLS handshake, idle, serving). */
  const connections = new Set<Socket>();
  /** Requests under way per connection a request arrived on; one with none is idle. */
  const inFlight = new Map<Socket, number>();
  let active = 0;
  let closing = false;
  let drained: () => void = () => {};

  const onRequest = (req: IncomingMessage, res: ServerResponse) => {
    const socket = req.socket;
    inFlight.set(socket, (inFlight.get(socket) ?? 0) + 1);
    active++;
    res.once("close", () => {
      const left = (inFlight.get(socket) ?? 1) - 1;
      inFlight.set(socket, left);
      active--;
      if (!closing) return;
      // Shutting down: a connection is closed as soon as its last answer is out.
      if (left === 0) socket.destroy();
      if (active === 0) drained();
    });
    respond(scheme, req, res, handler).catch(() => res.destroy());
  };
  const headerTimeoutMs = opts.headerTimeoutMs ?? HEADER_TIMEOUT_MS;
  const server: Server = opts.tls
    ? createHttpsServer({
      cert: opts.tls.cert,
      key: opts.tls.key,
      ALPNProtocols: ["http/1.1"],
      handshakeTimeout: headerTimeoutMs,
    })
    : createHttpServer();
  // A connection that says nothing is closed (Deno.serve keeps such connections open): no
  // activity for headerTimeoutMs, no next request within idleTimeoutMs of the last answer.
  server.setTimeout(headerTimeoutMs);
  server.headersTimeout = headerTimeoutMs;
  server.keepAliveTimeout = opts.idleTimeoutMs ?? IDLE_TIMEOUT_MS;
  server.on("request", onRequest);
  server.on("connection", (socket: Socket) => {
    connections.add(socket);
    socket.once("close", () => connections.delete(socket));
  });
  // A TLS server's requests arrive on the TLS socket, not on the TCP one "connection" reports.
  if (opts.tls) {
    server.on("secureConnection", (socket: Socket) => {
      socket.once("close", () => inFlight.delete(socket));
    });
  } else {
    server.on("connection", (socket: Socket) => {
      socket.once("close", () => inFlight.delete(socket));
    });
  }

  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(opts.port, opts.hostname, () => {
      server.off("error", reject);
      resolve();
    });
  });
  const bound = server.address();
  if (bound === null || typeof bound === "string") {
    server.close();
    throw new Error(`listening on ${opts.hostname}:${opts.port} gave no TCP address`);
  }
  const addr: Deno.NetAddr = { transport: "tcp", hostname: bound.address, port: bound.port };

  let closed: Promise<void> | undefined;
  const stop = async () => {
    closing = true;
    const listenerClosed = new Promise<void>((resolve) => server.close(() => resolve()));
    for (const [socket, requests] of inFlight) if (requests === 0) socket.destroy();
    if (active > 0) await new Promise<void>((resolve) => (drained = resolve));
    // What is left has no request under way: connections still in their TLS handshake.
    for (const socket of connections) socket.destroy();
    await listenerClosed;
  };
  return {
    addr,
    shutdown() {
      closed ??= stop();
      return closed;
    },
    setCertificate(tls) {
      if (!opts.tls) throw new Error("a plain http listener has no certificate");
      (server as HttpsServer).setSecureContext({ cert: tls.cert, key: tls.key });
    },
  };
}

/** Runs the handler on one request and writes its answer. */
async function respond(
  scheme: string,
  req: IncomingMessage,
  res: ServerResponse,
  handler: FetchHandler,
): Promise<void> {
  const aborted = new AbortController();
  res.once("close", () => {
    if (!res.writableFinished) aborted.abort(new Error("client went away"));
  });
  // A request body is never read (the handlers here serve GET); let it flow past.
  req.resume();
  let request: Request;
  try {
    request = toRequest(scheme, req, aborted.signal);
  } catch (err) {
    // A method fetch's Request refuses (CONNECT, TRACE) or a target that is no URL path.
    res.writeHead(400, { "content-type": "text/plain; charset=utf-8" });
    res.end(`bad request: ${errorMessage(err)}\n`);
    return;
  }
  let response: Response;
  try {
    response = await handler(request);
  } catch (err) {
    response = new Response(`internal server error: ${errorMessage(err)}\n`, {
      status: 500,
      headers: { "content-type": "text/plain; charset=utf-8" },
    });
  }
  if (res.destroyed) {
    await response.body?.cancel();
    return;
  }
  try {
    const body = response.body ? new Uint8Array(await response.arrayBuffer()) : undefined;
    res.statusCode = response.status;
    response.headers.forEach((value, name) => res.setHeader(name, value));
    res.end(body);
  } catch {
    res.destroy();
  }
}

/** The fetch Request for a Node request (no body: see respond). */
function toRequest(scheme: string, req: IncomingMessage, signal: AbortSignal): Request {
  const headers = new Headers();
  for (let i = 0; i + 1 < req.rawHeaders.length; i += 2) {
    headers.append(req.rawHeaders[i], req.rawHeaders[i + 1]);
  }
  const local = req.socket.localAddress ?? "localhost";
  const authority = req.headers.host ||
    `${local.includes(":") ? `[${local}]` : local}:${req.socket.localPort}`;
  let url: URL;
  try {
    url = new URL(req.url ?? "/", `${scheme}://${authority}`);
  } catch {
    // A Host header that is no authority: the path still routes.
    url = new URL(req.url ?? "/", `${scheme}://localhost`);
  }
  return new Request(url, { method: req.method ?? "GET", headers, signal });
}
