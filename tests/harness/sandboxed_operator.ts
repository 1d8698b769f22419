/**
 * The operator as it runs in a pod, on the test control plane: main.ts in a `deno run` child with
 * exactly the permission set baked into the in-cluster binary (permissions.ts
 * inClusterPermissionSet), adjusted only where a test machine differs from a pod, under the
 * ServiceAccount bound to exactly config/rbac's ClusterRole.
 *
 * The adjustments, and nothing else:
 * - `kubernetes.default.svc:443` becomes the test API server's `127.0.0.1:<port>`;
 * - the registry host list becomes the test registry's `127.0.0.1:<port>`;
 * - the listeners `0.0.0.0:8080` / `0.0.0.0:8081` become two free loopback ports;
 * - the service-account folder becomes the ServiceAccount's token kubeconfig (KUBECONFIG), since
 *   no token is mounted at /var/run/secrets here;
 * - the metrics certificate folder becomes the test's own (metricsCertDir), if it gives one;
 * - /metrics is plain http (`--metrics-secure=false`) unless secureMetrics is set, so suites can
 *   read it without a token; tests/integration/least_privilege_test.ts runs it secure.
 * The variables granted are the in-cluster list unchanged.
 *
 * With `execPlugin` the operator runs as on a developer machine instead: `deno task start` (the
 * launcher computes the local permission set, `--allow-run` for the plugin included) with a
 * kubeconfig whose user runs an exec credential plugin (tests/harness/exec_plugin.ts).
 *
 * End-to-end tests start it with startSandboxedOperator(), drive CRs through an admin client, and
 * call assertNoForbidden() at the end: any 403 the API server gave the operator means
 * config/rbac (role.yaml, or leader_election_role.yaml for the Lease) lacks a verb the code uses.
 *
 * @module
 */
import {
  inClusterPermissionSet,
  METRICS_CERT_DIR_IN_CLUSTER,
  permissionFlags,
  type PermissionSet,
} from "../../permissions.ts";
import { IN_CLUSTER_API_HOST, SERVICE_ACCOUNT_DIR } from "../../kube/kubeconfig.ts";
import type { ControlPlane } from "./control_plane.ts";
import { operatorKubeconfig } from "./operator_identity.ts";
import type { TokenPlugin } from "./exec_plugin.ts";
import { type ProcessHandle, runProcess } from "./process.ts";
import { metricsRecorder } from "./behaviour_recording.ts";
import { freePort, waitFor } from "./wait.ts";

const repoRoot = new URL("../../", import.meta.url).pathname;

/** Where a pod differs from the test machine. */
export interface SandboxAddresses {
  /** `127.0.0.1:<port>` of the test API server. */
  apiServer: string;
  /** `host:port` of the test registry (OCI_REGISTRY's host). */
  registry: string;
  /** The operator identity's kubeconfig. */
  kubeconfig: string;
  probePort: number;
  metricsPort: number;
  /** A folder with the metrics server's tls.crt and tls.key, in place of the Secret mount. */
  metricsCertDir?: string;
}

/** The in-cluster set with the documented test-machine substitutions (see module doc). */
export function sandboxPermissionSet(at: SandboxAddresses): PermissionSet {
  const set = inClusterPermissionSet([at.registry]);
  return {
    net: set.net.map((entry) =>
      entry === `${IN_CLUSTER_API_HOST}:443`
        ? at.apiServer
        : entry === "0.0.0.0:8080"
        ? `127.0.0.1:${at.metricsPort}`
        : entry === "0.0.0.0:8081"
        ? `127.0.0.1:${at.probePort}`
        : entry
    ),
    read: set.read.map((entry) =>
      entry === SERVICE_ACCOUNT_DIR
        ? at.kubeconfig
        : entry === METRICS_CERT_DIR_IN_CLUSTER && at.metricsCertDir
        ? at.metricsCertDir
        : entry
    ),
    env: set.env,
  };
}

/** Options of startSandboxedOperator. */
export interface SandboxedOperatorOptions {
  cp: ControlPlane;
  /** OCI_REGISTRY, e.g. `127.0.0.1:5000/cocoon`; its host is the only registry host granted. */
  ociRegistry: string;
  /** More environment for the operator (names must be in the granted list to be seen). */
  env?: Record<string, string>;
  /** Operator flags. */
  args?: string[];
  /** Reuse an identity kubeconfig (default: install config/rbac and make one). */
  kubeconfig?: string;
  /** Wait for /readyz before returning (default true). */
  waitReady?: boolean;
  /**
   * Serve /metrics as in a pod: HTTPS with TokenReview / SubjectAccessReview (default false:
   * plain http). With metricsCertDir the certificate comes from there (METRICS_CERT_DIR).
   */
  secureMetrics?: boolean;
  metricsCertDir?: string;
  /** Launch through `deno task start` with this plugin's kubeconfig (see module doc). */
  execPlugin?: TokenPlugin;
}

/** A running sandboxed operator. */
export interface SandboxedOperator {
  readonly proc: ProcessHandle;
  /** The exact `--allow-*` flags it runs with. */
  readonly flags: string[];
  readonly permissions: PermissionSet;
  readonly kubeconfig: string;
  readonly probePort: number;
  readonly metricsPort: number;
  /** The /metrics text. */
  metrics(): Promise<string>;
  /** Requests the API server answered 403, from rest_client_requests_total. */
  forbiddenRequests(): Promise<number>;
  /** Throws, quoting the operator's output, if any request was Forbidden. */
  assertNoForbidden(): Promise<void>;
  /**
   * With COCOON_BEHAVIOUR_DIGEST_DIR set, saves this process's /metrics there (once; stop() calls
   * it, so call it yourself only before signalling proc directly). Otherwise does nothing.
   */
  recordMetrics(): Promise<void>;
  /** SIGTERM, then SIGKILL after graceMs. */
  stop(graceMs?: number): Promise<Deno.CommandStatus>;
}

/**
 * Starts main.ts under the sandbox (see module doc) in namespace cocoon-system (created if
 * missing), with leader election on, and waits until it is ready.
 */
export async function startSandboxedOperator(
  opts: SandboxedOperatorOptions,
): Promise<SandboxedOperator> {
  const kubeconfig = opts.kubeconfig ?? await operatorKubeconfig(opts.cp);
  const probePort = freePort();
  const metricsPort = freePort();
  const registry = opts.ociRegistry.split("/")[0];
  const permissions = sandboxPermissionSet({
    apiServer: new URL(opts.cp.server).host,
    registry,
    kubeconfig,
    probePort,
    metricsPort,
    metricsCertDir: opts.metricsCertDir,
  });
  const env = {
    OCI_REGISTRY: opts.ociRegistry,
    POD_NAMESPACE: "cocoon-system",
    POD_NAME: "cocoon-operator-test",
    PROBE_ADDR: `127.0.0.1:${probePort}`,
    METRICS_ADDR: `127.0.0.1:${metricsPort}`,
    ...(opts.metricsCertDir ? { METRICS_CERT_DIR: opts.metricsCertDir } : {}),
    ...opts.env,
  };
  const metricsArgs = opts.secureMetrics ? [] : ["--metrics-secure=false"];
  let flags = permissionFlags(permissions);
  let proc: ProcessHandle;
  if (opts.execPlugin) {
    const plugin = opts.execPlugin;
    const config = JSON.parse(await Deno.readTextFile(`${repoRoot}deno.json`));
    proc = await runProcess([
      ...String(config.tasks.start).split(/\s+/),
      ...metricsArgs,
      ...(opts.args ?? []),
    ], {
      kubeconfig: plugin.kubeconfig,
      cwd: repoRoot,
      env: {
        ...env,
        PATH: `${plugin.binDir}:${Deno.env.get("PATH") ?? ""}`,
        COCOON_START_VERBOSE: "1",
      },
    });
    const [, launched] = await proc.waitForOutput(/^start: (deno run .*)$/m, 60_000);
    flags = launched.split(" ").filter((w) => w.startsWith("--allow-"));
  } else {
    proc = await runProcess([
      "deno",
      "run",
      "--no-prompt",
      ...flags,
      `${repoRoot}main.ts`,
      ...metricsArgs,
      ...(opts.args ?? []),
    ], { kubeconfig, cwd: repoRoot, env });
  }
  const get = async (port: number, path: string) => {
    const res = await fetch(`http://127.0.0.1:${port}${path}`);
    return { status: res.status, body: await res.text() };
  };
  const metrics = async () => (await get(metricsPort, "/metrics")).body;
  const forbiddenRequests = async () => {
    let n = 0;
    for (
      const m of (await metrics()).matchAll(
        /^rest_client_requests_total\{[^}]*code="403"[^}]*\} (\d+)/gm,
      )
    ) {
      n += Number(m[1]);
    }
    return n;
  };
  const recordMetrics = metricsRecorder(`operator pid ${proc.pid}`, metrics);
  const handle: SandboxedOperator = {
    proc,
    flags,
    permissions,
    kubeconfig,
    probePort,
    metricsPort,
    metrics,
    forbiddenRequests,
    async assertNoForbidden() {
      const n = await forbiddenRequests();
      if (n > 0) {
        throw new Error(
          `the API server answered 403 to ${n} operator request(s): config/rbac/role.yaml or ` +
            "config/rbac/leader_election_role.yaml lacks a verb the code uses\n" +
            proc.output.slice(-3000),
        );
      }
    },
    recordMetrics,
    async stop(graceMs = 20_000) {
      await recordMetrics();
      return await proc.stop(graceMs);
    },
  };
  if (opts.waitReady ?? true) {
    let ready = false;
    const exitedEarly = proc.status.then((st) => {
      if (!ready) {
        throw new Error(
          `operator exited with ${st.code} before ready:\n${proc.output.slice(-3000)}`,
        );
      }
    });
    exitedEarly.catch(() => {}); // reported through the race below
    try {
      await Promise.race([
        waitFor(
          "operator /readyz",
          async () => (await get(probePort, "/readyz")).status === 200,
          30_000,
          200,
        ).then(() => {
          ready = true;
        }),
        exitedEarly,
      ]);
    } catch (err) {
      await proc.stop(5_000).catch(() => {});
      throw err;
    }
  }
  return handle;
}
