/**
 * Credentials and where they come from. A Keychain maps a registry target to an Authenticator
 * (or undefined: "I have nothing, ask the next one"); a chain asks each keychain in order and
 * falls back to anonymous, as go-containerregistry's MultiKeychain does.
 */

/**
 * What a registry credential can hold (docker config's AuthConfig): Basic username/password, an
 * OAuth2 refresh token for the token endpoint (identitytoken), or a ready bearer token.
 */
export interface Credential {
  /** Basic auth user (for Google tokens, "_token"). */
  username?: string;
  /** Basic auth password or access token. */
  password?: string;
  /** OAuth2 refresh token, exchanged at the registry's token endpoint. */
  identityToken?: string;
  /** A bearer token sent as is. */
  registryToken?: string;
}

/** Produces a credential on demand; token-backed sources refresh inside. */
export interface Authenticator {
  /** Short label for logs, e.g. "docker-config" or "google-adc"; never secret. */
  readonly source: string;
  /** The credential to use now (refreshed when it expires). */
  authorization(signal?: AbortSignal): Promise<Credential>;
}

/** What a keychain is asked about: the registry host and the full repository name. */
export interface AuthTarget {
  /** `host[:port]` as written in OCI_REGISTRY (index.docker.io for Docker Hub). */
  registry: string;
  /** Repository path inside the registry, e.g. `proj/repo/vk-ns-demo-0`. */
  repository: string;
}

/** Resolves credentials for a target; undefined means "none here". */
export interface Keychain {
  /** The authenticator for target, or undefined to let the next keychain answer. */
  resolve(target: AuthTarget, signal?: AbortSignal): Promise<Authenticator | undefined>;
}

/** The anonymous authenticator: no credential at all. */
export const ANONYMOUS: Authenticator = {
  source: "anonymous",
  authorization: () => Promise.resolve({}),
};

/** An authenticator returning a fixed credential. */
export function staticAuthenticator(source: string, cred: Credential): Authenticator {
  const copy = { ...cred };
  return { source, authorization: () => Promise.resolve({ ...copy }) };
}

/** Whether a credential carries anything at all. */
export function isEmptyCredential(c: Credential): boolean {
  return !c.username && !c.password && !c.identityToken && !c.registryToken;
}

/**
 * Asks each keychain in order and returns the first authenticator found, else ANONYMOUS.
 * An error from a keychain stops the search (a broken config file is reported, not skipped).
 */
export function chainKeychains(...keychains: Keychain[]): Keychain {
  return {
    async resolve(target, signal) {
      for (const kc of keychains) {
        const auth = await kc.resolve(target, signal);
        if (auth && auth !== ANONYMOUS) return auth;
      }
      return ANONYMOUS;
    },
  };
}
