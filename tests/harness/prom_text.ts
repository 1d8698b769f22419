/**
 * Reads samples out of a Prometheus text exposition (what an operator's /metrics serves), for
 * tests that scrape a process rather than read an in-process registry (kube/testing/metrics.ts
 * does that).
 *
 * @module
 */

const SAMPLE = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{.*\})? (\S+)(?: \d+)?$/;
const LABEL = /([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g;

function unescape(value: string): string {
  return value.replace(/\\(["\\n])/g, (_m, c: string) => (c === "n" ? "\n" : c));
}

/**
 * Sum of every sample named `name` (a histogram's `…_count` / `…_sum` / `…_bucket` included)
 * whose labels include `labels`. A series that was never incremented is absent from the text,
 * which reads as 0.
 */
export function sampleSum(text: string, name: string, labels: Record<string, string> = {}): number {
  let sum = 0;
  for (const line of text.split("\n")) {
    if (line.startsWith("#")) continue;
    const m = SAMPLE.exec(line);
    if (!m || m[1] !== name) continue;
    const have = new Map<string, string>();
    for (const l of (m[2] ?? "").matchAll(LABEL)) have.set(l[1], unescape(l[2]));
    if (Object.entries(labels).every(([k, v]) => have.get(k) === v)) sum += Number(m[3]);
  }
  return sum;
}
