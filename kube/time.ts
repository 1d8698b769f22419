/** metav1.Time's wire form: RFC 3339 in UTC with whole seconds ("2026-01-02T03:04:05Z"). */
export function rfc3339(t: number | Date): string {
  return new Date(t).toISOString().replace(/\.\d{3}Z$/, "Z");
}

/**
 * Go's time.Time JSON form (time.RFC3339Nano) in UTC: the fraction keeps its significant digits
 * and drops trailing zeros, and disappears when it is zero ("…05.12Z", "…05Z"). A value written
 * here reads the same as one the Go operator wrote.
 */
export function rfc3339Nano(t: number | Date): string {
  return new Date(t).toISOString().replace(
    /\.(\d*?)0*Z$/,
    (_m, frac: string) => frac ? `.${frac}Z` : "Z",
  );
}

/** metav1.MicroTime's wire form: RFC 3339 in UTC with six fractional digits ("…05.120000Z"). */
export function rfc3339Micro(t: number | Date): string {
  return new Date(t).toISOString().replace(/\.(\d{3})Z$/, ".$1000Z");
}

/** Parses an RFC 3339 timestamp to epoch milliseconds; undefined when absent or malformed. */
export function parseRfc3339(s: string | undefined): number | undefined {
  if (!s) return undefined;
  const ms = Date.parse(s);
  return Number.isNaN(ms) ? undefined : ms;
}
