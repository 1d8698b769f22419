/**
 * How the operator process itself is run, the same for `deno task start`, `deno task compile`
 * (baked into the binary) and the image (the Dockerfile runs the compile task and sets the same
 * environment). Measured with `deno task bench:convergence --sets 100` (docs/architecture.md,
 * "Memory"): at 100 sets × 5 pods the peak resident set went from 133 to 90 MiB and the resident
 * set after convergence from 106 to 83 MiB, with the operator's CPU unchanged within the noise.
 *
 * @module
 */

/**
 * V8 flags. `--max-semi-space-size=2` (MiB): V8 grows each half of the young generation up to
 * 16 MiB under allocation bursts (a reconcile wave parses thousands of JSON objects), and what
 * it grew stays resident; the operator's live heap is ~16 MiB, so a 2 MiB nursery costs more
 * scavenges of a small young generation, not measurable CPU.
 */
export const OPERATOR_V8_FLAGS: readonly string[] = ["--max-semi-space-size=2"];

/**
 * Environment of the operator process, unless already set. `MALLOC_ARENA_MAX=2`: glibc gives
 * each thread that allocates (V8's compiler and GC helpers, the runtime's I/O threads) an arena
 * of its own, which keeps freed memory resident; two arenas cut ~10 MiB of resident set.
 */
const OPERATOR_RUNTIME_ENV: Readonly<Record<string, string>> = { MALLOC_ARENA_MAX: "2" };

/** The `deno run` / `deno compile` flag carrying OPERATOR_V8_FLAGS. */
export function v8FlagsArg(): string {
  return `--v8-flags=${OPERATOR_V8_FLAGS.join(",")}`;
}

/** OPERATOR_RUNTIME_ENV without the variables env already sets (those win). */
export function runtimeEnvFor(env: Record<string, string | undefined>): Record<string, string> {
  return Object.fromEntries(Object.entries(OPERATOR_RUNTIME_ENV).filter(([k]) => !env[k]));
}
