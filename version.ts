/**
 * Build facts printed by --version and the start-up log line (the Go operator's version
 * package). These are the development values; `deno task compile` maps this module to a stamped
 * copy (scripts/compile.ts), the way the Go build sets them with -ldflags.
 */
export const VERSION = "0.1.0-dev";
/** Git revision the binary was built from. */
export const REVISION = "unknown";
/** UTC build time, RFC 3339. */
export const BUILT_AT = "unknown";
