/**
 * Reading what an operator process spent, for integration tests and benchmarks: its API requests
 * by HTTP method from a /metrics text (the client's own `rest_client_requests_total`) and its CPU
 * seconds from /proc.
 *
 * @module
 */

/** Sum of rest_client_requests_total by HTTP method, from a /metrics text. */
export function requestsByMethod(metrics: string): Record<string, number> {
  const out: Record<string, number> = {};
  for (const m of metrics.matchAll(/^rest_client_requests_total\{([^}]*)\} ([0-9.e+]+)$/gm)) {
    const method = m[1].match(/method="([^"]*)"/)?.[1] ?? "";
    out[method] = (out[method] ?? 0) + Number(m[2]);
  }
  return out;
}

/** controller_runtime_reconcile_total of one controller (every result), from a /metrics text. */
export function reconcilesOf(metrics: string, controller: string): number {
  let n = 0;
  for (
    const m of metrics.matchAll(/^controller_runtime_reconcile_total\{([^}]*)\} ([0-9.e+]+)$/gm)
  ) {
    if (m[1].includes(`controller="${controller}"`)) n += Number(m[2]);
  }
  return n;
}

/** The per-key difference after − before, leaving out keys that did not move. */
export function countDelta(
  after: Record<string, number>,
  before: Record<string, number>,
): Record<string, number> {
  const out: Record<string, number> = {};
  for (const [k, v] of Object.entries(after)) {
    const d = v - (before[k] ?? 0);
    if (d !== 0) out[k] = d;
  }
  return out;
}

/**
 * utime + stime of a process in seconds, from /proc/<pid>/stat (Linux; clock ticks of 100 Hz,
 * the kernel's USER_HZ on every architecture Deno runs on).
 */
export async function cpuSecondsOf(pid: number): Promise<number> {
  const stat = await Deno.readTextFile(`/proc/${pid}/stat`);
  // The command name (field 2) may hold spaces; after its closing parenthesis the fields are
  // fixed: state is field 3, utime 14, stime 15.
  const rest = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  return (Number(rest[11]) + Number(rest[12])) / 100;
}
