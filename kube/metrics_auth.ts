/**
 * Who may read /metrics: the API server decides, as controller-runtime's
 * filters.WithAuthenticationAndAuthorization does (kubebuilder's `--metrics-secure`). Each
 * request's bearer token goes to a TokenReview; the identity it names goes to a
 * SubjectAccessReview for the non-resource URL and the HTTP verb (GET /metrics → `get`). No
 * token or a token the API server does not accept is 401, an identity without the permission
 * (the metrics-reader ClusterRole grants it) is 403, otherwise the wrapped handler answers.
 *
 * Answers are cached for a short time (a scraper asks every few seconds with the same token;
 * controller-runtime caches both reviews too), keyed by a SHA-256 of the token so the token
 * itself is never kept as a key, and never logged. A review that fails (API server unreachable,
 * 403 to the operator itself) is a 500 for that scrape and is not cached.
 *
 * While the caller says the reviews cannot be made (`unavailable`: the operator's role lacks
 * them), every request is refused with 503 and the reason, before any review is sent: callers
 * are never let through unchecked.
 *
 * @module
 */
import { getLogger } from "@logtape/logtape";
import type { RequestSpec } from "./transport.ts";
import { errorMessage } from "./errors.ts";

const log = getLogger(["cocoon-operator", "metrics-auth"]);

/** What the filter needs from the API server connection. */
export interface ReviewTransport {
  fetch(spec: RequestSpec): Promise<Response>;
}

/** A request handler, e.g. the metrics endpoint. */
export type Handler = (req: Request) => Promise<Response>;

/** Options of withAuthenticationAndAuthorization. */
export interface MetricsAuthOptions {
  /** How long a review's answer is reused (default 10 s). */
  cacheTtlMs?: number;
  /** Most cached answers per kind (default 1024; the oldest go first). */
  maxCached?: number;
  /** Clock, for tests. */
  now?: () => number;
  /**
   * Why callers cannot be reviewed now (e.g. the operator may not create TokenReviews), or
   * undefined when they can. Asked per request; while it gives a reason every request is 503.
   */
  unavailable?: () => string | undefined;
  /** How often a refusal for `unavailable` is logged at most (default 10 min; the first always). */
  refusalLogIntervalMs?: number;
}

/** The identity a TokenReview returned. */
interface UserInfo {
  username: string;
  uid?: string;
  groups?: string[];
  extra?: Record<string, string[]>;
}

type Authn = { authenticated: true; user: UserInfo } | { authenticated: false };

/**
 * Wraps handler so that only callers the API server authenticates and authorizes reach it.
 */
export function withAuthenticationAndAuthorization(
  transport: ReviewTransport,
  handler: Handler,
  opts: MetricsAuthOptions = {},
): Handler {
  const ttl = opts.cacheTtlMs ?? 10_000;
  const max = opts.maxCached ?? 1024;
  const now = opts.now ?? Date.now;
  const tokens = new TtlCache<Authn>(ttl, max, now);
  const decisions = new TtlCache<boolean>(ttl, max, now);
  const logEvery = opts.refusalLogIntervalMs ?? 600_000;
  let lastRefusalLog: { reason: string; at: number } | undefined;
  let refusedSinceLog = 0;

  return async (req: Request): Promise<Response> => {
    const unavailable = opts.unavailable?.();
    if (unavailable !== undefined) {
      refusedSinceLog++;
      const at = now();
      if (
        !lastRefusalLog || lastRefusalLog.reason !== unavailable ||
        at - lastRefusalLog.at >= logEvery
      ) {
        log.warn("metrics request refused ({refused} since the last such line): {reason}", {
          refused: refusedSinceLog,
          reason: unavailable,
        });
        lastRefusalLog = { reason: unavailable, at };
        refusedSinceLog = 0;
      }
      return text(503, `Service Unavailable: ${unavailable}`);
    }
    const token = bearerToken(req.headers.get("authorization"));
    if (!token) return text(401, "Unauthorized");
    const path = new URL(req.url).pathname;
    const verb = httpVerb(req.method);
    try {
      const key = await sha256(token);
      let authn = tokens.get(key);
      if (!authn) {
        authn = await tokenReview(transport, token);
        tokens.set(key, authn);
      }
      if (!authn.authenticated) return text(401, "Unauthorized");
      const decisionKey = `${key}\0${verb}\0${path}`;
      let allowed = decisions.get(decisionKey);
      if (allowed === undefined) {
        allowed = await subjectAccessReview(transport, authn.user, verb, path);
        decisions.set(decisionKey, allowed);
      }
      if (!allowed) {
        log.debug("metrics request by {user} for {verb} {path} forbidden", {
          user: authn.user.username,
          verb,
          path,
        });
        return text(403, `Forbidden: user "${authn.user.username}" may not ${verb} ${path}`);
      }
    } catch (err) {
      log.warn("metrics request: reviewing the caller failed: {error}", {
        error: errorMessage(err),
      });
      return text(500, "Internal Server Error: the caller could not be reviewed");
    }
    return await handler(req);
  };
}

/** The token of an `Authorization: Bearer <token>` header (the scheme is case-insensitive). */
function bearerToken(header: string | null): string | undefined {
  const m = /^\s*bearer\s+(\S+)\s*$/i.exec(header ?? "");
  return m?.[1];
}

/** The Kubernetes verb of an HTTP method for a non-resource URL (apiserver's RequestInfo). */
function httpVerb(method: string): string {
  switch (method.toUpperCase()) {
    case "POST":
      return "create";
    case "PUT":
      return "update";
    case "PATCH":
      return "patch";
    case "DELETE":
      return "delete";
    default:
      return method.toLowerCase(); // get, head, options
  }
}

async function tokenReview(transport: ReviewTransport, token: string): Promise<Authn> {
  const status = await review(transport, "/apis/authentication.k8s.io/v1/tokenreviews", {
    apiVersion: "authentication.k8s.io/v1",
    kind: "TokenReview",
    spec: { token },
  }, "TokenReview");
  if (status.authenticated !== true || !isRecord(status.user)) return { authenticated: false };
  const u = status.user;
  if (typeof u.username !== "string" || u.username === "") return { authenticated: false };
  return {
    authenticated: true,
    user: {
      username: u.username,
      uid: typeof u.uid === "string" ? u.uid : undefined,
      groups: Array.isArray(u.groups) ? u.groups.filter((g) => typeof g === "string") : undefined,
      extra: isRecord(u.extra) ? u.extra as Record<string, string[]> : undefined,
    },
  };
}

async function subjectAccessReview(
  transport: ReviewTransport,
  user: UserInfo,
  verb: string,
  path: string,
): Promise<boolean> {
  const status = await review(
    transport,
    "/apis/authorization.k8s.io/v1/subjectaccessreviews",
    {
      apiVersion: "authorization.k8s.io/v1",
      kind: "SubjectAccessReview",
      spec: {
        user: user.username,
        uid: user.uid,
        groups: user.groups,
        extra: user.extra,
        nonResourceAttributes: { path, verb },
      },
    },
    "SubjectAccessReview",
  );
  return status.allowed === true;
}

/** POSTs a review and returns its status; a non-2xx answer is an error naming the kind. */
async function review(
  transport: ReviewTransport,
  path: string,
  body: unknown,
  kind: string,
): Promise<Record<string, unknown>> {
  const res = await transport.fetch({ method: "POST", path, body });
  if (!res.ok) {
    await res.body?.cancel();
    throw new Error(`${kind} answered ${res.status}`);
  }
  const obj: unknown = await res.json();
  if (!isRecord(obj) || !isRecord(obj.status)) return {};
  return obj.status;
}

async function sha256(text: string): Promise<string> {
  const digest = await crypto.subtle.digest("SHA-256", new TextEncoder().encode(text));
  return Array.from(new Uint8Array(digest), (b) => b.toString(16).padStart(2, "0")).join("");
}

function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

function text(status: number, body: string): Response {
  return new Response(`${body}\n`, {
    status,
    headers: {
      "content-type": "text/plain; charset=utf-8",
      "x-content-type-options": "nosniff",
    },
  });
}

/** A small map whose entries expire, dropping the oldest past a size bound. */
class TtlCache<V> {
  readonly #entries = new Map<string, { value: V; expires: number }>();
  constructor(
    private readonly ttl: number,
    private readonly max: number,
    private readonly now: () => number,
  ) {}

  get(key: string): V | undefined {
    const e = this.#entries.get(key);
    if (!e) return undefined;
    if (e.expires <= this.now()) {
      this.#entries.delete(key);
      return undefined;
    }
    return e.value;
  }

  set(key: string, value: V): void {
    if (this.ttl <= 0) return;
    this.#entries.delete(key);
    this.#entries.set(key, { value, expires: this.now() + this.ttl });
    while (this.#entries.size > this.max) {
      this.#entries.delete(this.#entries.keys().next().value!);
    }
  }
}
