/**
 * How the operator process itself is run, the same for `deno task start` (the task line carries
 * the V8 flags, the launcher sets the environment), `deno task compile` (baked into the binary)
 * and the image (the Dockerfile sets the same environment). The figures behind each setting are in
 * docs/architecture.md, "Memory and idle CPU".
 *
 * @module
 */

/**
 * V8 flags. `--max-semi-space-size=2` (MiB): V8 grows each half of the young generation up to
 * 16 MiB under allocation bursts and keeps what it grew; the operator's live heap is ~16 MiB, so
 * a small nursery costs scavenges, not measurable CPU. `--memory-saver-mode`: the old generation
 * grows by a small factor over what the last full collection kept instead of up to 4×, so a
 * creation burst does not leave pages for the memory reducer to compact away afterwards.
 */
export const OPERATOR_V8_FLAGS: readonly string[] = [
  "--max-semi-space-size=2",
  "--memory-saver-mode",
];

/**
 * Environment of the operator process, unless already set. `MALLOC_ARENA_MAX=2`: glibc gives
 * each thread that allocates an arena of its own, which keeps freed memory resident.
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
