/**
 * The operator's command line and environment, parsed and validated before anything connects.
 * Mirrors the Go main.go: each flag defaults from an env var and the flag wins; see
 * docs/configuration.md of the Go operator for the table.
 *
 * One deliberate difference: the Go build silently ignores an unparsable env value (envInt,
 * EnvBool fall back to the default). Here a set-but-invalid env value is a ConfigError naming the
 * variable, because a typo in a Deployment should fail loudly at start rather than run with a
 * default the operator did not ask for. Empty env values still count as unset, as in Go.
 */
import { parseArgs } from "node:util";
import { type LogLevelName, parseLogLevelName } from "./common/log_level.ts";
import { parseBindAddress } from "./kube/bind_address.ts";
import { errorMessage } from "./kube/errors.ts";

/** Everything main.ts needs to start the operator. */
export interface Config {
  /** Metrics listener ("0" disables it). */
  metricsBindAddress: string;
  /** healthz/readyz listener ("0" disables it). */
  healthProbeBindAddress: string;
  leaderElect: boolean;
  /**
   * --kubeconfig (controller-runtime's flag): one kubeconfig file tried before KUBECONFIG and
   * in-cluster; undefined = not given or empty.
   */
  kubeconfig?: string;
  /** Lease namespace; undefined = the pod's service-account namespace file. */
  leaderElectionNamespace?: string;
  cocoonSetConcurrency: number;
  hibernationConcurrency: number;
  /** Largest spec.agent.replicas a CocoonSet may ask for (cocoonset/validate.ts). */
  maxReplicasPerSet: number;
  /** Largest number of toolboxes a CocoonSet may list. */
  maxToolboxesPerSet: number;
  /** OCI registry base for snapshot manifests (required). */
  ociRegistry: string;
  logLevel: LogLevelName;
  /**
   * /healthz fails once an informer has heard nothing from the API server for this many
   * seconds (--informer-stall-seconds, INFORMER_STALL_SECONDS); 0 turns the check off. Absent
   * when neither is given: defaults.informerStallSeconds applies.
   */
  informerStallSeconds?: number;
  /**
   * --shards / SHARDS: "auto" runs every replica active on its own slice of the namespaces
   * (kube/sharding/, docs/architecture.md "Sharding") instead of one elected leader. Absent
   * when neither is given or the value is "off": single-leader mode, unchanged.
   */
  shards?: ShardMode;
  /**
   * While a feature is off for lack of RBAC permissions (rbac_check.ts), the permissions are
   * asked about again every this many seconds (--rbac-recheck-seconds, RBAC_RECHECK_SECONDS);
   * 0 asks at start only. Absent when neither is given: defaults.rbacRecheckSeconds applies.
   */
  rbacRecheckSeconds?: number;
  /**
   * --help / --version were given: main prints and exits 0. The other fields then hold the
   * built-in defaults and are not validated (the Go flag package also answers -help before
   * main looks at the environment).
   */
  help: boolean;
  version: boolean;
  /**
   * --allow-extra-permissions: start although Deno grants more than the operator needs (a test
   * under `-A`); without it such a start is refused (permissions.ts extraPermissions).
   */
  allowExtraPermissions: boolean;
  /**
   * --allow-plain-http: hosts (`host` or `host:port`) the registry client and the API server
   * connection may use plain http with; credentials still go over it only to loopback.
   */
  plainHttpHosts: string[];
  /** --metrics-secure: /metrics over HTTPS with TokenReview + SubjectAccessReview (default). */
  metricsSecure: boolean;
  /** --metrics-cert-dir: tls.crt and tls.key for the metrics server (default: self-signed). */
  metricsCertDir?: string;
  /**
   * --enable-http2: serve HTTP/2 on the metrics listener as well. Default false, as kubebuilder's
   * scaffold: HTTP/1.1 only, out of reach of the HTTP/2 rapid-reset attack (CVE-2023-44487).
   */
  enableHttp2: boolean;
}

/** How the replicas share the work: "off" = one elected leader, "auto" = namespace shards. */
export type ShardMode = "off" | "auto";

/** Invalid command line or environment; the message is one line fit for stderr (exit 2). */
export class ConfigError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "ConfigError";
  }
}

/** Defaults of the Go operator. */
export const DEFAULTS = {
  metricsBindAddress: ":8080",
  healthProbeBindAddress: ":8081",
  leaderElect: true,
  concurrency: 4,
  // Measured (docs/configuration.md): what one process handles well in one set.
  // The reconciler's own default (cocoonset/validate.ts); config.ts stays out of its graph.
  maxReplicasPerSet: 1_000,
  maxToolboxesPerSet: 100,
  logLevel: "info" as LogLevelName,
  // Longer than a watch's longest life (10 min timeout + 30 s deadline grace) plus its renewal,
  // so one half-open watch is restarted by its deadline before liveness fails.
  informerStallSeconds: 900,
  // A fixed role turns its feature on within a minute; each check is one rules review and one
  // access review per rule still missing, and none is sent once nothing is missing.
  rbacRecheckSeconds: 60,
} as const;

/** Name of the leader-election Lease (the Go operator's LeaderElectionID). */
export const LEADER_ELECTION_ID = "cocoon-operator.cocoonset.cocoonstack.io";

type Env = Record<string, string | undefined>;

const OPTIONS = {
  "metrics-bind-address": { type: "string" },
  "health-probe-bind-address": { type: "string" },
  "cocoonset-concurrency": { type: "string" },
  "hibernation-concurrency": { type: "string" },
  "max-replicas-per-set": { type: "string" },
  "max-toolboxes-per-set": { type: "string" },
  "leader-election-namespace": { type: "string" },
  kubeconfig: { type: "string" },
  "allow-plain-http": { type: "string" },
  "metrics-cert-dir": { type: "string" },
  "informer-stall-seconds": { type: "string" },
  "rbac-recheck-seconds": { type: "string" },
  shards: { type: "string" },
  help: { type: "boolean", short: "h" },
  version: { type: "boolean" },
} as const;

/** Boolean flags that also take "=value" as Go's flag package allows. */
const boolFlags = new Set([
  "leader-elect",
  "allow-extra-permissions",
  "metrics-secure",
  "enable-http2",
]);

/** Parses argv (without the program name) and the environment into a validated Config. */
export function parseConfig(args: string[], env: Env): Config {
  const { rest, bools } = extractBoolFlags(args.map(goStyleFlag));
  let values: Record<string, string | boolean | undefined>;
  try {
    ({ values } = parseArgs({
      args: rest,
      options: OPTIONS,
      strict: true,
      allowPositionals: false,
    }));
  } catch (err) {
    throw new ConfigError(flagErrorMessage(err));
  }
  const str = (name: keyof typeof OPTIONS): string | undefined => {
    const v = values[name];
    return typeof v === "string" ? v : undefined;
  };

  const help = values.help === true;
  const version = values.version === true;
  if (help || version) {
    return {
      metricsBindAddress: DEFAULTS.metricsBindAddress,
      healthProbeBindAddress: DEFAULTS.healthProbeBindAddress,
      leaderElect: DEFAULTS.leaderElect,
      cocoonSetConcurrency: DEFAULTS.concurrency,
      hibernationConcurrency: DEFAULTS.concurrency,
      maxReplicasPerSet: DEFAULTS.maxReplicasPerSet,
      maxToolboxesPerSet: DEFAULTS.maxToolboxesPerSet,
      ociRegistry: "",
      logLevel: DEFAULTS.logLevel,
      help,
      version,
      allowExtraPermissions: false,
      plainHttpHosts: [],
      metricsSecure: true,
      enableHttp2: false,
    };
  }

  const ociRegistry = envValue(env, "OCI_REGISTRY")?.trim();
  if (!ociRegistry) {
    throw new ConfigError("OCI_REGISTRY must be set (OCI registry base for snapshot manifests)");
  }

  const metricsBindAddress = bindAddress(
    "--metrics-bind-address",
    str("metrics-bind-address"),
    "METRICS_ADDR",
    env,
    DEFAULTS.metricsBindAddress,
    // controller-runtime: an empty metrics address means the default one.
    DEFAULTS.metricsBindAddress,
  );
  const healthProbeBindAddress = bindAddress(
    "--health-probe-bind-address",
    str("health-probe-bind-address"),
    "PROBE_ADDR",
    env,
    DEFAULTS.healthProbeBindAddress,
    // controller-runtime: an empty probe address disables the probe server.
    "0",
  );

  const leaderElect = bools.get("leader-elect") ??
    envBool(env, "LEADER_ELECT", DEFAULTS.leaderElect);

  const cocoonSetConcurrency = concurrency(
    "--cocoonset-concurrency",
    str("cocoonset-concurrency"),
    "COCOONSET_CONCURRENCY",
    env,
  );
  const hibernationConcurrency = concurrency(
    "--hibernation-concurrency",
    str("hibernation-concurrency"),
    "HIBERNATION_CONCURRENCY",
    env,
  );

  const maxReplicasPerSet = count(
    "--max-replicas-per-set",
    str("max-replicas-per-set"),
    "MAX_REPLICAS_PER_SET",
    env,
    DEFAULTS.maxReplicasPerSet,
    0,
  );
  const maxToolboxesPerSet = count(
    "--max-toolboxes-per-set",
    str("max-toolboxes-per-set"),
    "MAX_TOOLBOXES_PER_SET",
    env,
    DEFAULTS.maxToolboxesPerSet,
    0,
  );

  const leaderElectionNamespace = str("leader-election-namespace") ||
    envValue(env, "POD_NAMESPACE") || undefined;
  if (leaderElectionNamespace !== undefined && !isDnsLabel(leaderElectionNamespace)) {
    throw new ConfigError(
      `invalid leader election namespace ${JSON.stringify(leaderElectionNamespace)}: ` +
        "want a DNS-1123 label",
    );
  }

  // controller-runtime ignores an empty --kubeconfig.
  const kubeconfig = str("kubeconfig") || undefined;

  const rawLevel = envValue(env, "OPERATOR_LOG_LEVEL");
  let logLevel: LogLevelName = DEFAULTS.logLevel;
  if (rawLevel !== undefined) {
    try {
      logLevel = parseLogLevelName(rawLevel);
    } catch (err) {
      throw new ConfigError(`OPERATOR_LOG_LEVEL: ${(err as Error).message}`);
    }
  }

  const informerStallSeconds = seconds(
    "--informer-stall-seconds",
    str("informer-stall-seconds"),
    "INFORMER_STALL_SECONDS",
    env,
  );

  const shards = shardMode(str("shards"), env);

  const rbacRecheckSeconds = seconds(
    "--rbac-recheck-seconds",
    str("rbac-recheck-seconds"),
    "RBAC_RECHECK_SECONDS",
    env,
  );

  return {
    metricsBindAddress,
    healthProbeBindAddress,
    leaderElect,
    leaderElectionNamespace,
    kubeconfig,
    cocoonSetConcurrency,
    hibernationConcurrency,
    maxReplicasPerSet,
    maxToolboxesPerSet,
    ociRegistry,
    logLevel,
    ...(informerStallSeconds !== undefined ? { informerStallSeconds } : {}),
    ...(shards === "auto" ? { shards } : {}),
    ...(rbacRecheckSeconds !== undefined ? { rbacRecheckSeconds } : {}),
    help: false,
    version: false,
    allowExtraPermissions: bools.get("allow-extra-permissions") ??
      envBool(env, "OPERATOR_ALLOW_EXTRA_PERMISSIONS", false),
    plainHttpHosts: plainHttpHosts(str("allow-plain-http"), env),
    metricsSecure: bools.get("metrics-secure") ?? envBool(env, "METRICS_SECURE", true),
    metricsCertDir: str("metrics-cert-dir") || envValue(env, "METRICS_CERT_DIR"),
    enableHttp2: bools.get("enable-http2") ?? envBool(env, "ENABLE_HTTP2", false),
  };
}

/** --shards / SHARDS: "off" or "auto"; anything else is a ConfigError naming where it came from. */
function shardMode(flagValue: string | undefined, env: Env): ShardMode {
  const where = flagValue !== undefined ? "--shards" : "SHARDS";
  const raw = flagValue ?? envValue(env, "SHARDS") ?? "off";
  if (raw === "off" || raw === "auto") return raw;
  throw new ConfigError(`${where}=${JSON.stringify(raw)}: want off or auto`);
}

/** --allow-plain-http / OPERATOR_ALLOW_PLAIN_HTTP: a comma-separated host list. */
function plainHttpHosts(flagValue: string | undefined, env: Env): string[] {
  const where = flagValue !== undefined ? "--allow-plain-http" : "OPERATOR_ALLOW_PLAIN_HTTP";
  const raw = flagValue ?? envValue(env, "OPERATOR_ALLOW_PLAIN_HTTP") ?? "";
  const hosts = raw.split(",").map((h) => h.trim().toLowerCase()).filter((h) => h !== "");
  for (const h of hosts) {
    if (!/^([a-z0-9.-]+|\[[0-9a-f:.]+\])(:\d{1,5})?$/.test(h)) {
      throw new ConfigError(`${where}: ${JSON.stringify(h)} is not a host or host:port`);
    }
  }
  return hosts;
}

/** The --help text. */
export function usage(program = "cocoon-operator"): string {
  return `Usage: ${program} [flags]

Runs the CocoonSet and CocoonHibernation controllers.

Flags (a flag overrides its environment variable):
  --metrics-bind-address ADDR        metrics listener, "0" disables
                                     env METRICS_ADDR, default :8080
  --health-probe-bind-address ADDR   /healthz and /readyz listener, "0" disables
                                     env PROBE_ADDR, default :8081
  --leader-elect[=BOOL]              let only one replica reconcile at a time
                                     env LEADER_ELECT, default true
  --leader-election-namespace NS     namespace of the leader-election Lease
                                     env POD_NAMESPACE, default the service account's
  --cocoonset-concurrency N          concurrent CocoonSet reconciles, at least 1
                                     env COCOONSET_CONCURRENCY, default 4
  --hibernation-concurrency N        concurrent CocoonHibernation reconciles, at least 1
                                     env HIBERNATION_CONCURRENCY, default 4
  --max-replicas-per-set N           largest spec.agent.replicas acted on; a set asking
                                     for more gets InvalidSpec and no sub-agent
                                     env MAX_REPLICAS_PER_SET, default 1000
  --max-toolboxes-per-set N          largest number of toolboxes acted on per set
                                     env MAX_TOOLBOXES_PER_SET, default 100
  --kubeconfig PATH                  kubeconfig file, tried before KUBECONFIG and in-cluster
  --metrics-secure[=BOOL]            /metrics over HTTPS, callers authenticated and authorized
                                     by the API server; false serves plain http (local use)
                                     env METRICS_SECURE, default true
  --metrics-cert-dir DIR             tls.crt and tls.key for /metrics, default self-signed
                                     env METRICS_CERT_DIR
  --enable-http2[=BOOL]              serve HTTP/2 on the metrics listener too; off, it speaks
                                     HTTP/1.1 only (HTTP/2 rapid reset, CVE-2023-44487)
                                     env ENABLE_HTTP2, default false
  --allow-plain-http HOSTS           hosts (host or host:port, comma-separated) reached over
                                     plain http; credentials only ever go to loopback so
                                     env OPERATOR_ALLOW_PLAIN_HTTP
  --allow-extra-permissions[=BOOL]   start although Deno grants more than the operator needs
                                     env OPERATOR_ALLOW_EXTRA_PERMISSIONS, default false
  --informer-stall-seconds N         /healthz fails after N s without word from the API
                                     server on a watched kind; 0 disables
                                     env INFORMER_STALL_SECONDS, default 900
  --rbac-recheck-seconds N           while a feature is off for lack of RBAC permissions,
                                     ask again every N s (0: at start only)
                                     env RBAC_RECHECK_SECONDS, default 60
  --shards MODE                      off: one elected leader reconciles; auto: every replica
                                     reconciles its own slice of the namespaces (no leader
                                     election, --leader-elect is ignored)
                                     env SHARDS, default off
  -h, --help                         print this text and exit
  --version                          print the version and exit

Environment:
  OCI_REGISTRY        required: OCI registry base for snapshot manifests
  OPERATOR_LOG_LEVEL  debug, info, warn or error (default info); trace, fatal,
                      panic and disabled as the Go build names them
  KUBECONFIG          kubeconfig path when running outside the cluster

ADDR is ":PORT", "HOST:PORT" or "[IPv6]:PORT". BOOL is true or false, written as Go's
strconv.ParseBool accepts them (1, t, T, TRUE, true, True, 0, f, F, FALSE, false, False).
An invalid environment value stops the operator at start.`;
}

/**
 * Go's strconv.ParseBool. Returns undefined when the text is not a boolean.
 */
export function parseGoBool(text: string): boolean | undefined {
  switch (text) {
    case "1":
    case "t":
    case "T":
    case "true":
    case "TRUE":
    case "True":
      return true;
    case "0":
    case "f":
    case "F":
    case "false":
    case "FALSE":
    case "False":
      return false;
    default:
      return undefined;
  }
}

/** An env value, with "" treated as unset (cmp.Or / EnvOrDefault semantics). */
function envValue(env: Env, key: string): string | undefined {
  const v = env[key];
  return v === undefined || v === "" ? undefined : v;
}

function envBool(env: Env, key: string, fallback: boolean): boolean {
  const raw = envValue(env, key);
  if (raw === undefined) return fallback;
  const b = parseGoBool(raw);
  if (b === undefined) {
    throw new ConfigError(`${key}=${JSON.stringify(raw)} is not a boolean (want true or false)`);
  }
  return b;
}

function bindAddress(
  flag: string,
  flagValue: string | undefined,
  key: string,
  env: Env,
  fallback: string,
  whenEmpty: string,
): string {
  const fromFlag = flagValue !== undefined;
  const given = fromFlag ? flagValue : envValue(env, key) ?? fallback;
  const value = given === "" ? whenEmpty : given;
  try {
    parseBindAddress(value);
  } catch (err) {
    throw new ConfigError(`${fromFlag ? flag : key}: ${(err as Error).message}`);
  }
  return value;
}

function concurrency(flag: string, flagValue: string | undefined, key: string, env: Env): number {
  return count(flag, flagValue, key, env, DEFAULTS.concurrency, 1);
}

/** A decimal integer flag or env value of at least min; fallback when neither is given. */
function count(
  flag: string,
  flagValue: string | undefined,
  key: string,
  env: Env,
  fallback: number,
  min: number,
): number {
  const fromFlag = flagValue !== undefined;
  const raw = fromFlag ? flagValue : envValue(env, key);
  if (raw === undefined) return fallback;
  const where = fromFlag ? flag : key;
  // Decimal only: Go's flag package would also take 0x10 or 010 (octal), a surprise not worth
  // keeping.
  if (!/^\+?\d+$/.test(raw.trim())) {
    throw new ConfigError(`${where}=${JSON.stringify(raw)} is not an integer`);
  }
  const n = Number(raw.trim());
  if (!Number.isSafeInteger(n)) {
    throw new ConfigError(`${where}=${JSON.stringify(raw)} is too large`);
  }
  if (n < min) {
    throw new ConfigError(`${where}=${JSON.stringify(raw)} must be at least ${min}`);
  }
  return n;
}

/** A whole number of seconds ≥ 0 from a flag or its env variable (decimal only). */
function seconds(
  flag: string,
  flagValue: string | undefined,
  key: string,
  env: Env,
): number | undefined {
  const fromFlag = flagValue !== undefined;
  const raw = fromFlag ? flagValue : envValue(env, key);
  if (raw === undefined) return undefined;
  const where = fromFlag ? flag : key;
  const n = Number(raw.trim());
  if (!/^\+?\d+$/.test(raw.trim()) || !Number.isSafeInteger(n)) {
    throw new ConfigError(`${where}=${JSON.stringify(raw)} is not a whole number of seconds`);
  }
  return n;
}

/**
 * Go's flag package accepts "-name" as well as "--name"; node's parseArgs only knows "--name"
 * for long options. Rewrite single-dash long flags so manifests written for the Go binary work.
 */
function goStyleFlag(arg: string): string {
  return /^-[a-z][a-z0-9-]+(=.*)?$/.test(arg) ? `-${arg}` : arg;
}

/**
 * Pulls out "--leader-elect" and "--leader-elect=VALUE": parseArgs rejects a value on a boolean
 * option, while Go's bool flags take "=false". The last occurrence wins, as in Go.
 */
function extractBoolFlags(args: string[]): { rest: string[]; bools: Map<string, boolean> } {
  const rest: string[] = [];
  const bools = new Map<string, boolean>();
  for (let i = 0; i < args.length; i++) {
    const arg = args[i];
    if (arg === "--") {
      rest.push(...args.slice(i));
      break;
    }
    const m = /^--([a-z][a-z0-9-]*)(?:=(.*))?$/.exec(arg);
    if (!m || !boolFlags.has(m[1])) {
      rest.push(arg);
      continue;
    }
    if (m[2] === undefined) {
      bools.set(m[1], true);
      continue;
    }
    const b = parseGoBool(m[2]);
    if (b === undefined) {
      throw new ConfigError(
        `invalid value ${JSON.stringify(m[2])} for --${m[1]}: want true or false`,
      );
    }
    bools.set(m[1], b);
  }
  return { rest, bools };
}

function flagErrorMessage(err: unknown): string {
  const msg = errorMessage(err);
  // parseArgs messages span lines with hints about "--"; keep the first line.
  return `${msg.split("\n")[0].trim()} (see --help)`;
}

function isDnsLabel(s: string): boolean {
  return s.length <= 63 && /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/.test(s);
}
