/**
 * Google credentials for Google-hosted registries (GCR and Artifact Registry), following
 * go-containerregistry's google.Keychain on top of golang.org/x/oauth2's Application Default
 * Credentials:
 *  - only for hosts `gcr.io`, `*.gcr.io`, `*.pkg.dev`, `*.google.com` (other hosts fall through
 *    to the next keychain);
 *  - ADC order: the JSON file in GOOGLE_APPLICATION_CREDENTIALS (a broken one is an error), the
 *    gcloud well-known file `$HOME/.config/gcloud/application_default_credentials.json`, then the
 *    GCE metadata server when running on GCE (GCE_METADATA_HOST set, or the metadata address
 *    answers with `Metadata-Flavor: Google`);
 *  - file types: `service_account` (RS256 JWT assertion exchanged at the key's token_uri) and
 *    `authorized_user` (refresh-token exchange);
 *  - the registry sees Basic `_token:<access token>`; tokens are reused until 10 s before expiry.
 * Not ported: the `gcloud config config-helper` fallback (would spawn gcloud), external-account
 * and impersonation file types, and the DNS half of GCE detection.
 */

import { getLogger } from "@logtape/logtape";
import { isRecord } from "../errors.ts";
import { errorMessage } from "../../kube/errors.ts";
import { GOOGLE_TOKEN_URL, isGoogleHost } from "./google_endpoints.ts";
import { abortable, withDeadline } from "../deadline.ts";
import { type EnvGetter, processEnv, readFile, readIfExists, type TextFileReader } from "./env.ts";
import { importRs256Key, signRs256 } from "./jwt.ts";
import type { Authenticator, AuthTarget, Keychain } from "./keychain.ts";
import {
  type AccessToken,
  parseTokenResponse,
  requestToken,
  reuseTokenSource,
  type TokenEndpointOptions,
  type TokenSource,
} from "./oauth.ts";

const logger = getLogger(["cocoon-operator", "snapshot"]);

/** OAuth scope requested for registry access. */
export const CLOUD_PLATFORM_SCOPE = "https://www.googleapis.com/auth/cloud-platform";
/** Username Google registries expect alongside an access token. */
const GOOGLE_TOKEN_USERNAME = "_token";
const METADATA_IP = "169.254.169.254";
const JWT_BEARER_GRANT = "urn:ietf:params:oauth:grant-type:jwt-bearer";

/** Options of the Google credential sources (all injectable for tests). */
export interface GoogleOptions extends TokenEndpointOptions {
  env?: EnvGetter;
  readTextFile?: TextFileReader;
  /** Overrides GCE detection (default: GCE_METADATA_HOST set, else probe the metadata server). */
  onGce?: (signal?: AbortSignal) => Promise<boolean>;
  /** After a failed resolution, wait this long before trying again (default 30 s). */
  retryAfterFailureMs?: number;
}

/** A parsed service-account key file (fields this client uses). */
export interface ServiceAccountKey {
  client_email: string;
  private_key: string;
  private_key_id?: string;
  token_uri?: string;
}

/** A parsed gcloud user credentials file. */
export interface AuthorizedUser {
  client_id: string;
  client_secret: string;
  refresh_token: string;
  token_uri?: string;
}

/**
 * Token source exchanging a signed JWT assertion (iss = client_email, scope, aud = token_uri,
 * iat = now - 10 s, exp = iat + 1 h, kid = private_key_id) at the key's token_uri.
 */
function serviceAccountSource(
  key: ServiceAccountKey,
  scopes: string[],
  opts: TokenEndpointOptions = {},
): TokenSource {
  const tokenUri = key.token_uri || GOOGLE_TOKEN_URL;
  const now = opts.now ?? Date.now;
  let cryptoKey: Promise<CryptoKey> | undefined;
  return {
    async token(signal) {
      cryptoKey ??= importRs256Key(key.private_key).catch((err) => {
        cryptoKey = undefined;
        throw new Error(`service account ${key.client_email}: cannot import private_key`, {
          cause: err,
        });
      });
      const iat = Math.floor(now() / 1000) - 10;
      const header: Record<string, unknown> = { typ: "JWT" };
      if (key.private_key_id) header.kid = key.private_key_id;
      const assertion = await signRs256(header, {
        iss: key.client_email,
        scope: scopes.join(" "),
        aud: tokenUri,
        iat,
        exp: iat + 3600,
      }, await cryptoKey);
      return await requestToken(
        `service account ${key.client_email}`,
        tokenUri,
        { grant_type: JWT_BEARER_GRANT, assertion },
        opts,
        signal,
      );
    },
  };
}

/** Token source redeeming a gcloud user's refresh token (client id/secret in the form). */
function authorizedUserSource(
  user: AuthorizedUser,
  opts: TokenEndpointOptions = {},
): TokenSource {
  const tokenUri = user.token_uri || GOOGLE_TOKEN_URL;
  let refreshToken = user.refresh_token;
  return {
    async token(signal) {
      const tok = await requestToken(
        "authorized user",
        tokenUri,
        {
          grant_type: "refresh_token",
          refresh_token: refreshToken,
          client_id: user.client_id,
          client_secret: user.client_secret,
        },
        opts,
        signal,
      );
      if (tok.refreshToken) refreshToken = tok.refreshToken;
      return tok;
    },
  };
}

/** The metadata server host: GCE_METADATA_HOST or the link-local address. */
function metadataHost(env: EnvGetter): string {
  return env("GCE_METADATA_HOST") || METADATA_IP;
}

/** Token source for the GCE default service account, from the metadata server. */
function metadataSource(
  env: EnvGetter,
  scopes: string[],
  opts: TokenEndpointOptions = {},
): TokenSource {
  const doFetch = opts.fetch ?? fetch;
  const now = opts.now ?? Date.now;
  return {
    async token(signal) {
      const query = scopes.length ? `?${new URLSearchParams({ scopes: scopes.join(",") })}` : "";
      const url = `http://${
        metadataHost(env)
      }/computeMetadata/v1/instance/service-accounts/default/token${query}`;
      return await withDeadline(
        "metadata token request",
        opts.timeoutMs ?? 30_000,
        signal,
        async (s) => {
          const res = await doFetch(url, { headers: { "Metadata-Flavor": "Google" }, signal: s });
          const text = await res.text();
          if (!res.ok) {
            throw new Error(
              `metadata server answered ${res.status} for the token request`,
            );
          }
          const tok: AccessToken = parseTokenResponse("metadata server", text, now());
          if (tok.expiresAt === Infinity) {
            throw new Error("metadata server: incomplete token received (no expires_in)");
          }
          return tok;
        },
      );
    },
  };
}

/** Whether the process runs on GCE: GCE_METADATA_HOST set, or the metadata root says so. */
export async function detectGce(
  env: EnvGetter,
  opts: TokenEndpointOptions = {},
  signal?: AbortSignal,
): Promise<boolean> {
  if (env("GCE_METADATA_HOST")) return true;
  const doFetch = opts.fetch ?? fetch;
  try {
    return await withDeadline("metadata probe", 5_000, signal, async (s) => {
      const res = await doFetch(`http://${METADATA_IP}`, { signal: s });
      await res.body?.cancel();
      return res.headers.get("Metadata-Flavor") === "Google";
    });
  } catch {
    return false;
  }
}

/**
 * Finds Application Default Credentials; undefined when there are none. Throws when
 * GOOGLE_APPLICATION_CREDENTIALS names a file that cannot be used.
 */
export async function findDefaultCredentials(
  opts: GoogleOptions = {},
  signal?: AbortSignal,
): Promise<
  { source: string; tokens: TokenSource } | undefined
> {
  const env = opts.env ?? processEnv;
  const read = opts.readTextFile ?? readFile;
  const scopes = [CLOUD_PLATFORM_SCOPE];
  const named = env("GOOGLE_APPLICATION_CREDENTIALS");
  if (named) {
    let text: string;
    try {
      text = await read(named);
    } catch (err) {
      throw new Error(`google: cannot read GOOGLE_APPLICATION_CREDENTIALS file ${named}`, {
        cause: err,
      });
    }
    return { source: "google-adc-file", tokens: credentialsFromJson(named, text, scopes, opts) };
  }
  const home = env("HOME");
  if (home) {
    const wellKnown = `${home}/.config/gcloud/application_default_credentials.json`;
    const text = await readIfExists(read, wellKnown);
    if (text !== undefined) {
      return {
        source: "google-adc-gcloud",
        tokens: credentialsFromJson(wellKnown, text, scopes, opts),
      };
    }
  }
  const onGce = opts.onGce ?? ((s?: AbortSignal) => detectGce(env, opts, s));
  if (await onGce(signal)) {
    return { source: "google-metadata", tokens: metadataSource(env, scopes, opts) };
  }
  return undefined;
}

/** Builds a token source from a credentials JSON file's text (messages never quote the file). */
function credentialsFromJson(
  path: string,
  text: string,
  scopes: string[],
  opts: TokenEndpointOptions = {},
): TokenSource {
  let doc: unknown;
  try {
    doc = JSON.parse(text);
  } catch {
    throw new Error(`google: credentials file ${path} is not valid JSON`);
  }
  if (!isRecord(doc)) throw new Error(`google: credentials file ${path} is not a JSON object`);
  const str = (k: string) => (typeof doc[k] === "string" ? doc[k] as string : "");
  switch (doc.type) {
    case "service_account":
      if (!str("client_email") || !str("private_key")) {
        throw new Error(`google: service account file ${path} lacks client_email or private_key`);
      }
      return serviceAccountSource(
        {
          client_email: str("client_email"),
          private_key: str("private_key"),
          private_key_id: str("private_key_id") || undefined,
          token_uri: str("token_uri") || undefined,
        },
        scopes,
        opts,
      );
    case "authorized_user":
      if (!str("refresh_token")) {
        throw new Error(`google: authorized user file ${path} lacks refresh_token`);
      }
      return authorizedUserSource({
        client_id: str("client_id"),
        client_secret: str("client_secret"),
        refresh_token: str("refresh_token"),
        token_uri: str("token_uri") || undefined,
      }, opts);
    case undefined:
    case "":
      throw new Error(`google: credentials file ${path} is missing the 'type' field`);
    default:
      throw new Error(
        `google: credentials file ${path} has unsupported type ${JSON.stringify(doc.type)}`,
      );
  }
}

/** Wraps a token source as the Basic `_token:<access token>` credential Google registries take. */
function tokenAuthenticator(source: string, tokens: TokenSource): Authenticator {
  return {
    source,
    async authorization(signal) {
      const t = await tokens.token(signal);
      return { username: GOOGLE_TOKEN_USERNAME, password: t.accessToken };
    },
  };
}

/**
 * The Google keychain: resolves ADC once (checking a first token can be fetched) and reuses it
 * for every Google host. Deviation from the Go original, which caches a failure for the process
 * lifetime: a failed resolution is retried after retryAfterFailureMs, so a metadata server that
 * is late at startup does not leave the operator anonymous forever.
 */
export function googleKeychain(opts: GoogleOptions = {}): Keychain {
  const now = opts.now ?? Date.now;
  const retryAfter = opts.retryAfterFailureMs ?? 30_000;
  let resolved: Authenticator | undefined;
  let failedAt = -Infinity;
  let pending: Promise<Authenticator | undefined> | undefined;

  const resolveOnce = async (signal?: AbortSignal): Promise<Authenticator | undefined> => {
    try {
      const found = await findDefaultCredentials(opts, signal);
      if (!found) {
        logger.debug("no Google application default credentials found");
        failedAt = now();
        return undefined;
      }
      const tokens = reuseTokenSource(found.tokens, now);
      await tokens.token(signal);
      resolved = tokenAuthenticator(found.source, tokens);
      logger.debug("using Google credentials from {source}", { source: found.source });
      return resolved;
    } catch (err) {
      failedAt = now();
      logger.warn("Google credentials unavailable, falling back: {error}", {
        error: errorMessage(err),
      });
      return undefined;
    }
  };

  return {
    resolve(target: AuthTarget, signal?: AbortSignal) {
      if (!isGoogleHost(target.registry)) return Promise.resolve(undefined);
      if (resolved) return Promise.resolve(resolved);
      if (now() - failedAt < retryAfter) return Promise.resolve(undefined);
      // Shared by concurrent callers: runs under its own timeouts, each caller may stop waiting.
      pending ??= resolveOnce().finally(() => {
        pending = undefined;
      });
      return abortable(pending, signal);
    },
  };
}
