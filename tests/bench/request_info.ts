/**
 * What an API request is, in the API server's own terms (its RequestInfo): a verb (get, list,
 * watch, create, update, patch, delete, deletecollection) and a resource with its group and
 * subresource, read from the HTTP method, the path and the `watch` query parameter. The
 * benchmarks count an operator's requests by these two words, which client-go's
 * rest_client_requests_total (code, method, host) cannot tell apart.
 *
 * @module
 */

/** A request classified as the API server would for authorization and audit. */
export interface RequestInfo {
  /** Kubernetes verb; for a non-resource path the HTTP method in lower case. */
  verb: string;
  /**
   * `resource[.group][/subresource]` (`pods`, `pods/binding`,
   * `cocoonsets.cocoonset.cocoonstack.io/status`); for a non-resource path (`/apis`,
   * `/version`, `/openapi/v3`) the path itself.
   */
  resource: string;
  /** Namespace of a namespaced request ("" for cluster scope or all namespaces). */
  namespace: string;
  /** A `dryRun=All` write: validated and admitted by the server, never stored. */
  dryRun: boolean;
}

/** True for `watch=true` / `watch=1` (how client-go and ours ask for a watch on a list path). */
function isWatchQuery(query: URLSearchParams): boolean {
  const watch = query.get("watch");
  return watch === "true" || watch === "1";
}

/**
 * Classifies one request. The rules are the API server's: `/api/v1/...` is the core group and
 * `/apis/<group>/<version>/...` a named one; `namespaces/<ns>/<resource>` scopes a resource to a
 * namespace, while `namespaces/<name>` (two segments) is the namespace object itself; a GET
 * with a name is get, without one list, and watch when the query asks for it (or under the old
 * `/watch/` prefix); a DELETE without a name is deletecollection.
 */
export function classifyRequest(method: string, url: URL): RequestInfo {
  const parts = url.pathname.split("/").filter((p) => p !== "");
  let group: string;
  let rest: string[];
  if (parts[0] === "api" && parts.length >= 2) {
    group = "";
    rest = parts.slice(2);
  } else if (parts[0] === "apis" && parts.length >= 3) {
    group = parts[1];
    rest = parts.slice(3);
  } else {
    return { verb: method.toLowerCase(), resource: url.pathname, namespace: "", dryRun: false };
  }
  if (rest.length === 0) {
    // Discovery of one group version (`/api/v1`, `/apis/apps/v1`).
    return { verb: method.toLowerCase(), resource: url.pathname, namespace: "", dryRun: false };
  }
  let legacyWatch = false;
  if (rest[0] === "watch") {
    legacyWatch = true;
    rest = rest.slice(1);
  }
  let namespace = "";
  if (rest[0] === "namespaces" && rest.length >= 3) {
    namespace = rest[1];
    rest = rest.slice(2);
  }
  const [resource = "", name, subresource] = rest;
  const qualified = group ? `${resource}.${group}` : resource;
  const full = subresource ? `${qualified}/${subresource}` : qualified;
  // A namespace object addressed by name carries its own name as namespace, as in the server.
  if (resource === "namespaces" && name !== undefined && namespace === "") namespace = name;
  return {
    verb: verbOf(method, name !== undefined, legacyWatch || isWatchQuery(url.searchParams)),
    resource: full,
    namespace,
    dryRun: (url.searchParams.get("dryRun") ?? "") !== "",
  };
}

function verbOf(method: string, named: boolean, watch: boolean): string {
  switch (method.toUpperCase()) {
    case "GET":
    case "HEAD":
      return watch ? "watch" : named ? "get" : "list";
    case "POST":
      return "create";
    case "PUT":
      return "update";
    case "PATCH":
      return "patch";
    case "DELETE":
      return named ? "delete" : "deletecollection";
    default:
      return method.toLowerCase();
  }
}

/** Verbs that change stored state. */
export const WRITE_VERBS: ReadonlySet<string> = new Set([
  "create",
  "update",
  "patch",
  "delete",
  "deletecollection",
]);

/** A request that changes stored state: a write verb, not a dry run. */
export function isWrite(r: RequestInfo): boolean {
  return WRITE_VERBS.has(r.verb) && !r.dryRun;
}

/** The verb as tallies show it: `create`, or `create (dry run)` for a dry run. */
function verbLabel(r: RequestInfo): string {
  return r.dryRun ? `${r.verb} (dry run)` : r.verb;
}

/** Counts of requests by resource, then verb: `{ pods: { create: 500, list: 1 } }`, sorted. */
export type CountsByResource = Record<string, Record<string, number>>;

/** Tallies requests by resource and verb (dry runs apart), keys sorted so documents diff well. */
export function countByResource(requests: Iterable<RequestInfo>): CountsByResource {
  const counts = new Map<string, Map<string, number>>();
  for (const r of requests) {
    const verbs = counts.get(r.resource) ?? new Map<string, number>();
    const verb = verbLabel(r);
    verbs.set(verb, (verbs.get(verb) ?? 0) + 1);
    counts.set(r.resource, verbs);
  }
  const out: CountsByResource = {};
  for (const resource of [...counts.keys()].sort()) {
    const verbs = counts.get(resource)!;
    out[resource] = Object.fromEntries([...verbs.entries()].sort(([a], [b]) => a.localeCompare(b)));
  }
  return out;
}

/** Tallies requests by verb alone, keys sorted. */
export function countByVerb(requests: Iterable<RequestInfo>): Record<string, number> {
  const counts = new Map<string, number>();
  for (const r of requests) {
    const verb = verbLabel(r);
    counts.set(verb, (counts.get(verb) ?? 0) + 1);
  }
  return Object.fromEntries([...counts.entries()].sort(([a], [b]) => a.localeCompare(b)));
}

/** A classified request with the HTTP status it was answered (0: none yet). */
export interface AnsweredRequest extends RequestInfo {
  status: number;
}

/** What a benchmark reports about a span's requests (see tallyRequests). */
export interface RequestTally {
  total: number;
  byVerb: Record<string, number>;
  byResource: CountsByResource;
  /** Writes refused as stale (409 Conflict), whatever the resource. */
  conflicts: number;
  /** Answers other than success, as "<verb> <status>" (0: no answer before the span ended). */
  failedByResource: CountsByResource;
}

/** Tallies requests (watches included: each is one request) by verb, by resource and outcome. */
export function tallyRequests(requests: readonly AnsweredRequest[]): RequestTally {
  const failed = requests.filter((r) => r.status >= 400 || r.status === 0);
  return {
    total: requests.length,
    byVerb: countByVerb(requests),
    byResource: countByResource(requests),
    conflicts: requests.filter((r) => r.status === 409).length,
    failedByResource: countByResource(failed.map((r) => ({ ...r, verb: `${r.verb} ${r.status}` }))),
  };
}
