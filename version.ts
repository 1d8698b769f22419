/** Build facts printed by --version and the start-up log line (the Go operator's version package). */
export const VERSION = "0.1.0-dev";
/** Git revision; the compile task may stamp it through COCOON_OPERATOR_REVISION. */
export const REVISION = "unknown";
