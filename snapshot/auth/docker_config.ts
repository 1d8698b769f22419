/**
 * Credentials from the Docker config file, located and matched the way go-containerregistry's
 * DefaultKeychain (with docker/cli's file store) does:
 *  - file: `$HOME/.docker/config.json`, else `$DOCKER_CONFIG/config.json`; when either exists the
 *    one loaded is `$DOCKER_CONFIG/config.json` if DOCKER_CONFIG is set, else the home one. With
 *    neither, Podman's `$REGISTRY_AUTH_FILE`, then `$XDG_RUNTIME_DIR/containers/auth.json`.
 *  - keys tried: `<registry>/<repository>`, then `<registry>` (Docker Hub as
 *    `https://index.docker.io/v1/`); each first exactly, then against every `auths` key reduced
 *    to its host (so `https://host/v1/` and `http://host` entries match `host`).
 *  - entry: `auth` = base64("user:pass") (wins over username/password), `identitytoken` (an
 *    OAuth2 refresh token), `registrytoken` (a bearer token used as is).
 * Credential helpers (`credsStore`, `credHelpers`) would run external programs; they are not
 * supported: a warning is logged and the plain `auths` entries are used.
 */

import { getLogger } from "@logtape/logtape";
import { isRecord } from "../errors.ts";
import { DOCKER_HUB_REGISTRY } from "../reference.ts";
import { type EnvGetter, processEnv, readFile, readIfExists, type TextFileReader } from "./env.ts";
import {
  type Authenticator,
  type AuthTarget,
  type Credential,
  isEmptyCredential,
  type Keychain,
  staticAuthenticator,
} from "./keychain.ts";

const logger = getLogger(["cocoon-operator", "snapshot"]);

/** The key Docker uses for Docker Hub, for historical reasons. */
const DOCKER_HUB_AUTH_KEY = "https://index.docker.io/v1/";

/** Parsed subset of config.json this client uses. */
export interface DockerConfig {
  /** Path the config came from (for messages). */
  path: string;
  auths: Map<string, Credential>;
  helpersConfigured: boolean;
}

/** Options of the Docker config keychain. */
export interface DockerConfigOptions {
  env?: EnvGetter;
  readTextFile?: TextFileReader;
}

/** A Keychain reading the Docker config on every resolve (the file may change at runtime). */
export function dockerConfigKeychain(opts: DockerConfigOptions = {}): Keychain {
  const env = opts.env ?? processEnv;
  const read = opts.readTextFile ?? readFile;
  let warned = false;
  return {
    async resolve(target: AuthTarget): Promise<Authenticator | undefined> {
      const cfg = await loadDockerConfig(env, read);
      if (!cfg) return undefined;
      if (cfg.helpersConfigured && !warned) {
        warned = true;
        logger.warn(
          "docker config {path} configures credential helpers, which are not supported; using its auths entries only",
          { path: cfg.path },
        );
      }
      const cred = lookupCredential(cfg, target);
      return cred ? staticAuthenticator("docker-config", cred) : undefined;
    },
  };
}

/** Finds and parses the config file; undefined when there is none. */
export async function loadDockerConfig(
  env: EnvGetter,
  read: TextFileReader,
): Promise<DockerConfig | undefined> {
  const home = env("HOME");
  const dockerConfigDir = env("DOCKER_CONFIG");
  const homePath = home ? `${home}/.docker/config.json` : undefined;
  const dirPath = dockerConfigDir ? `${dockerConfigDir}/config.json` : undefined;

  let found = homePath !== undefined && (await readIfExists(read, homePath)) !== undefined;
  if (!found && dirPath) found = (await readIfExists(read, dirPath)) !== undefined;
  if (found) {
    // docker/cli loads $DOCKER_CONFIG when set (an absent file there is an empty config).
    const path = dirPath ?? homePath!;
    const text = await readIfExists(read, path);
    return text === undefined ? undefined : parseDockerConfig(path, text);
  }
  for (const path of podmanPaths(env)) {
    const text = await readIfExists(read, path);
    if (text !== undefined) return parseDockerConfig(path, text);
  }
  return undefined;
}

function podmanPaths(env: EnvGetter): string[] {
  const paths: string[] = [];
  const authFile = env("REGISTRY_AUTH_FILE");
  if (authFile) paths.push(authFile);
  const runtimeDir = env("XDG_RUNTIME_DIR");
  if (runtimeDir) paths.push(`${runtimeDir}/containers/auth.json`);
  return paths;
}

/** Parses config.json text; throws (naming the file, never a secret) when malformed. */
export function parseDockerConfig(path: string, text: string): DockerConfig {
  let doc: unknown;
  try {
    doc = text.trim() === "" ? {} : JSON.parse(text);
  } catch {
    throw new Error(`docker config ${path}: not valid JSON`);
  }
  if (!isRecord(doc)) throw new Error(`docker config ${path}: not a JSON object`);
  const auths = new Map<string, Credential>();
  if (isRecord(doc.auths)) {
    for (const [key, entry] of Object.entries(doc.auths)) {
      if (!isRecord(entry)) continue;
      auths.set(key, parseEntry(path, key, entry));
    }
  }
  const helpersConfigured = (typeof doc.credsStore === "string" && doc.credsStore !== "") ||
    (isRecord(doc.credHelpers) && Object.keys(doc.credHelpers).length > 0);
  return { path, auths, helpersConfigured };
}

function parseEntry(path: string, key: string, e: Record<string, unknown>): Credential {
  const str = (v: unknown) => (typeof v === "string" ? v : undefined);
  const cred: Credential = {
    username: str(e.username),
    password: str(e.password),
    identityToken: str(e.identitytoken),
    registryToken: str(e.registrytoken),
  };
  const auth = str(e.auth);
  if (auth) {
    const decoded = decodeAuthField(auth);
    if (!decoded) {
      throw new Error(
        `docker config ${path}: invalid "auth" for ${key} (want base64 of user:pass)`,
      );
    }
    cred.username = decoded.username;
    cred.password = decoded.password;
  }
  return cred;
}

function decodeAuthField(field: string): { username: string; password: string } | undefined {
  let text: string;
  try {
    const bin = atob(field.trim());
    text = new TextDecoder().decode(Uint8Array.from(bin, (c) => c.charCodeAt(0)));
  } catch {
    return undefined;
  }
  const colon = text.indexOf(":");
  if (colon <= 0) return undefined;
  return { username: text.slice(0, colon), password: text.slice(colon + 1).replace(/\0+$/, "") };
}

/** The credential for target, trying the repository key before the registry key. */
export function lookupCredential(cfg: DockerConfig, target: AuthTarget): Credential | undefined {
  for (let key of [`${target.registry}/${target.repository}`, target.registry]) {
    if (key === DOCKER_HUB_REGISTRY) key = DOCKER_HUB_AUTH_KEY;
    const cred = lookupKey(cfg, key);
    if (cred && !isEmptyCredential(cred)) return cred;
  }
  return undefined;
}

function lookupKey(cfg: DockerConfig, key: string): Credential | undefined {
  const exact = cfg.auths.get(key);
  if (exact) return exact;
  for (const [entryKey, cred] of cfg.auths) {
    if (hostOf(entryKey) === key) return cred;
  }
  return undefined;
}

/**
 * Reduces a config key (`https://host:port/v1/`, `host/path`) to `host[:port]`, as docker/cli
 * does: the port stays exactly as written (URL parsing would drop a default `:443`, and then a
 * `host:443` registry would miss its entry), user info is dropped.
 */
export function hostOf(key: string): string {
  const scheme = key.indexOf("://");
  if (scheme >= 0) {
    const authority = key.slice(scheme + 3).split(/[/?#]/)[0];
    const host = authority.slice(authority.lastIndexOf("@") + 1);
    if (host !== "" && !host.startsWith(":")) return host;
  }
  return key.split("/")[0];
}
