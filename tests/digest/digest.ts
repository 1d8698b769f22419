/**
 * The behaviour digest: what the operator did over a recorded test run, reduced to keys that do
 * not change from run to run of the same code (no names, uids, timestamps or messages), each with
 * a count. Input is a folder tests/harness/behaviour_recording.ts filled (audit logs and /metrics
 * scrapes); output a JSON object with sorted keys, so two digests diff line by line.
 *
 * Sections:
 * - `requests`: the operator's API requests by verb, resource/subresource, scope and dry run;
 * - `responses`: the same requests by verb, resource/subresource and HTTP code of the answer;
 * - `events`: Events the operator created, by reason, type, involved kind and reporter;
 * - `eventRepeats`: count bumps (patches) of those Events, by the same key as their create;
 * - `statusWrites`: status subresource writes by resource, verb, and the phase and each
 *   condition's type/status/reason the write left;
 * - `statusFields`: the same writes by the top-level status fields they carry;
 * - `metrics`: each metric family on the operator's /metrics with its type and label names;
 * - `registry`: the operators' registry requests by method and path shape (repository names
 *   left out, tags kept, digests as `<digest>`); `registryResponses` the same with the status.
 *
 * @module
 */

/** The operator's API identity in the harness (tests/harness/operator_identity.ts). */
export const OPERATOR_USER = "system:serviceaccount:cocoon-system:cocoon-operator";
/** The operator's User-Agent prefix (main.ts), for identities other than the ServiceAccount. */
export const OPERATOR_USER_AGENT_PREFIX = "cocoon-operator/";

/** A digest: section → key → count (`metrics` counts the scrapes a family was seen in). */
export interface Digest {
  /** What was read, for a reader to judge the digest's coverage; not compared. */
  inputs: {
    auditFiles: number;
    auditEvents: number;
    operatorRequests: number;
    scrapes: number;
    registryRequests: number;
  };
  requests: Record<string, number>;
  responses: Record<string, number>;
  events: Record<string, number>;
  eventRepeats: Record<string, number>;
  statusWrites: Record<string, number>;
  statusFields: Record<string, number>;
  metrics: Record<string, number>;
  registry: Record<string, number>;
  registryResponses: Record<string, number>;
}

/** The compared sections, in output order. */
export const SECTIONS = [
  "requests",
  "responses",
  "events",
  "eventRepeats",
  "statusWrites",
  "statusFields",
  "metrics",
  "registry",
  "registryResponses",
] as const;
export type Section = typeof SECTIONS[number];

/** The parts of an audit.k8s.io/v1 Event the digest reads. */
interface AuditEvent {
  auditID?: string;
  stage?: string;
  verb?: string;
  requestURI?: string;
  userAgent?: string;
  user?: { username?: string };
  objectRef?: {
    resource?: string;
    subresource?: string;
    namespace?: string;
    name?: string;
    apiGroup?: string;
  };
  responseStatus?: { code?: number };
  requestObject?: unknown;
  responseObject?: unknown;
}

function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

function str(v: unknown): string | undefined {
  return typeof v === "string" && v !== "" ? v : undefined;
}

function bump(into: Record<string, number>, key: string, by = 1): void {
  into[key] = (into[key] ?? 0) + by;
}

/** Whether an audit event is a request of the operator (not the test, simulator or apiserver). */
export function isOperatorRequest(ev: AuditEvent): boolean {
  return ev.user?.username === OPERATOR_USER ||
    (ev.userAgent ?? "").startsWith(OPERATOR_USER_AGENT_PREFIX);
}

/**
 * `group/resource[/subresource]`, group `core` for the legacy API; a request with no object
 * (discovery, /version, /healthz) is named by its path.
 */
function resourceOf(ev: AuditEvent): string {
  const ref = ev.objectRef;
  if (!ref?.resource) return `path:${(ev.requestURI ?? "?").split("?")[0]}`;
  const group = ref.apiGroup ?? "core";
  const sub = ref.subresource ? `/${ref.subresource}` : "";
  return `${group}/${ref.resource}${sub}`;
}

function isDryRun(ev: AuditEvent): boolean {
  const query = (ev.requestURI ?? "").split("?")[1] ?? "";
  return new URLSearchParams(query).getAll("dryRun").length > 0;
}

/** The key of one request in `requests`. */
export function requestKey(ev: AuditEvent): string {
  const scope = ev.objectRef?.namespace ? "namespaced" : "cluster";
  return `${ev.verb ?? "?"} ${resourceOf(ev)} ${scope}${isDryRun(ev) ? " dryRun" : ""}`;
}

/** The key of an Event create in `events`, or undefined when the body is not an Event. */
export function eventKey(body: unknown): string | undefined {
  if (!isRecord(body)) return undefined;
  const involved = isRecord(body.involvedObject)
    ? body.involvedObject
    : isRecord(body.regarding)
    ? body.regarding
    : {};
  const source = isRecord(body.source) ? body.source : {};
  const reporter = str(body.reportingController) ?? str(body.reportingComponent) ??
    str(source.component) ?? "?";
  const reason = str(body.reason) ?? "?";
  const type = str(body.type) ?? "?";
  const kind = str(involved.kind) ?? "?";
  return `${reason} ${type} ${kind} by ${reporter}`;
}

function conditionPart(c: unknown): string {
  if (!isRecord(c)) return "?";
  return `${str(c.type) ?? "?"}=${str(c.status) ?? "?"}/${str(c.reason) ?? "-"}`;
}

/** `phase=… conditions=[type=status/reason,…]` of a status object (`-` for what it lacks). */
function statusState(status: Record<string, unknown>): string {
  const phase = str(status.phase) ?? "-";
  const conditions = Array.isArray(status.conditions)
    ? [...new Set(status.conditions.map(conditionPart))].sort().join(",")
    : "-";
  return `phase=${phase} conditions=[${conditions}]`;
}

function statusOf(obj: unknown): Record<string, unknown> | undefined {
  return isRecord(obj) && isRecord(obj.status) ? obj.status : undefined;
}

/**
 * The keys of a status write: in `statusWrites` the resource, the verb and the status the write
 * left (the answer's phase and each condition's type=status/reason, sorted; the body's when the
 * log has no answer); in `statusFields` the top-level status fields the body carried (a merge
 * patch sends what changed, so this follows timing more than the first). A JSON patch body is
 * named by its operations' paths.
 */
export function statusWriteKeys(ev: AuditEvent): { write: string; fields: string } {
  const head = `${resourceOf(ev)} ${ev.verb ?? "?"}`;
  const body = ev.requestObject;
  let fields: string;
  if (Array.isArray(body)) {
    const paths = body.map((op) => isRecord(op) ? `${str(op.op)}:${str(op.path)}` : "?");
    fields = `jsonpatch=[${[...new Set(paths)].sort().join(",")}]`;
  } else {
    const sent = statusOf(body);
    fields = sent
      ? `fields=[${Object.keys(sent).sort().join(",")}]`
      : isRecord(body)
      ? "nostatus"
      : "nobody";
  }
  const left = statusOf(ev.responseObject) ?? (Array.isArray(body) ? undefined : statusOf(body));
  return {
    write: `${head} ${left ? statusState(left) : fields}`,
    fields: `${head} ${fields}`,
  };
}

/**
 * Adds one audit log (JSON lines) to `into`. Each audit ID counts once, whichever stages the log
 * holds for it (a watch leaves ResponseStarted, and ResponseComplete only when it ends).
 */
export function addAuditLog(into: Digest, text: string, seen: Set<string>): void {
  into.inputs.auditFiles++;
  /** Event names (namespace/name) → key of their create, for the patches that bump them. */
  const eventKeys = new Map<string, string>();
  /** Event patches by event name, resolved once every create of this log was seen. */
  const pendingRepeats: Record<string, number> = {};
  const lines = text.split("\n");
  // Stages of one request come in time order; keep the last for its response code.
  const byId = new Map<string, AuditEvent>();
  for (const line of lines) {
    if (line.trim() === "") continue;
    let ev: AuditEvent;
    try {
      ev = JSON.parse(line);
    } catch {
      // A plane killed mid-write may leave half a line at the end.
      continue;
    }
    into.inputs.auditEvents++;
    if (!isOperatorRequest(ev)) continue;
    const id = ev.auditID ?? `${byId.size}-anon`;
    if (seen.has(id) && !byId.has(id)) continue;
    seen.add(id);
    const earlier = byId.get(id);
    // The request body is on every stage at Request level; keep it if a later stage lacks it.
    byId.set(id, {
      ...ev,
      requestObject: ev.requestObject ?? earlier?.requestObject,
      responseObject: ev.responseObject ?? earlier?.responseObject,
    });
  }
  for (const ev of byId.values()) {
    into.inputs.operatorRequests++;
    bump(into.requests, requestKey(ev));
    const code = ev.stage === "ResponseStarted" && ev.verb === "watch"
      ? "open"
      : String(ev.responseStatus?.code ?? "?");
    bump(into.responses, `${ev.verb ?? "?"} ${resourceOf(ev)} ${code}`);
    const ok = (ev.responseStatus?.code ?? 0) < 300 || code === "open";
    const ref = ev.objectRef ?? {};
    if (ref.resource === "events" && !ref.subresource && ok) {
      const name = `${ref.namespace ?? ""}/${ref.name ?? ""}`;
      if (ev.verb === "create") {
        const key = eventKey(ev.requestObject) ?? "? (no body)";
        eventKeys.set(name, key);
        bump(into.events, key);
      } else if (ev.verb === "patch" || ev.verb === "update") {
        bump(pendingRepeats, name);
      }
    }
    if (ref.subresource === "status" && ev.verb !== "get" && ok) {
      const keys = statusWriteKeys(ev);
      bump(into.statusWrites, keys.write);
      bump(into.statusFields, keys.fields);
    }
  }
  for (const [name, n] of Object.entries(pendingRepeats)) {
    bump(into.eventRepeats, eventKeys.get(name) ?? "? (created before recording)", n);
  }
}

const TYPE_LINE = /^# TYPE ([a-zA-Z_:][a-zA-Z0-9_:]*) (\S+)$/;
const SAMPLE_LINE = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? \S+/;
const LABEL_NAME = /([a-zA-Z_][a-zA-Z0-9_]*)="(?:[^"\\]|\\.)*"/g;
/** Sample-name suffixes that belong to their family (histograms, summaries, counters). */
const SUFFIXES = ["_bucket", "_sum", "_count", "_total", "_created", "_info"];

/**
 * Adds one /metrics scrape to `into.metrics`: every family as `name type`, and each distinct set
 * of label names its samples carry as `name type {a,b}` (`le` and `quantile` left out: they are
 * the type's own). A family without samples (a replica that is not the leader registers its
 * controllers' families but never fills them) adds only the first key.
 */
export function addScrape(into: Digest, text: string): void {
  into.inputs.scrapes++;
  const types = new Map<string, string>();
  const labelSets = new Map<string, Set<string>>();
  for (const line of text.split("\n")) {
    const t = TYPE_LINE.exec(line);
    if (t) {
      types.set(t[1], t[2]);
      continue;
    }
    if (line.startsWith("#")) continue;
    const m = SAMPLE_LINE.exec(line);
    if (!m) continue;
    let family = m[1];
    if (!types.has(family)) {
      const suffix = SUFFIXES.find((s) =>
        family.endsWith(s) && types.has(family.slice(0, -s.length))
      );
      if (suffix) family = family.slice(0, -suffix.length);
    }
    const names = [...(m[2] ?? "").matchAll(LABEL_NAME)].map((l) => l[1])
      .filter((n) => n !== "le" && n !== "quantile").sort();
    const sets = labelSets.get(family) ?? new Set<string>();
    sets.add(`{${names.join(",")}}`);
    labelSets.set(family, sets);
  }
  const families = new Set([...types.keys(), ...labelSets.keys()]);
  for (const family of families) {
    const type = types.get(family) ?? "untyped";
    bump(into.metrics, `${family} ${type}`);
    for (const set of labelSets.get(family) ?? []) bump(into.metrics, `${family} ${type} ${set}`);
  }
}

/**
 * The shape of a distribution API path: `/v2/`, `manifests/<tag>` (tags such as `hibernate` are
 * part of the contract), `manifests/<digest>`, `blobs/<digest>`, `tags/list`, … with the
 * repository (namespace and VM names) left out.
 */
export function registryPathShape(path: string): string {
  const m = path.match(/^\/v2\/.+?\/(manifests|blobs|tags|referrers)\/(.*)$/);
  if (!m) return path;
  const ref = m[2].startsWith("sha256:") ? "<digest>" : m[2];
  return `${m[1]}/${ref}`;
}

/** Adds one stack's registry requests (JSON lines of method, path, status) to `into`. */
export function addRegistryLog(into: Digest, text: string): void {
  for (const line of text.split("\n")) {
    if (line.trim() === "") continue;
    let req: { method?: unknown; path?: unknown; status?: unknown };
    try {
      req = JSON.parse(line);
    } catch {
      continue;
    }
    into.inputs.registryRequests++;
    const key = `${String(req.method)} ${registryPathShape(String(req.path))}`;
    bump(into.registry, key);
    bump(into.registryResponses, `${key} ${String(req.status)}`);
  }
}

/** An empty digest. */
export function emptyDigest(): Digest {
  return {
    inputs: { auditFiles: 0, auditEvents: 0, operatorRequests: 0, scrapes: 0, registryRequests: 0 },
    requests: {},
    responses: {},
    events: {},
    eventRepeats: {},
    statusWrites: {},
    statusFields: {},
    metrics: {},
    registry: {},
    registryResponses: {},
  };
}

/** The digest with every section's keys sorted, so its JSON is stable. */
export function sorted(d: Digest): Digest {
  const out = emptyDigest();
  out.inputs = { ...d.inputs };
  for (const s of SECTIONS) {
    for (const k of Object.keys(d[s]).sort()) out[s][k] = d[s][k];
  }
  return out;
}

/**
 * Reads a recording folder: every `audit-*.jsonl`, `metrics-*.prom` and `registry-*.jsonl` in
 * it, in name order.
 */
export async function digestOfDir(dir: string): Promise<Digest> {
  const names: string[] = [];
  for await (const e of Deno.readDir(dir)) if (e.isFile) names.push(e.name);
  names.sort();
  const digest = emptyDigest();
  const seen = new Set<string>();
  for (const name of names) {
    if (name.startsWith("audit-") && name.endsWith(".jsonl")) {
      addAuditLog(digest, await Deno.readTextFile(`${dir}/${name}`), seen);
    } else if (name.startsWith("metrics-") && name.endsWith(".prom")) {
      addScrape(digest, await Deno.readTextFile(`${dir}/${name}`));
    } else if (name.startsWith("registry-") && name.endsWith(".jsonl")) {
      addRegistryLog(digest, await Deno.readTextFile(`${dir}/${name}`));
    }
  }
  return sorted(digest);
}
