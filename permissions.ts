/**
 * The operator's Deno permission set: the product's security promise. The operator runs with no
 * `--allow-all` and no write, ffi or sys permission, and no run permission except, in local mode,
 * for the one exec credential plugin its kubeconfig user names; `--allow-net` names only the API server,
 * the OCI registry, the Google token endpoints and its own two listeners; `--allow-read` names
 * only kubeconfig / service-account / credential files; `--allow-env` names only the variables
 * listed here.
 *
 * Three users of one computation:
 * - the compiled binary bakes inClusterPermissionSet() (scripts/compile.ts);
 * - `deno task start` grants localPermissionSet() for this machine's kubeconfig and OCI_REGISTRY
 *   (scripts/start.ts);
 * - at start-up main.ts asks Deno which of operatorNeeds() it lacks and, if any, exits 2 with one
 *   line naming them (missingPermissions / describeMissing), before a request can fail deep inside
 *   a reconcile.
 */
import type { Config } from "./config.ts";
import { type ClusterAccess, IN_CLUSTER_API_HOST, SERVICE_ACCOUNT_DIR } from "./kube/kubeconfig.ts";
import { parseBindAddress } from "./kube/bind_address.ts";
import { execNeeds } from "./kube/exec_config.ts";
import {
  credentialsTokenEndpoint,
  GOOGLE_TOKEN_URL,
  isGoogleHost,
} from "./snapshot/auth/google_endpoints.ts";
import { parseRegistryBase } from "./snapshot/reference.ts";
import { LOCAL_ONLY_ENV, OPERATOR_ENV, PROXY_VARIABLES } from "./operator_env.ts";

/** One flag's worth of grants. */
export interface PermissionSet {
  /** `host`, `host:port` or `*.domain` entries for `--allow-net`. */
  net: string[];
  /** Files or folders for `--allow-read`. */
  read: string[];
  /** Variable names for `--allow-env`. */
  env: string[];
  /**
   * Programs for `--allow-run`: in cluster never any; in local mode at most the one exec
   * credential plugin of the kubeconfig user, as an absolute path (scripts/start.ts).
   */
  run?: string[];
}

/**
 * Registry hosts baked in by default: Google Artifact Registry over https. A build argument
 * replaces it. Deno matches `*.pkg.dev` against the domain itself and subdomains at any depth;
 * the port pins it to https.
 */
export const DEFAULT_REGISTRY_HOSTS: readonly string[] = ["*.pkg.dev:443"];

/** The GCE metadata server the Google credential chain asks for tokens (port 80, plain HTTP). */
const GCE_METADATA_ENDPOINT = "169.254.169.254:80";
/** The OAuth token URI of Google service-account keys and gcloud user credentials. */
const googleTokenEndpoint = `${new URL(GOOGLE_TOKEN_URL).hostname}:443`;

/** Where the sa-key overlay mounts the Google service-account key Secret. */
const GOOGLE_KEY_DIR = "/var/run/secrets/gcp";
/** Where a Docker config Secret may be mounted (DOCKER_CONFIG=/var/run/secrets/docker). */
export const DOCKER_CONFIG_DIR = "/var/run/secrets/docker";
/** Where config/manager mounts the (optional) metrics serving certificate Secret. */
export const METRICS_CERT_DIR_IN_CLUSTER = "/var/run/secrets/metrics-cert";

/** The manager's listeners with the default flags (metrics :8080, probes :8081). */
const DEFAULT_LISTENERS = ["0.0.0.0:8080", "0.0.0.0:8081"];

/** Grants a build adds on purpose. */
export interface InClusterExtras {
  /**
   * `host:port` of an HTTP(S) proxy the pod's HTTPS_PROXY / HTTP_PROXY / ALL_PROXY names: only
   * then does the operator start with such a variable set (proxyNeeds).
   */
  proxyHosts?: readonly string[];
}

/**
 * The set baked into the in-cluster binary: API server as kubernetes.default.svc:443, the given
 * registry hosts, the default listeners; the service-account folder and the Docker config
 * Secret mount point; OPERATOR_ENV. Google's token endpoints and the key Secret mount point only
 * when a registry host entry may name a Google registry: the credential chain asks Google for
 * nothing else.
 */
export function inClusterPermissionSet(
  registryHosts: readonly string[] = DEFAULT_REGISTRY_HOSTS,
  extra: InClusterExtras = {},
): PermissionSet {
  if (registryHosts.length === 0) throw new Error("at least one registry host is required");
  for (const h of registryHosts) checkNetEntry(h);
  for (const h of extra.proxyHosts ?? []) checkNetEntry(h, "proxy host");
  const google = registryHosts.some(mayNameGoogleHost);
  return {
    net: [
      `${IN_CLUSTER_API_HOST}:443`,
      // An entry without a port would grant every port of the host: https unless spelled out.
      ...registryHosts.map((h) => withPort(h, 443)),
      ...(google ? [GCE_METADATA_ENDPOINT, googleTokenEndpoint] : []),
      ...(extra.proxyHosts ?? []).map((h) => withPort(h, 80)),
      ...DEFAULT_LISTENERS,
    ],
    read: [
      SERVICE_ACCOUNT_DIR,
      ...(google ? [GOOGLE_KEY_DIR] : []),
      DOCKER_CONFIG_DIR,
      METRICS_CERT_DIR_IN_CLUSTER,
    ],
    env: [...OPERATOR_ENV],
  };
}

/** Google registry domains (snapshot/auth/google.ts isGoogleHost), for wildcard entries. */
const GOOGLE_REGISTRY_DOMAINS = ["gcr.io", "pkg.dev", "google.com"];

/** Whether an `--allow-net` entry (`host`, `host:port`, `*.domain`) admits a Google host. */
function mayNameGoogleHost(entry: string): boolean {
  const host = entry.replace(/:\d+$/, "").toLowerCase();
  if (!host.startsWith("*.")) return isGoogleHost(host);
  const domain = host.slice(2);
  return isGoogleHost(domain) ||
    GOOGLE_REGISTRY_DOMAINS.some((g) => g === domain || g.endsWith(`.${domain}`));
}

/** The `--allow-*` flags for a set (the order of entries is kept; duplicates dropped). */
export function permissionFlags(set: PermissionSet): string[] {
  const flag = (name: string, values: string[]) => {
    const unique = [...new Set(values)];
    for (const v of unique) {
      if (v === "" || v.includes(",")) {
        throw new Error(`invalid ${name} entry ${JSON.stringify(v)}`);
      }
    }
    return unique.length ? [`--allow-${name}=${unique.join(",")}`] : [];
  };
  return [
    ...flag("net", set.net),
    ...flag("read", set.read),
    ...flag("env", set.env),
    ...flag("run", set.run ?? []),
  ];
}

/** A permission the operator needs, and the setting that makes it need it. */
export interface Need {
  kind: "net" | "read" | "env" | "run";
  /**
   * `host:port` (or a bare host, meaning every port) / absolute path / variable name / program
   * (absolute, or a bare name Deno looks up on PATH).
   */
  value: string;
  /** What asks for it, e.g. "OCI_REGISTRY" or "API server". */
  why: string;
}

/** What operatorNeeds looks at. */
export interface NeedsInput {
  config: Pick<
    Config,
    | "ociRegistry"
    | "metricsBindAddress"
    | "healthProbeBindAddress"
    | "leaderElect"
    | "leaderElectionNamespace"
  >;
  cluster: Pick<ClusterAccess, "server" | "files" | "source" | "exec">;
  /** The environment as the operator reads it (ungranted variables unset). */
  env: (name: string) => string | undefined;
  /**
   * Reads a credentials file to learn its token endpoint (default: the file system; a failure
   * means nothing is learnt, the read itself is already a need).
   */
  readText?: (path: string) => string;
  /** Hosts (`host` or `host:port`) plain http is allowed to (--allow-plain-http). */
  plainHttpHosts?: readonly string[];
  /** --metrics-cert-dir: the metrics server reads tls.crt and tls.key there. */
  metricsCertDir?: string;
}

/**
 * Everything this configuration will touch: listeners, API server, registry (and Google's token
 * endpoints for Google registries), the cluster credential files, the registry credential files
 * the credential chain will look for, the leader-election namespace file, and OPERATOR_ENV.
 */
export function operatorNeeds(input: NeedsInput): Need[] {
  const { config, cluster, env } = input;
  const needs: Need[] = OPERATOR_ENV.map((v) => ({
    kind: "env",
    value: v,
    why: "operator setting",
  }));
  const net = (value: string, why: string) => needs.push({ kind: "net", value, why });
  const read = (value: string, why: string) => needs.push({ kind: "read", value, why });

  for (
    const [addr, why] of [
      [config.metricsBindAddress, "metrics listener"],
      [config.healthProbeBindAddress, "probe listener"],
    ] as const
  ) {
    const bind = parseBindAddress(addr);
    if (bind) {
      const host = bind.hostname ?? "0.0.0.0";
      const name = host.includes(":") ? `[${host}]` : host;
      // Port 0 lets the kernel pick: only the host can be granted then.
      net(bind.port === 0 ? name : `${name}:${bind.port}`, why);
    }
  }
  if (input.metricsCertDir) {
    const dir = input.metricsCertDir.replace(/\/+$/, "");
    read(`${dir}/tls.crt`, "--metrics-cert-dir");
    read(`${dir}/tls.key`, "--metrics-cert-dir");
  }
  net(hostPort(new URL(cluster.server)), "API server");
  for (const f of cluster.files) read(f, "API server credentials");
  if (cluster.exec) {
    const exec = execNeeds(cluster.exec);
    needs.push({ kind: "run", value: exec.run, why: "exec credential plugin" });
    for (const v of exec.env) needs.push({ kind: "env", value: v, why: "exec credential plugin" });
  }
  if (
    cluster.source.kind === "in-cluster" && config.leaderElect && !config.leaderElectionNamespace
  ) {
    read(`${SERVICE_ACCOUNT_DIR}/namespace`, "leader election namespace");
  }

  const { registry } = parseRegistryBase(config.ociRegistry);
  net(withPort(registry, registryPort(registry, input.plainHttpHosts ?? [])), "OCI_REGISTRY");
  for (const need of proxyNeeds(env)) needs.push(need);
  for (const entry of allowNetEntries(env)) net(entry, ALLOW_NET_ENV);
  const google = isGoogleHost(registry.replace(/:\d+$/, ""));
  const home = env("HOME")?.replace(/\/+$/, "");
  if (google) {
    const metadata = env("GCE_METADATA_HOST");
    net(metadata ? withPort(metadata, 80) : GCE_METADATA_ENDPOINT, "Google credentials");
    net(googleTokenEndpoint, "Google credentials");
    // The file the credential chain exchanges at its own token_uri: the named key, else gcloud's.
    const key = env("GOOGLE_APPLICATION_CREDENTIALS");
    const [file, why] = key
      ? [key, "GOOGLE_APPLICATION_CREDENTIALS"]
      : home
      ? [`${home}/.config/gcloud/application_default_credentials.json`, "gcloud credentials"]
      : [];
    if (file && why) {
      read(file, why);
      const endpoint = tokenEndpointIn(file, input.readText ?? Deno.readTextFileSync);
      if (endpoint) net(endpoint, `token_uri of ${why}`);
    }
  }
  if (home) read(`${home}/.docker/config.json`, "Docker config");
  const dockerConfig = env("DOCKER_CONFIG")?.replace(/\/+$/, "");
  if (dockerConfig) read(`${dockerConfig}/config.json`, "DOCKER_CONFIG");
  const authFile = env("REGISTRY_AUTH_FILE");
  if (authFile) read(authFile, "REGISTRY_AUTH_FILE");
  const runtimeDir = env("XDG_RUNTIME_DIR")?.replace(/\/+$/, "");
  if (runtimeDir) read(`${runtimeDir}/containers/auth.json`, "XDG_RUNTIME_DIR");
  return needs;
}

/**
 * The minimal set for a local run (`deno task start`): exactly the needs of this configuration,
 * plus the variables that find credential files on a developer machine.
 */
export function localPermissionSet(input: NeedsInput): PermissionSet {
  const needs = operatorNeeds(input);
  const of = (kind: Need["kind"]) => needs.filter((n) => n.kind === kind).map((n) => n.value);
  const set: PermissionSet = {
    net: of("net"),
    read: of("read"),
    env: [...of("env"), ...LOCAL_ONLY_ENV],
  };
  const run = of("run");
  if (run.length > 0) set.run = run;
  return set;
}

/** Asks Deno for each need without prompting; returns those not granted. */
export function missingPermissions(
  needs: readonly Need[],
  query: (d: Deno.PermissionDescriptor) => Deno.PermissionState = (d) =>
    Deno.permissions.querySync(d).state,
): Need[] {
  const seen = new Set<string>();
  return needs.filter((n) => {
    const key = `${n.kind}\0${n.value}`;
    if (seen.has(key)) return false;
    seen.add(key);
    // Deno cannot be asked about a wildcard host; net_guard.ts enforces it.
    if (n.kind === "net" && n.value.startsWith("*.")) return false;
    const d: Deno.PermissionDescriptor = n.kind === "net"
      ? { name: "net", host: n.value }
      : n.kind === "read"
      ? { name: "read", path: n.value }
      : n.kind === "run"
      ? { name: "run", command: n.value }
      : { name: "env", variable: n.value };
    return query(d) !== "granted";
  });
}

/**
 * One line for stderr naming every missing grant and what needs it. A registry host outside the
 * set also says how to get it in: the compiled image's hosts are fixed when it is built.
 */
export function describeMissing(missing: readonly Need[]): string {
  const parts = (["net", "read", "env", "run"] as const).flatMap((kind) => {
    const of = missing.filter((n) => n.kind === kind);
    if (of.length === 0) return [];
    const whys = [...new Set(of.map((n) => n.why))].join(", ");
    return [`--allow-${kind}=${of.map((n) => n.value).join(",")} (${whys})`];
  });
  const registry = missing.find((n) => n.kind === "net" && n.why === "OCI_REGISTRY");
  const rebuild = registry
    ? "the image reaches only the registry hosts it was built with: build it with " +
      `REGISTRY_HOSTS including ${registry.value} (docs/installation.md, "Registry hosts"); `
    : "";
  return `missing Deno permissions: ${parts.join("; ")}; ${rebuild}` +
    "the permission set is described in docs/configuration.md";
}

/** `host:port` of the token endpoint a credentials file names, if it can be read and parsed. */
function tokenEndpointIn(path: string, readText: (path: string) => string): string | undefined {
  let text: string;
  try {
    text = readText(path);
  } catch {
    return undefined;
  }
  const uri = credentialsTokenEndpoint(text);
  if (!uri) return undefined;
  try {
    return hostPort(new URL(uri));
  } catch {
    return undefined;
  }
}

/** `host:port` of a URL, the port spelled out (80 for http, else 443). */
function hostPort(url: URL): string {
  return `${url.hostname}:${url.port || (url.protocol === "http:" ? "80" : "443")}`;
}

/**
 * The port a registry host without one is reached on: 80 when plain http was allowed for it
 * (snapshot/reference.ts plainHttpAllowed), else 443. Loopback hosts may still answer on http
 * after https failed; their port is the one written, or both defaults.
 */
function registryPort(registry: string, plainHttpHosts: readonly string[]): number {
  const host = registry.replace(/:\d+$/, "").toLowerCase();
  return plainHttpHosts.some((h) => h.toLowerCase() === host || h.toLowerCase() === registry)
    ? 80
    : 443;
}

/**
 * The variable naming hosts beyond the operator's own needs it may connect to: a registry's
 * token realm or redirect target on another host (`auth.example.com:443`, `*.example.com:443`;
 * a wildcard matches exactly one label, kube/net_guard.ts).
 */
const ALLOW_NET_ENV = "OPERATOR_ALLOW_NET";

/** OPERATOR_ALLOW_NET's entries, each with a port (443 when none is written). */
function allowNetEntries(env: (name: string) => string | undefined): string[] {
  const entries = (env(ALLOW_NET_ENV) ?? "").split(",").map((e) => e.trim()).filter((e) => e);
  for (const e of entries) {
    try {
      checkNetEntry(e, `${ALLOW_NET_ENV} entry`);
    } catch (err) {
      throw new ProxyVariableError((err as Error).message);
    }
  }
  return entries.map((e) => withPort(e, 443));
}

/**
 * The operator's own allow-list (kube/net_guard.ts): every net need, i.e. exactly what
 * localPermissionSet grants through --allow-net.
 */
export function netAllowEntries(needs: readonly Need[]): string[] {
  return [...new Set(needs.filter((n) => n.kind === "net").map((n) => n.value))];
}

/**
 * A proxy variable that cannot be turned into a host to check, or an OPERATOR_ALLOW_NET entry
 * that is no host; the message names it.
 */
export class ProxyVariableError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "ProxyVariableError";
  }
}

/**
 * One net need per proxy variable that is set: its proxy's `host:port`, the variable as the
 * reason. A proxy the permission set does not name then stops the operator at start with one
 * line naming the variable (describeMissing); one it names was put there on purpose. Throws
 * ProxyVariableError for a value that names no host.
 */
function proxyNeeds(env: (name: string) => string | undefined): Need[] {
  const needs: Need[] = [];
  for (const name of PROXY_VARIABLES) {
    const value = env(name)?.trim();
    if (!value) continue;
    needs.push({ kind: "net", value: proxyHostPort(name, value), why: name });
  }
  return needs;
}

function proxyHostPort(name: string, value: string): string {
  const withScheme = /^[A-Za-z][A-Za-z0-9+.-]*:\/\//.test(value) ? value : `http://${value}`;
  let url: URL;
  try {
    url = new URL(withScheme);
  } catch {
    throw new ProxyVariableError(`${name} is set but names no proxy URL; unset it`);
  }
  if (!url.hostname) throw new ProxyVariableError(`${name} is set but names no proxy host`);
  const defaultPort = url.protocol === "https:"
    ? "443"
    : url.protocol.startsWith("socks")
    ? "1080"
    : "80";
  return `${url.hostname}:${url.port || defaultPort}`;
}

function withPort(hostPort: string, port: number): string {
  return /:\d+$/.test(hostPort.replace(/^\[[^\]]*\]/, "")) ? hostPort : `${hostPort}:${port}`;
}

function checkNetEntry(entry: string, what = "registry host"): void {
  if (
    !/^(\*\.)?[A-Za-z0-9.-]+(:\d{1,5})?$/.test(entry) && !/^\[[0-9a-fA-F:.]+\](:\d+)?$/.test(entry)
  ) {
    throw new Error(
      `invalid ${what} ${JSON.stringify(entry)}: want host, host:port or *.domain`,
    );
  }
}

/** The `sys` kinds the operator may hold: none it asks for, but hostname is harmless. */
const allowedSysKinds: ReadonlySet<string> = new Set(["hostname"]);
const SYS_KINDS = [
  "loadavg",
  "hostname",
  "systemMemoryInfo",
  "networkInterfaces",
  "osRelease",
  "osUptime",
  "uid",
  "gid",
  "username",
  "cpus",
  "homedir",
  "statfs",
  "getPriority",
  "setPriority",
  "ca",
  "umask",
] as const;

/**
 * Programs probed for a scoped `--allow-run` (Deno cannot list what a scoped grant names; these
 * are the ones a compromised dependency would reach for first).
 */
const PROBED_PROGRAMS = ["deno", "sh", "/bin/sh", "bash", "env", "curl", "kubectl", "git"];
/** Folders probed for a scoped `--allow-write`, for the same reason. */
const PROBED_WRITE_PATHS = ["/", "/tmp", "/etc", "/var/run/secrets"];

/** What extraPermissions may accept beyond the operator's own set. */
export interface ExtraPermissionAllowances {
  /**
   * Programs the operator is allowed to run (absolute paths), e.g. a kubeconfig exec credential
   * plugin in a local run: granted runs of exactly these are not extra.
   */
  run?: readonly string[];
}

/**
 * Asks Deno, without prompting, for the permissions the operator must not hold: any run, write or
 * ffi, sys beyond hostname, import, and unscoped net, read or env. Returns each as the flag that
 * grants it (e.g. `--allow-write`, `--allow-run=sh`, `--allow-sys=uid`), empty when none is held.
 * Scoped run and write grants cannot be listed through Deno's API, so those are probed for the
 * programs and folders above (and the allowed run paths are skipped).
 */
export function extraPermissions(
  allowed: ExtraPermissionAllowances = {},
  query: (d: Deno.PermissionDescriptor) => Deno.PermissionState = (d) =>
    Deno.permissions.querySync(d).state,
): string[] {
  const granted = (d: Deno.PermissionDescriptor) => query(d) === "granted";
  const extra: string[] = [];
  for (const name of ["run", "write", "ffi", "import", "net", "read", "env"] as const) {
    if (granted({ name })) extra.push(`--allow-${name}`);
  }
  const allowedRun = new Set(allowed.run ?? []);
  if (!extra.includes("--allow-run")) {
    for (const command of PROBED_PROGRAMS) {
      if (!allowedRun.has(command) && granted({ name: "run", command })) {
        extra.push(`--allow-run=${command}`);
      }
    }
  }
  if (!extra.includes("--allow-write")) {
    for (const path of PROBED_WRITE_PATHS) {
      if (granted({ name: "write", path })) extra.push(`--allow-write=${path}`);
    }
  }
  if (granted({ name: "sys" })) extra.push("--allow-sys");
  else {
    for (const kind of SYS_KINDS) {
      if (!allowedSysKinds.has(kind) && granted({ name: "sys", kind })) {
        extra.push(`--allow-sys=${kind}`);
      }
    }
  }
  return extra;
}

/** The flag and environment variable that accept extra permissions on purpose. */
const ALLOW_EXTRA_PERMISSIONS_FLAG = "--allow-extra-permissions";
const ALLOW_EXTRA_PERMISSIONS_ENV = "OPERATOR_ALLOW_EXTRA_PERMISSIONS";

/** One line for stderr naming the extra grants and how to accept them on purpose. */
export function describeExtra(extra: readonly string[]): string {
  return `the operator holds Deno permissions it must not have: ${extra.join(", ")}; run it ` +
    "with the permission set in docs/configuration.md, or pass " +
    `${ALLOW_EXTRA_PERMISSIONS_FLAG} (${ALLOW_EXTRA_PERMISSIONS_ENV}=true) if it was started this ` +
    "way on purpose";
}
