/**
 * The transport's requests, counted here until the next scrape adds them to
 * rest_client_requests_total (kube/metrics.ts). The transport's first requests go out before
 * the metrics library is loaded (main.ts connects while operator.ts loads it), so it counts into
 * this table of its own: a map update per request.
 *
 * @module
 */

/** Requests with one status code (or `<error>`), method and host, since the last take. */
export interface RequestCount {
  code: string;
  method: string;
  host: string;
  count: number;
}

const pending = new Map<string, RequestCount>();

/** Counts one request that ended with code (an HTTP status, or `<error>` when none came). */
export function countRequest(code: string, method: string, host: string): void {
  const key = `${code} ${method} ${host}`;
  const entry = pending.get(key);
  if (entry) entry.count++;
  else pending.set(key, { code, method, host, count: 1 });
}

/** The counts since the last take, in the order they were first counted; empties the table. */
export function takeRequestCounts(): RequestCount[] {
  const counts = [...pending.values()];
  pending.clear();
  return counts;
}
