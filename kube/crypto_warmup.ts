/**
 * Start-up: a Deno process's first TLS handshake initialises the crypto library behind rustls
 * (its random generator) on the main thread, delaying the first request to the API server. A
 * WebCrypto ECDSA key generation runs on Deno's blocking-task pool and goes through the same
 * initialisation, so starting one first moves that cost off the main thread, beside module
 * loading (figures: docs/architecture.md, "Start-up"). The key is thrown away; a failure only
 * leaves the cost to the handshake.
 *
 * Import it first, for its effect: `import "./kube/crypto_warmup.ts";`.
 *
 * @module
 */

/** Settles once the warm-up key was generated or failed; never rejects. */
export const cryptoWarmedUp: Promise<void> = crypto.subtle
  .generateKey({ name: "ECDSA", namedCurve: "P-256" }, false, ["sign"])
  .then(() => {}, () => {});
