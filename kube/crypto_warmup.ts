/**
 * Start-up: the first TLS handshake of a Deno process pays a one-time initialisation of the
 * crypto library behind rustls (its random generator; 40–60 ms of CPU on these machines), on
 * the main thread, where it delays the first request to the API server by as much. Generating
 * an ECDSA key through WebCrypto runs on Deno's blocking-task pool and goes through the same
 * initialisation, so starting one as the very first thing the process does moves that cost off
 * the main thread, beside module loading. The key is thrown away; a failure changes nothing
 * (the handshake then pays the cost as before).
 *
 * Measured in a fresh `deno run` (Deno 2.9.6): the first handshake to a loopback TLS server
 * 55–65 ms without this, 3–4 ms with it after 120 ms of other main-thread work; resident set
 * unchanged (42–43 MiB). A Worker doing the same costs ~6 MiB more.
 *
 * Import it first, for its effect: `import "./kube/crypto_warmup.ts";`.
 *
 * @module
 */

/** Settles once the warm-up key was generated or failed; never rejects. */
export const cryptoWarmedUp: Promise<void> = crypto.subtle
  .generateKey({ name: "ECDSA", namedCurve: "P-256" }, false, ["sign"])
  .then(() => {}, () => {});
