/**
 * One registry host, spoken to the way go-containerregistry's transport does: ping `/v2/` to
 * learn the scheme (https, or http as reference.plainHttpPolicy() says) and the auth
 * challenge, then send every request with Basic credentials or a Bearer token for the request's
 * scope. Unlike the Go transport, which keeps one token per client and refreshes only on 401,
 * tokens are cached per scope until `expires_in`; a 401 still drops the token and retries once.
 *
 * Credentials and tokens never appear in logs or error messages, and only travel to the host
 * they were meant for, and never in clear text except to loopback: a registry reached over plain
 * http anywhere else is spoken to anonymously or not at all (a request that would carry
 * credentials fails, naming the host). Redirects keep Authorization only on the same host without a downgrade
 * to http, a 401 from a host we were redirected to is not answered with the registry's
 * credentials, and token-endpoint redirects are vetted like the realm. Failures of shared work
 * (ping, token exchange) are reported to each caller prefixed with its own `repo:tag`.
 */

import { getLogger } from "@logtape/logtape";
import { type Challenge, parseChallenges, pickChallenge, validateRealm } from "./auth/challenge.ts";
import type { Authenticator, AuthTarget, Credential, Keychain } from "./auth/keychain.ts";
import { TokenCache } from "./auth/token_cache.ts";
import { abortable, DeadlineError, type FetchFn, withDeadline } from "./deadline.ts";
import { isRecord, parseDiagnostics, readCapped, RegistryError } from "./errors.ts";
import { plainHttpPolicy } from "./reference.ts";
import { isLoopbackHost } from "../kube/loopback.ts";
import { errorMessage } from "../kube/errors.ts";

const logger = getLogger(["cocoon-operator", "snapshot"]);

/** Delay before racing plain http against https for hosts that allow it (as ggcr). */
const HTTP_FALLBACK_DELAY_MS = 300;
const MAX_BODY = 64 * 1024;
const MAX_REDIRECTS = 10;
const CLIENT_ID = "cocoon-operator";
const MAX_WIDENED_SCOPES = 4096;

/** A fully read HTTP answer (registry bodies here are small: empty, or an error document). */
export interface HttpResult {
  status: number;
  statusText: string;
  headers: Headers;
  body: string;
  /** Where the answer finally came from, after redirects. */
  url: URL;
}

/**
 * How #fetchAll treats redirects: registry calls may be sent to another host (blob storage, a
 * CDN) but without credentials; ping and token requests never downgrade to http, and token
 * redirects are vetted like the realm itself (go-containerregistry's realmRedirectCheck).
 */
type RedirectPolicy = { kind: "registry" } | { kind: "ping" } | {
  kind: "token";
  insecure: boolean;
};

/** What one registry call needs. */
export interface SessionRequest {
  method: "GET" | "HEAD" | "DELETE";
  /** Path under the registry root, starting with `/v2/`. */
  path: string;
  headers?: Record<string, string>;
  /** Token scopes, e.g. `repository:p/vm:pull`. */
  scopes: string[];
  /** Whose credentials to use. */
  target: AuthTarget;
  /** Prefix for error messages, e.g. "HEAD manifest p/vm:hibernate". */
  action: string;
}

/** Options of a session. */
export interface SessionOptions {
  registry: string;
  keychain: Keychain;
  fetch: FetchFn;
  timeoutMs: number;
  now?: () => number;
  /** Hosts plain http is allowed to by name (--allow-plain-http); see plainHttpPolicy. */
  plainHttpHosts?: readonly string[];
}

interface Ping {
  scheme: "http" | "https";
  /** Undefined when `/v2/` answered 200 (no auth asked). */
  challenge?: Challenge;
}

/** Auth state for one registry host; see module doc. */
export class RegistrySession {
  readonly registry: string;
  readonly #keychain: Keychain;
  readonly #fetch: FetchFn;
  readonly #timeoutMs: number;
  readonly #tokens: TokenCache;
  readonly #plainHttp: "only" | "fallback" | "never";
  #ping?: Promise<Ping>;
  #pingResult?: Ping;
  /**
   * Scopes a registry asked for on a 401 beyond what a request type wanted, keyed by the
   * request's own scopes: later calls ask for them up front (as ggcr's transport keeps its
   * widened scope list), instead of a doomed request and token fetch on every call.
   */
  readonly #widenedScopes = new Map<string, string[]>();
  /** Refresh tokens handed out by a token endpoint, replacing the keychain credential. */
  readonly #refreshTokens = new WeakMap<Authenticator, string>();

  constructor(opts: SessionOptions) {
    this.registry = opts.registry;
    this.#keychain = opts.keychain;
    this.#fetch = opts.fetch;
    this.#timeoutMs = opts.timeoutMs;
    this.#tokens = new TokenCache(opts.now);
    this.#plainHttp = plainHttpPolicy(opts.registry, opts.plainHttpHosts ?? []);
  }

  /** Sends req with auth, retrying once after a 401, and returns the fully read answer. */
  async send(req: SessionRequest, signal?: AbortSignal): Promise<HttpResult> {
    // The ping and token exchanges are shared by concurrent callers, so they run under their own
    // deadline only; each caller stops waiting when its own signal aborts.
    const ping = await abortable(this.#pingOnce(), signal).catch((err) => {
      throw inContext(req.action, err, signal);
    });
    const auth = await this.#keychain.resolve(req.target, signal).catch((err) => {
      throw inContext(`${req.action}: resolving credentials`, err, signal);
    });
    if (auth && ping.scheme === "http" && !isLoopbackHost(hostOf(this.registry))) {
      throw new Error(
        `${req.action}: refusing to send ${auth.source} credentials to ${this.registry} over ` +
          "plain http: credentials travel in clear text only to loopback; serve the registry " +
          "over https, or remove its credentials to use it anonymously",
      );
    }
    const authn = auth ?? { source: "anonymous", authorization: () => Promise.resolve({}) };
    let challenge = ping.challenge;
    const scopeKey = TokenCache.key(req.scopes);
    let scopes = this.#widenedScopes.get(scopeKey) ?? req.scopes;
    let header = await this.#authorization(req, authn, challenge, scopes, ping.scheme, signal);
    let res = await this.#exchange(req, ping.scheme, header, signal);
    // A 401 from a host the registry redirected us to is that host's business: adopting its
    // challenge would hand the registry's credentials to a realm of its choosing.
    if (
      res.status !== 401 || !mayCarryCredentials(registryUrl(ping.scheme, this.registry), res.url)
    ) {
      return res;
    }

    // Expired or under-scoped token, or the registry changed its mind about auth: retry once.
    const fresh = usableChallenge(
      pickChallenge(parseChallenges(res.headers.get("www-authenticate"))),
      challenge,
    );
    if (fresh) {
      challenge = fresh;
      // Remember a changed scheme/realm so later calls do not start with a doomed attempt.
      if (
        this.#pingResult && (ping.challenge?.scheme !== fresh.scheme ||
          ping.challenge?.params.realm !== fresh.params.realm)
      ) {
        this.#pingResult = { scheme: ping.scheme, challenge: fresh };
      }
    }
    if (challenge?.scheme === "bearer") {
      const wanted = fresh?.params.scope;
      this.#tokens.invalidate(scopes);
      if (wanted && !scopes.includes(wanted)) {
        scopes = [wanted, ...scopes];
        this.#widenedScopes.set(scopeKey, scopes);
        // Keys name repositories, and VMs come and go: keep the newest only.
        if (this.#widenedScopes.size > MAX_WIDENED_SCOPES) {
          this.#widenedScopes.delete(this.#widenedScopes.keys().next().value!);
        }
      }
    }
    logger.debug("{action}: 401, retrying once with fresh {scheme} credentials", {
      action: req.action,
      scheme: challenge?.scheme ?? "no",
    });
    header = await this.#authorization(req, authn, challenge, scopes, ping.scheme, signal);
    res = await this.#exchange(req, ping.scheme, header, signal);
    return res;
  }

  /** Forgets the cached ping and tokens (e.g. after the registry was reconfigured). */
  reset(): void {
    this.#ping = undefined;
    this.#pingResult = undefined;
    this.#tokens.clear();
    this.#widenedScopes.clear();
  }

  async #authorization(
    req: SessionRequest,
    authn: Authenticator,
    challenge: Challenge | undefined,
    scopes: string[],
    scheme: "http" | "https",
    signal?: AbortSignal,
  ): Promise<string | undefined> {
    try {
      if (challenge?.scheme === "bearer") {
        // The exchange is shared by every caller wanting these scopes, so its errors name the
        // scopes only; each caller puts its own repo:tag in front.
        const token = await abortable(
          this.#tokens.getOrFetch(
            scopes,
            () => this.#fetchToken(authn, challenge, scopes, scheme),
          ),
          signal,
        );
        return `Bearer ${token}`;
      }
      // 200 ping or a Basic challenge: present credentials directly, as ggcr's basic transport.
      return basicHeader(await this.#credential(authn, signal));
    } catch (err) {
      throw inContext(req.action, err, signal);
    }
  }

  async #credential(authn: Authenticator, signal?: AbortSignal): Promise<Credential> {
    try {
      return await authn.authorization(signal);
    } catch (err) {
      if (signal?.aborted && err === signal.reason) throw err;
      throw new Error(`getting ${authn.source} credentials: ${errorMessage(err)}`, {
        cause: err,
      });
    }
  }

  async #fetchToken(
    authn: Authenticator,
    challenge: Challenge,
    scopes: string[],
    scheme: "http" | "https",
    signal?: AbortSignal,
  ): Promise<{ token: string; expiresIn?: number }> {
    const realmParam = challenge.params.realm;
    if (!realmParam) {
      throw new Error("malformed www-authenticate, missing realm");
    }
    const insecure = scheme === "http";
    const realm = validateRealm(realmParam, this.registry, insecure);
    const cred = await this.#credential(authn, signal);
    if (cred.registryToken) return { token: cred.registryToken };
    const service = challenge.params.service ?? "";
    const refresh = this.#refreshTokens.get(authn) ?? cred.identityToken;
    const endpoint = `token endpoint ${realm.origin}${realm.pathname}`;

    let res: HttpResult | undefined;
    if (refresh) {
      // OAuth2 refresh-token flow; token servers without it answer 404, then use the GET form.
      const form = new URLSearchParams({ scope: scopes.join(" "), client_id: CLIENT_ID });
      if (service) form.set("service", service);
      form.set("grant_type", "refresh_token");
      form.set("refresh_token", refresh);
      res = await this.#tokenRequest(endpoint, realm, insecure, {
        method: "POST",
        headers: { "Content-Type": "application/x-www-form-urlencoded" },
        body: form.toString(),
      }, signal);
      if (res.status === 404) res = undefined;
    }
    if (!res) {
      const url = new URL(realm);
      for (const s of scopes) url.searchParams.append("scope", s);
      url.searchParams.set("service", service);
      const headers: Record<string, string> = {};
      const basic = basicHeader(cred);
      if (basic?.startsWith("Basic ")) headers.Authorization = basic;
      res = await this.#tokenRequest(endpoint, url, insecure, {
        method: "GET",
        headers,
      }, signal);
    }
    if (res.status !== 200) {
      const diags = parseDiagnostics(res.body);
      const who = authn.source === "anonymous" ? " (no matching credentials were found)" : "";
      throw new RegistryError(
        `${endpoint} refused the token request${who}`,
        res.status,
        res.statusText,
        diags,
        diags.length ? "" : oauthErrorOnly(res.body),
      );
    }
    const parsed = parseBearerResponse(res.body);
    if (!parsed) throw new Error(`${endpoint} returned no token`);
    if (parsed.refreshToken) this.#refreshTokens.set(authn, parsed.refreshToken);
    logger.debug("got a registry token for {scopes} (expires_in {expiresIn})", {
      scopes: scopes.join(" "),
      expiresIn: parsed.expiresIn ?? "unset",
    });
    return parsed;
  }

  #tokenRequest(
    endpoint: string,
    url: URL,
    insecure: boolean,
    init: { method: string; headers: Record<string, string>; body?: string },
    signal?: AbortSignal,
  ): Promise<HttpResult> {
    return this.#timed(
      endpoint,
      signal,
      (s) =>
        this.#fetchAll(url, init.method, init.headers, init.body, s, { kind: "token", insecure }),
    );
  }

  #pingOnce(): Promise<Ping> {
    if (this.#pingResult) return Promise.resolve(this.#pingResult);
    this.#ping ??= this.#doPing().then(
      (p) => {
        this.#pingResult = p;
        return p;
      },
      (err) => {
        this.#ping = undefined;
        throw err;
      },
    );
    return this.#ping;
  }

  /**
   * https only; plain http only for a host allowed by name (no https attempt, so no race); for
   * loopback hosts http joins the race after 300 ms or on failure (nothing leaves the machine).
   */
  async #doPing(signal?: AbortSignal): Promise<Ping> {
    if (this.#plainHttp === "never") return await this.#pingScheme("https", signal);
    if (this.#plainHttp === "only") return await this.#pingScheme("http", signal);
    const ac = new AbortController();
    const onAbort = () => ac.abort(signal?.reason);
    signal?.addEventListener("abort", onAbort, { once: true });
    const linked = ac.signal;
    try {
      return await new Promise<Ping>((resolve, reject) => {
        const errors: unknown[] = [];
        let settled = false;
        let fallbackStarted = false;
        const done = (err: unknown) => {
          errors.push(err);
          if (errors.length === 2 && !settled) {
            settled = true;
            reject(
              new Error(`ping ${this.registry}: ${errors.map(errorMessage).join("; ")}`, {
                cause: errors[0],
              }),
            );
          }
        };
        const win = (p: Ping) => {
          if (settled) return;
          settled = true;
          resolve(p);
        };
        const startFallback = () => {
          if (fallbackStarted) return;
          fallbackStarted = true;
          clearTimeout(timer);
          this.#pingScheme("http", linked).then(win, done);
        };
        const timer = setTimeout(startFallback, HTTP_FALLBACK_DELAY_MS);
        this.#pingScheme("https", linked).then(win, (err) => {
          done(err);
          startFallback();
        });
        linked.addEventListener("abort", () => clearTimeout(timer), { once: true });
      });
    } finally {
      // Stop the losing attempt; its rejection is already handled above.
      ac.abort(new Error("ping settled"));
      signal?.removeEventListener("abort", onAbort);
    }
  }

  async #pingScheme(scheme: "http" | "https", signal?: AbortSignal): Promise<Ping> {
    const url = new URL(`${scheme}://${this.registry}/v2/`);
    const res = await this.#timed(
      `GET ${url}`,
      signal,
      (s) => this.#fetchAll(url, "GET", {}, undefined, s, { kind: "ping" }),
    );
    if (res.status === 200) {
      logger.debug("registry {registry} speaks {scheme}, no auth challenge", {
        registry: this.registry,
        scheme,
      });
      return { scheme };
    }
    if (res.status === 401) {
      const challenge = pickChallenge(parseChallenges(res.headers.get("www-authenticate"))) ??
        { scheme: (res.headers.get("www-authenticate") ?? "").toLowerCase(), params: {} };
      logger.debug("registry {registry} speaks {scheme}, auth challenge {challenge}", {
        registry: this.registry,
        scheme,
        challenge: challenge.scheme,
      });
      return { scheme, challenge };
    }
    throw new RegistryError(
      `ping GET ${url}`,
      res.status,
      res.statusText,
      parseDiagnostics(res.body),
      res.body,
    );
  }

  async #exchange(
    req: SessionRequest,
    scheme: "http" | "https",
    authorization: string | undefined,
    signal?: AbortSignal,
  ): Promise<HttpResult> {
    const url = new URL(req.path, registryUrl(scheme, this.registry));
    const headers: Record<string, string> = { ...req.headers };
    if (authorization) headers.Authorization = authorization;
    return await this.#timed(
      req.action,
      signal,
      (s) => this.#fetchAll(url, req.method, headers, undefined, s, { kind: "registry" }),
    );
  }

  #timed(
    what: string,
    signal: AbortSignal | undefined,
    fn: (s: AbortSignal) => Promise<HttpResult>,
  ) {
    return withDeadline(what, this.#timeoutMs, signal, fn).catch((err) => {
      if (err instanceof DeadlineError || err instanceof RegistryError) throw err;
      if (signal?.aborted) throw err;
      throw new Error(`${what}: ${errorMessage(err)}`, { cause: err });
    });
  }

  /**
   * fetch + read the body, following redirects by hand so Authorization only goes where it was
   * meant for: the request's own host (compared canonically, so `host:443` is `host`), never
   * over a downgrade to plain http. See RedirectPolicy for the rest.
   */
  async #fetchAll(
    url: URL,
    method: string,
    headers: Record<string, string>,
    body: string | undefined,
    signal: AbortSignal,
    policy: RedirectPolicy,
  ): Promise<HttpResult> {
    let current = url;
    let currentMethod = method;
    let currentBody = body;
    for (let hop = 0;; hop++) {
      const h = new Headers(headers);
      if (!mayCarryCredentials(url, current)) h.delete("Authorization");
      const res = await this.#fetch(current, {
        method: currentMethod,
        headers: h,
        body: currentBody,
        redirect: "manual",
        signal,
      });
      const location = res.headers.get("location");
      // Method changes follow the Fetch standard (301/302 turn only POST into GET, 303 turns
      // anything but HEAD into GET), except that a DELETE is never turned into a GET: a 200 from
      // that GET would read as a successful deletion. A 303 to a DELETE is its final answer.
      const follow = res.status >= 300 && res.status < 400 && location !== null &&
        hop < MAX_REDIRECTS && !(res.status === 303 && currentMethod === "DELETE");
      if (follow) {
        await res.body?.cancel();
        const next = new URL(location, current);
        this.#checkRedirect(policy, current, next, currentBody !== undefined && res.status >= 307);
        if (
          (res.status === 303 && currentMethod !== "HEAD" && currentMethod !== "GET") ||
          ((res.status === 301 || res.status === 302) && currentMethod === "POST")
        ) {
          currentMethod = "GET";
          currentBody = undefined;
        }
        current = next;
        continue;
      }
      const text = currentMethod === "HEAD"
        ? (await res.body?.cancel(), "")
        : await readCapped(res, MAX_BODY);
      return {
        status: res.status,
        statusText: res.statusText,
        headers: res.headers,
        body: text,
        url: current,
      };
    }
  }

  /** Throws when policy forbids following a redirect from current to next. */
  #checkRedirect(policy: RedirectPolicy, current: URL, next: URL, resendsBody: boolean): void {
    if (policy.kind === "registry") return;
    if (current.protocol === "https:" && next.protocol === "http:") {
      throw new Error(`refusing redirect from https to http (${next.origin})`);
    }
    if (policy.kind !== "token") return;
    try {
      validateRealm(next.href, this.registry, policy.insecure);
    } catch (err) {
      throw new Error(`refusing token-server redirect to ${next.origin}: ${errorMessage(err)}`);
    }
    // 307/308 replay the body, and a token request body carries the refresh token.
    if (resendsBody && next.origin !== current.origin) {
      throw new Error(
        `refusing token-server redirect to ${next.origin}: it would resend the request body`,
      );
    }
  }
}

/** The host of `host[:port]` (brackets of an IPv6 literal kept). */
function hostOf(registry: string): string {
  return registry.replace(/:\d{1,5}$/, "");
}

/** The registry's root URL; its host is canonical (lower case, no default port). */
function registryUrl(scheme: "http" | "https", registry: string): URL {
  return new URL(`${scheme}://${registry}/`);
}

/**
 * The challenge to act on after a 401, or undefined to keep the one we have. A Bearer challenge
 * may omit realm and service (RFC 6750 allows `Bearer error="invalid_token"`): those come from
 * the known challenge, since adopting a realm-less one would break every later token exchange.
 */
function usableChallenge(
  fresh: Challenge | undefined,
  known: Challenge | undefined,
): Challenge | undefined {
  if (!fresh || fresh.scheme !== "bearer" || fresh.params.realm) return fresh;
  if (known?.scheme !== "bearer" || !known.params.realm) return undefined;
  const params: Record<string, string> = { ...fresh.params, realm: known.params.realm };
  if (fresh.params.service === undefined && known.params.service !== undefined) {
    params.service = known.params.service;
  }
  return { scheme: "bearer", params };
}

/** Whether a request first addressed to origin may carry its credentials to target. */
function mayCarryCredentials(origin: URL, target: URL): boolean {
  if (target.host !== origin.host) return false;
  return !(origin.protocol === "https:" && target.protocol === "http:");
}

/**
 * A shared failure (ping, credential lookup) restated for one caller's request, keeping its
 * class so callers can still tell a registry answer or a timeout apart. The caller's own abort
 * reason passes through untouched.
 */
function inContext(action: string, err: unknown, signal: AbortSignal | undefined): unknown {
  if (signal?.aborted && err === signal.reason) return err;
  if (err instanceof RegistryError) return err.prefixed(action);
  if (err instanceof DeadlineError) return new DeadlineError(`${action}: ${err.what}`, err.ms);
  return new Error(`${action}: ${errorMessage(err)}`, { cause: err });
}

/** The Authorization value for a credential outside a Bearer flow, if it has one. */
function basicHeader(cred: Credential): string | undefined {
  if (cred.registryToken) return `Bearer ${cred.registryToken}`;
  if (cred.username && cred.password) {
    const bytes = new TextEncoder().encode(`${cred.username}:${cred.password}`);
    let bin = "";
    for (const b of bytes) bin += String.fromCharCode(b);
    return `Basic ${btoa(bin)}`;
  }
  return undefined;
}

function parseBearerResponse(
  text: string,
): { token: string; expiresIn?: number; refreshToken?: string } | undefined {
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    return undefined;
  }
  if (!isRecord(body)) return undefined;
  // Some registries answer access_token instead of token.
  const token = typeof body.access_token === "string" && body.access_token
    ? body.access_token
    : typeof body.token === "string"
    ? body.token
    : "";
  if (!token) return undefined;
  return {
    token,
    expiresIn: typeof body.expires_in === "number" ? body.expires_in : undefined,
    refreshToken: typeof body.refresh_token === "string" && body.refresh_token
      ? body.refresh_token
      : undefined,
  };
}

/** Keeps only the OAuth `error`/`error_description` of a token error body (nothing echoed). */
function oauthErrorOnly(text: string): string {
  try {
    const body: unknown = JSON.parse(text);
    if (isRecord(body) && typeof body.error === "string") {
      return typeof body.error_description === "string"
        ? `${body.error}: ${body.error_description}`
        : body.error;
    }
  } catch {
    // not JSON
  }
  return "";
}
