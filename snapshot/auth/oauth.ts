/**
 * OAuth2 access tokens: a source interface, a reusing wrapper (refresh 10 s before expiry, as
 * golang.org/x/oauth2 does) and the form-POST token request the Google flows share.
 */

import { isRecord, readCapped } from "../errors.ts";
import { abortable, type FetchFn, withDeadline } from "../deadline.ts";

/** An access token and when it stops being usable (ms since epoch; Infinity when unknown). */
export interface AccessToken {
  accessToken: string;
  expiresAt: number;
  /** A rotated refresh token, when the endpoint returned one. */
  refreshToken?: string;
}

/** Produces access tokens. */
export interface TokenSource {
  token(signal?: AbortSignal): Promise<AccessToken>;
}

/** Refresh this long before expiry so a token never expires in flight. */
const EXPIRY_DELTA_MS = 10_000;

/**
 * Caches the last token of src until EXPIRY_DELTA_MS before it expires; concurrent callers
 * share one refresh. The shared refresh runs under the source's own timeout, not any caller's
 * signal: one caller giving up must not fail the others, and each caller still stops waiting
 * when its own signal aborts.
 */
export function reuseTokenSource(src: TokenSource, now: () => number = Date.now): TokenSource {
  let current: AccessToken | undefined;
  let pending: Promise<AccessToken> | undefined;
  return {
    token(signal) {
      if (current && current.expiresAt - EXPIRY_DELTA_MS > now()) return Promise.resolve(current);
      pending ??= src.token().then(
        (t) => {
          current = t;
          pending = undefined;
          return t;
        },
        (err) => {
          pending = undefined;
          throw err;
        },
      );
      return abortable(pending, signal);
    },
  };
}

/** Options shared by HTTP token endpoints. */
export interface TokenEndpointOptions {
  fetch?: FetchFn;
  timeoutMs?: number;
  now?: () => number;
}

/**
 * POSTs form to an OAuth2 token endpoint and parses `{access_token, expires_in}`. Failures name
 * the endpoint, status and the OAuth `error` code, never the form (it carries secrets).
 */
export async function requestToken(
  what: string,
  url: string,
  form: Record<string, string>,
  opts: TokenEndpointOptions,
  signal?: AbortSignal,
): Promise<AccessToken> {
  const doFetch = opts.fetch ?? fetch;
  const now = opts.now ?? Date.now;
  return await withDeadline(
    `${what} token request to ${url}`,
    opts.timeoutMs ?? 30_000,
    signal,
    async (s) => {
      const res = await doFetch(url, {
        method: "POST",
        headers: {
          "Content-Type": "application/x-www-form-urlencoded",
          Accept: "application/json",
        },
        body: new URLSearchParams(form).toString(),
        signal: s,
      });
      const text = await readCapped(res, 64 * 1024);
      if (!res.ok) {
        throw new Error(
          `${what}: token endpoint ${url} answered ${res.status}${oauthError(text)}`,
        );
      }
      return parseTokenResponse(what, text, now());
    },
  );
}

/** Parses a token JSON body (`access_token`, optional `expires_in` seconds, `refresh_token`). */
export function parseTokenResponse(what: string, text: string, nowMs: number): AccessToken {
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    throw new Error(`${what}: token response is not JSON`);
  }
  if (!isRecord(body) || typeof body.access_token !== "string" || body.access_token === "") {
    throw new Error(`${what}: token response has no access_token`);
  }
  const expiresIn = typeof body.expires_in === "number"
    ? body.expires_in
    : typeof body.expires_in === "string"
    ? Number(body.expires_in)
    : NaN;
  return {
    accessToken: body.access_token,
    expiresAt: Number.isFinite(expiresIn) && expiresIn > 0 ? nowMs + expiresIn * 1000 : Infinity,
    refreshToken: typeof body.refresh_token === "string" && body.refresh_token
      ? body.refresh_token
      : undefined,
  };
}

function oauthError(text: string): string {
  try {
    const body: unknown = JSON.parse(text);
    if (isRecord(body) && typeof body.error === "string") {
      const desc = typeof body.error_description === "string" ? `: ${body.error_description}` : "";
      return ` (${body.error}${desc})`;
    }
  } catch {
    // not JSON: say nothing more
  }
  return "";
}
