/**
 * Start-up checks between parsing the configuration and starting the manager: find the cluster,
 * make sure the sandbox grants everything this configuration will touch, and make sure the API
 * server answers. Each failure is a PreflightError whose message is one line for stderr (main
 * exits 2), never a stack trace: a missing kubeconfig, a missing permission or an unreachable
 * API server are set-up mistakes, not crashes.
 */
import { basename } from "node:path";
import { getLogger } from "@logtape/logtape";
import type { Config } from "./config.ts";
import {
  type ClusterAccess,
  clusterAccess,
  describeSource,
  KubeconfigError,
  locateCluster,
  NoClusterError,
} from "./kube/kubeconfig.ts";
import { errorMessage } from "./kube/errors.ts";
import { restConfigFor, Transport } from "./kube/transport.ts";
import {
  describeExtra,
  describeMissing,
  type ExtraPermissionAllowances,
  extraPermissions,
  missingPermissions,
  type Need,
  netAllowEntries,
  operatorNeeds,
  ProxyVariableError,
} from "./permissions.ts";
import { OPERATOR_ENV } from "./operator_env.ts";
import { installNetGuard, NetAllowList } from "./kube/net_guard.ts";
import { isLoopbackHost } from "./kube/loopback.ts";
import {
  compareMinor,
  formatMinor,
  type MinorVersion,
  parseServerVersion,
  type ServerVersion,
} from "./kube/server_version.ts";

const log = getLogger(["cocoon-operator", "main"]);

/**
 * The Kubernetes releases the operator is tested on: CI runs every suite on 1.35 (the sharding
 * ones on 1.36 too) and a smoke suite on the two ends (scripts/envtest.ts KUBERNETES_RELEASES).
 * README.md, "Kubernetes versions", says what is known of others.
 */
export const TESTED_KUBERNETES: { oldest: MinorVersion; newest: MinorVersion } = {
  oldest: { major: 1, minor: 33 },
  newest: { major: 1, minor: 37 },
};

/** A set-up problem; the message is one line. */
export class PreflightError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "PreflightError";
  }
}

/** How long the API server gets to answer GET /version at start. */
const REACH_TIMEOUT_MS = 10_000;

/** Where to point a developer whose cluster is not there. */
const DEV_HINT = "for a local sandbox cluster run `deno task dev`";

/** The operator variables the sandbox does not grant (checked before the config is parsed). */
export function missingEnvGrants(): Need[] {
  return missingPermissions(OPERATOR_ENV.map((v) => ({ kind: "env", value: v, why: "settings" })));
}

/**
 * Locates the cluster, checks every permission this configuration needs, and returns a
 * Transport to an API server that answered. Throws PreflightError.
 */
export async function connect(
  config: Config,
  env: (name: string) => string | undefined,
  opts: {
    userAgent?: string;
    query?: Parameters<typeof missingPermissions>[1];
    /** What to suggest when the API server does not answer (default: `deno task dev`). */
    unreachableHint?: string;
    /** Grants beyond the operator's own set that are expected (e.g. one exec plugin to run). */
    allowedExtras?: ExtraPermissionAllowances;
    /**
     * Whether to refuse extra permissions (default true; a tool that only borrows this check,
     * like `deno task dev` under -A, passes false).
     */
    checkExtraPermissions?: boolean;
    /** Asks Deno for a permission the operator must not hold (default: Deno itself). */
    queryExtra?: Parameters<typeof extraPermissions>[1];
    /**
     * Put the operator's allow-list in front of the global fetch (kube/net_guard.ts) before the
     * first request; main.ts does, tests that share the process with other servers do not.
     */
    guardNet?: boolean;
  } = {},
): Promise<Transport> {
  let access: ClusterAccess;
  try {
    access = clusterAccess(locateCluster(env, undefined, config.kubeconfig));
  } catch (err) {
    if (err instanceof NoClusterError || err instanceof KubeconfigError) {
      throw new PreflightError(err.message);
    }
    throw err;
  }
  if (
    access.source.kind === "kubeconfig" && config.leaderElect && !config.leaderElectionNamespace
  ) {
    throw new PreflightError(
      "leader election needs a namespace outside a cluster: set --leader-election-namespace or " +
        "POD_NAMESPACE, or pass --leader-elect=false",
    );
  }
  checkApiServerScheme(access, config.plainHttpHosts);
  let needs: Need[];
  try {
    needs = operatorNeeds({
      config,
      cluster: access,
      env,
      plainHttpHosts: config.plainHttpHosts,
      metricsCertDir: config.metricsSecure ? config.metricsCertDir : undefined,
    });
  } catch (err) {
    if (err instanceof ProxyVariableError) throw new PreflightError(err.message);
    throw err;
  }
  const missing = missingPermissions(needs, opts.query);
  if (missing.length > 0) throw new PreflightError(describeMissing(missing));
  if (opts.guardNet) installNetGuard(new NetAllowList(netAllowEntries(needs)));
  let transport: Transport;
  try {
    transport = new Transport({
      ...(await restConfigFor(access)),
      userAgent: opts.userAgent,
    });
  } catch (err) {
    throw new PreflightError(
      `cannot use the credentials from ${describeSource(access.source)}: ${
        errorMessage(err).split("\n")[0]
      }`,
    );
  }
  try {
    const version = await checkReachable(transport, access, opts.unreachableHint ?? DEV_HINT);
    const notice = serverVersionNotice(version, access.server);
    if (notice.level === "warning") log.warn(notice.message, notice.properties);
    else log.info(notice.message, notice.properties);
    // After the reachability check, so a run under `-A` still learns first whether its cluster
    // is there; before anything is reconciled.
    if (!config.allowExtraPermissions && opts.checkExtraPermissions !== false) {
      const extra = extraPermissions(allowedExtrasFor(access, opts.allowedExtras), opts.queryExtra);
      if (extra.length > 0) throw new PreflightError(describeExtra(extra));
    }
  } catch (err) {
    transport.close();
    throw err;
  }
  return transport;
}

/**
 * What the extra-permission check accepts: the caller's allowances plus, for a kubeconfig user
 * with an exec plugin, run access to that one plugin (`deno task start` grants its resolved path).
 * Both the name as the kubeconfig writes it and its file name are listed, since the check probes
 * bare program names (a plugin may well be `kubectl`, as with `kubectl oidc-login`) and Deno
 * resolves those through PATH to the granted path. Any other run grant the probe finds is extra.
 */
function allowedExtrasFor(
  access: Pick<ClusterAccess, "exec">,
  given: ExtraPermissionAllowances = {},
): ExtraPermissionAllowances {
  const run = [...(given.run ?? [])];
  if (access.exec) run.push(access.exec.command, basename(access.exec.command));
  return { ...given, run };
}

/**
 * A plain-http API server only where it was allowed for that host (--allow-plain-http), and
 * never with credentials except on loopback, where nothing leaves the machine: a token, a
 * password or a client certificate over http could be read by anyone on the path.
 */
export function checkApiServerScheme(
  access: Pick<
    ClusterAccess,
    "server" | "source" | "token" | "tokenFile" | "basic" | "cert" | "exec"
  >,
  plainHttpHosts: readonly string[],
): void {
  const url = new URL(access.server);
  if (url.protocol !== "http:") return;
  const where = `${access.server} (from ${describeSource(access.source)})`;
  const loopback = isLoopbackHost(url.hostname);
  const allowed = loopback || plainHttpHosts.includes(url.host.toLowerCase()) ||
    plainHttpHosts.includes(url.hostname.toLowerCase());
  if (!allowed) {
    throw new PreflightError(
      `the Kubernetes API server ${where} is plain http: use https, or allow it with ` +
        `--allow-plain-http=${url.host} (OPERATOR_ALLOW_PLAIN_HTTP)`,
    );
  }
  // An exec plugin's token or certificate is a credential too, just one fetched later.
  const credentials = access.token || access.tokenFile || access.basic || access.cert ||
    access.exec;
  if (credentials && !loopback) {
    throw new PreflightError(
      `refusing to send credentials to the Kubernetes API server ${where} over plain http: ` +
        "credentials travel in clear text only to loopback; use https",
    );
  }
}

/** What GET /version told about the server: its release, or the status that said nothing. */
export type VersionAnswer = { version: ServerVersion } | { status: number };

/**
 * GET /version: any answer but 401 means the server is there and takes our credentials. Its
 * body names the server's release (logged by connect; no second request).
 */
async function checkReachable(
  transport: Transport,
  access: ClusterAccess,
  hint: string,
): Promise<VersionAnswer> {
  const where = `${access.server} (from ${describeSource(access.source)})`;
  let res: Response;
  try {
    res = await transport.fetch({
      method: "GET",
      path: "/version",
      signal: AbortSignal.timeout(REACH_TIMEOUT_MS),
    });
  } catch (err) {
    throw new PreflightError(
      `cannot reach the Kubernetes API server ${where}: ${reason(err)}; ${hint}`,
    );
  }
  if (res.status === 401) {
    await res.body?.cancel();
    throw new PreflightError(`the Kubernetes API server ${where} rejected the credentials (401)`);
  }
  if (!res.ok) {
    await res.body?.cancel();
    return { status: res.status };
  }
  // A body that is not the version document leaves the release unknown, not the start failed.
  const version = parseServerVersion(await res.json().catch(() => undefined));
  return version ? { version } : { status: res.status };
}

/** The start-up log line about the server's release: a warning outside the tested range. */
export function serverVersionNotice(
  answer: VersionAnswer,
  server: string,
): { level: "info" | "warning"; message: string; properties: Record<string, unknown> } {
  const range = `${formatMinor(TESTED_KUBERNETES.oldest)}–${formatMinor(TESTED_KUBERNETES.newest)}`;
  if (!("version" in answer)) {
    return {
      level: "warning",
      message: "Kubernetes API server {server} did not name its release (GET /version answered " +
        "{status}); the operator is tested on Kubernetes {range}",
      properties: { server, status: answer.status, range },
    };
  }
  const { version } = answer;
  const properties = { server, version: version.gitVersion, range };
  if (compareMinor(version, TESTED_KUBERNETES.oldest) < 0) {
    return {
      level: "warning",
      message: "Kubernetes API server {server} runs {version}, older than the tested range " +
        '{range}; README.md "Kubernetes versions" lists what needs a newer server',
      properties,
    };
  }
  if (compareMinor(version, TESTED_KUBERNETES.newest) > 0) {
    return {
      level: "warning",
      message: "Kubernetes API server {server} runs {version}, newer than the tested range " +
        "{range}",
      properties,
    };
  }
  return { level: "info", message: "Kubernetes API server {server} runs {version}", properties };
}

function reason(err: unknown): string {
  if (err instanceof DOMException && err.name === "TimeoutError") {
    return `no answer within ${REACH_TIMEOUT_MS / 1000} s`;
  }
  // fetch nests the socket error in a chain of "context: cause" texts; the last link says what
  // actually happened (connection refused, DNS failure, certificate problem).
  let text = errorMessage(err);
  for (let e: unknown = err; e instanceof Error && e.cause !== undefined; e = e.cause) {
    text += `: ${errorMessage(e.cause)}`;
  }
  text = text.split("\n")[0];
  const last = text.split(": ").pop() ?? text;
  return last.trim() || text;
}
