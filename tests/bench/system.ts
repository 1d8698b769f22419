/**
 * The real system a system benchmark runs on: tests/harness/stack.ts with no operator replica
 * of its own (control plane, registry with its instrumented proxy, simulator process), the
 * counting API proxy (api_proxy.ts) and a kubeconfig for the operator's ServiceAccount
 * (config/rbac's ClusterRole) that points at that proxy; the operator under test is started
 * from a command line (operator_under_test.ts). The registry proxy accepts a manifest DELETE by
 * tag (tests/harness/registry_proxy.ts), so a build that deletes by tag (the Go original) can
 * finish its wakes against distribution 2.8.
 *
 * @module
 */
import { operatorKubeconfig } from "../harness/operator_identity.ts";
import { type Stack, startStack } from "../harness/stack.ts";
import { waitUntil } from "../harness/wait.ts";
import type { SimNode } from "../../sim/nodes.ts";
import { type ApiProxy, startApiProxy } from "./api_proxy.ts";
import { type OperatorUnderTest, startOperatorUnderTest } from "./operator_under_test.ts";
import { progress } from "./load.ts";
import { createCertificateAuthority } from "../../kube/x509.ts";

/**
 * A serving certificate for the counting proxy on 127.0.0.1, and its authority: client-go sends
 * no bearer token to a plain-http server, so a Go build is counted through an HTTPS proxy.
 */
export async function proxyServing(): Promise<{ certPem: string; keyPem: string; caPem: string }> {
  const ca = await createCertificateAuthority("cocoon-bench-api-proxy-ca");
  const leaf = await ca.issue({
    commonName: "cocoon-bench-api-proxy",
    ipAddresses: ["127.0.0.1"],
    usage: "server",
  });
  return { ...leaf, caPem: ca.certPem };
}

/**
 * BENCH_OPERATOR_RBAC: a manifest applied after config/rbac, for a build that needs other
 * grants than this project's ClusterRole; e.g. the Go original updates CocoonSets with PUT
 * (403 under ours), so its own config/rbac/role.yaml goes here for a side-by-side run. It
 * replaces objects of the same name (both ClusterRoles are `cocoon-operator`).
 */
async function applyExtraRbac(stack: Stack): Promise<void> {
  const file = Deno.env.get("BENCH_OPERATOR_RBAC");
  if (!file) return;
  const res = await stack.cp.kubectl(["apply", "-f", file]);
  if (res.code !== 0) throw new Error(`applying BENCH_OPERATOR_RBAC ${file} failed: ${res.stderr}`);
  progress(`applied BENCH_OPERATOR_RBAC ${file}`);
}

/**
 * etcd's database quota in the benchmarks: 8 GiB rather than its 2 GiB default. The database
 * holds every revision written since the API server's last compaction (every 5 minutes): at 10 000
 * sets x 5 pods it reached 453 MiB under this operator and 864 MiB under the Go original (half
 * the run time, so fewer compactions within it). Past its quota etcd refuses every write
 * (NOSPACE) until defragmented: a fleet a few times larger would measure a stalled cluster.
 */
const ETCD_QUOTA_BYTES = 8 * 2 ** 30;

/** What to start. */
export interface BenchSystemOptions {
  /** The operator's command line (`--operator-cmd`). */
  operatorCmd: string;
  /** Simulator nodes (default: the stack's two 8-seat nodes). */
  nodes?: SimNode[];
}

/** A running system; see the module doc. */
export interface BenchSystem extends AsyncDisposable {
  readonly stack: Stack;
  /** Every API request the operator made (through its kubeconfig). */
  readonly api: ApiProxy;
  /** The operator currently running, if any. */
  readonly operator: OperatorUnderTest | undefined;
  /**
   * Starts the operator (stopping a running one first) and, unless told not to, waits for
   * /readyz.
   */
  startOperator(opts?: { waitReady?: boolean }): Promise<OperatorUnderTest>;
  /**
   * Waits until the operator made no request other than a watch for `quietMs` (its queue has
   * drained); returns false when that did not happen within timeoutMs.
   */
  waitQuiet(quietMs: number, timeoutMs: number): Promise<boolean>;
  stop(): Promise<void>;
}

/** Starts the stack, the proxy and the operator identity; no operator runs yet. */
export async function startBenchSystem(opts: BenchSystemOptions): Promise<BenchSystem> {
  progress(`starting control plane, registry and simulator (${opts.nodes?.length ?? 2} nodes)`);
  // Tag deletes accepted: the Go original deletes `:hibernate` by tag, which distribution 2.8
  // refuses, and its wakes would never complete (this project's operator deletes by digest).
  const stack = await startStack({
    operators: 0,
    nodes: opts.nodes,
    registryTagDeletes: true,
    controlPlane: { etcdFlags: [`--quota-backend-bytes=${ETCD_QUOTA_BYTES}`] },
  });
  let api: ApiProxy | undefined;
  let operator: OperatorUnderTest | undefined;
  const stop = async () => {
    await operator?.stop().catch(() => {});
    operator = undefined;
    await api?.close().catch(() => {});
    await stack.stop();
  };
  try {
    api = startApiProxy(stack.cp.server, stack.cp.caCertPem, undefined, await proxyServing());
    const kubeconfig = await api.rewriteKubeconfig(await operatorKubeconfig(stack.cp));
    await applyExtraRbac(stack);
    const proxy = api;
    return {
      stack,
      api: proxy,
      get operator() {
        return operator;
      },
      async startOperator({ waitReady = true } = {}) {
        if (operator) {
          const t = performance.now();
          await operator.stop();
          progress(`operator stopped in ${((performance.now() - t) / 1000).toFixed(1)} s`);
        }
        operator = undefined;
        const op = await startOperatorUnderTest({
          command: opts.operatorCmd,
          kubeconfig,
          ociRegistry: `${stack.proxy.host}/${stack.prefix}`,
        });
        operator = op;
        if (waitReady) {
          await op.waitReady();
          progress(`operator ready in ${((performance.now() - op.spawnedAt) / 1000).toFixed(1)} s`);
        }
        return op;
      },
      async waitQuiet(quietMs, timeoutMs) {
        try {
          await waitUntil(() => {
            const last = proxy.requests.findLast((r) => r.verb !== "watch");
            return performance.now() - (last?.at ?? 0) >= quietMs;
          }, { what: `no operator request for ${quietMs} ms`, timeoutMs, intervalMs: 250 });
          return true;
        } catch {
          return false;
        }
      },
      stop,
      [Symbol.asyncDispose]: stop,
    };
  } catch (err) {
    await stop();
    throw err;
  }
}
