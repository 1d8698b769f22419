/** metav1.Time's wire form: RFC 3339 in UTC with whole seconds ("2026-01-02T03:04:05Z"). */
export function rfc3339(t: number | Date): string {
  return new Date(t).toISOString().replace(/\.\d{3}Z$/, "Z");
}

/** Parses an RFC 3339 timestamp to epoch milliseconds; undefined when absent or malformed. */
export function parseRfc3339(s: string | undefined): number | undefined {
  if (!s) return undefined;
  const ms = Date.parse(s);
  return Number.isNaN(ms) ? undefined : ms;
}
