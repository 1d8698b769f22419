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
 *
 * `--memory-saver-mode`: V8 lets the old generation grow only by a small factor over what the
 * last full collection kept (instead of up to 4×). During the creation burst of 1 000 sets the
 * heap otherwise grew to ~100 MiB of pages around ~38 MiB live, which V8's memory reducer
 * handed back in several compacting collections once the burst was over (17–21 ms of CPU a
 * second for the first 20 s of the idle window). Measured at 1 000 sets × 5 pods: peak resident
 * set 208–213 → 122–126 MiB, after the steady state 129–134 → 118–123 MiB, idle window 17–21 →
 * 0 ms/s, operator CPU and time to Running unchanged within the noise (docs/architecture.md,
 * "Memory and idle CPU").
 */
export const OPERATOR_V8_FLAGS: readonly string[] = [
  "--max-semi-space-size=2",
  "--memory-saver-mode",
];

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
