/**
 * Registry bearer tokens cached per scope set until they expire. The token spec says a missing
 * `expires_in` means 60 seconds; tokens are dropped a few seconds early so one never expires
 * between the cache check and the registry reading it. Concurrent misses for the same scopes
 * share one fetch.
 */

/** Lifetime assumed when the token endpoint does not say (distribution token spec). */
const DEFAULT_TOKEN_TTL_SECONDS = 60;
/** Tokens are treated as expired this long before their stated expiry. */
const TOKEN_EXPIRY_MARGIN_MS = 5_000;
/** How often set() sweeps out expired tokens (scopes name repositories, and VMs come and go). */
const SWEEP_INTERVAL_MS = 60_000;

interface Entry {
  token: string;
  expiresAt: number;
}

/** Per-scope token cache; see module doc. */
export class TokenCache {
  readonly #entries = new Map<string, Entry>();
  readonly #pending = new Map<string, Promise<string>>();
  readonly #now: () => number;
  #nextSweep: number;

  constructor(now: () => number = Date.now) {
    this.#now = now;
    this.#nextSweep = now() + SWEEP_INTERVAL_MS;
  }

  /** Number of stored tokens (expired ones linger until the next sweep). */
  get size(): number {
    return this.#entries.size;
  }

  /** Cache key of a scope list: order-insensitive. */
  static key(scopes: string[]): string {
    return [...new Set(scopes)].sort().join(" ");
  }

  /** The cached, unexpired token for scopes, if any. */
  get(scopes: string[]): string | undefined {
    const key = TokenCache.key(scopes);
    const e = this.#entries.get(key);
    if (!e) return undefined;
    if (e.expiresAt - TOKEN_EXPIRY_MARGIN_MS <= this.#now()) {
      this.#entries.delete(key);
      return undefined;
    }
    return e.token;
  }

  /** Stores token for scopes, valid for expiresInSeconds (default 60 when absent or invalid). */
  set(scopes: string[], token: string, expiresInSeconds?: number): void {
    const ttl = expiresInSeconds !== undefined && Number.isFinite(expiresInSeconds) &&
        expiresInSeconds > 0
      ? expiresInSeconds
      : DEFAULT_TOKEN_TTL_SECONDS;
    const now = this.#now();
    if (now >= this.#nextSweep) {
      // Without this, every repository ever touched would keep its dead token for good.
      this.#nextSweep = now + SWEEP_INTERVAL_MS;
      for (const [key, e] of this.#entries) {
        if (e.expiresAt - TOKEN_EXPIRY_MARGIN_MS <= now) this.#entries.delete(key);
      }
    }
    this.#entries.set(TokenCache.key(scopes), { token, expiresAt: now + ttl * 1000 });
  }

  /** Forgets the token for scopes (e.g. after the registry rejected it). */
  invalidate(scopes: string[]): void {
    this.#entries.delete(TokenCache.key(scopes));
  }

  /** Forgets every token. */
  clear(): void {
    this.#entries.clear();
  }

  /**
   * The cached token for scopes, else the result of fetchToken (stored with its lifetime).
   * Callers racing on the same scopes share one fetchToken call.
   */
  getOrFetch(
    scopes: string[],
    fetchToken: () => Promise<{ token: string; expiresIn?: number }>,
  ): Promise<string> {
    const cached = this.get(scopes);
    if (cached !== undefined) return Promise.resolve(cached);
    const key = TokenCache.key(scopes);
    let p = this.#pending.get(key);
    if (!p) {
      p = fetchToken().then((t) => {
        this.set(scopes, t.token, t.expiresIn);
        return t.token;
      }).finally(() => this.#pending.delete(key));
      this.#pending.set(key, p);
    }
    return p;
  }
}
