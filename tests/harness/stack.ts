/**
 * The whole system for one test, each part a process of its own as in production: a control
 * plane (etcd + kube-apiserver with the project's CRDs), an OCI registry (docker-registry), the
 * VM simulator playing vk-cocoon, the scheduler and the kubelet (`deno task sim`, with its status
 * endpoint), and N operator replicas, each main.ts under the in-cluster permission set and exactly
 * config/rbac's ClusterRole. The operators reach the registry through an instrumented proxy in
 * the test process (tests/harness/registry_proxy.ts: every request with its arrival time, and an
 * outage switch); the simulator pushes to the registry directly.
 *
 * ```ts
 * import { CocoonSets } from "../../common/apis/v1/resources.ts";
 * import { startStack } from "./stack.ts";
 *
 * await using stack = await startStack({ operators: 2 });
 * await stack.namespace("team-a");
 * const cs = await stack.admin.create(CocoonSets, {
 *   metadata: { name: "demo", namespace: "team-a" },
 *   spec: { agent: { image: "ghcr.io/cocoonstack/cocoon/ubuntu:24.04" } },
 * });
 * await stack.events(cs); // Events about an object
 * await stack.metric("cocoon_operator_subagent_rebuild_total", { namespace: "team-a" });
 * await stack.tagsOf("vk-team-a-demo-0"); // e.g. ["hibernate"]
 * await stack.sim.seatsUsed("vk-a");
 * await stack.killOperator(0, "SIGTERM");
 * await stack.restartOperator(0);
 * await stack.assertOperatorsHealthy(); // alive, no 403
 * ```
 *
 * Teardown: `stop()` (or `await using`) stops everything in reverse order, each part even when
 * another fails, and is idempotent; a start that fails half-way stops what it started. The
 * control plane's watchdog removes its servers if the test process dies; the process logs of the
 * operators and the simulator stay in the temp files `logFiles()` names.
 *
 * Leader election is on when more than one replica runs (the operator has no flags for its
 * timings: 15 s lease, 10 s renew deadline, 2 s retry; a SIGTERM releases the Lease at once).
 *
 * @module
 */
import { ApiClient } from "../../kube/api_client.ts";
import { type CoreEvent, Events, Namespaces } from "../../kube/core.ts";
import { isAlreadyExists } from "../../kube/errors.ts";
import type { KubeObject } from "../../kube/object.ts";
import { loadRestConfig, Transport } from "../../kube/transport.ts";
import type { Latencies } from "../../sim/kubelet.ts";
import type { SimNode } from "../../sim/nodes.ts";
import { recordRegistryRequests } from "./behaviour_recording.ts";
import { type ControlPlane, type ControlPlaneOptions, startControlPlane } from "./control_plane.ts";
import { type TokenPlugin, writeTokenPlugin } from "./exec_plugin.ts";
import { operatorKubeconfig, operatorKubeconfigUnder } from "./operator_identity.ts";
import { sampleSum } from "./prom_text.ts";
import { registryAvailable, startRegistry, type TestRegistry } from "./registry.ts";
import { type RegistryProxy, startRegistryProxy } from "./registry_proxy.ts";
import { type SandboxedOperator, startSandboxedOperator } from "./sandboxed_operator.ts";
import { type SimProcess, startSimProcess } from "./sim_process.ts";

/** What to start. Every field has a default. */
export interface StackOptions {
  /** Simulator nodes (default: `vk-a` and `vk-b`, pool `default`, 8 seats each). */
  nodes?: SimNode[];
  /** Simulator latencies (default: the simulator's own, 100–150 ms). */
  latencies?: Partial<Latencies>;
  /** More simulator flags. */
  simArgs?: string[];
  /** Operator replicas (default 1). */
  operators?: number;
  /** Leader election (default: on when operators > 1). */
  leaderElect?: boolean;
  /** More operator environment (e.g. `OPERATOR_LOG_LEVEL: "debug"`). */
  operatorEnv?: Record<string, string>;
  /**
   * Kustomize folders granting the operator more than config/rbac, applied after it (e.g.
   * `config/overlays/sharded/members` for SHARDS=auto).
   */
  extraRbac?: string[];
  /**
   * RBAC manifests (YAML) installed instead of config/rbac, e.g. the Go original's
   * (tests/fixtures/go_original_rbac.yaml); extraRbac is ignored then.
   */
  operatorRbac?: string;
  /**
   * Install config/rbac for the operator's ServiceAccount (default true). False leaves the
   * cluster without any of it, for a test that installs another build's RBAC and starts that
   * build itself; only with `operators: 0`.
   */
  projectRbac?: boolean;
  /** The control plane's Kubernetes minor and extra server flags (default: 1.35, none). */
  controlPlane?: Pick<ControlPlaneOptions, "kubernetesMinor" | "apiServerFlags" | "etcdFlags">;
  /**
   * The registry proxy accepts a manifest DELETE by tag (RegistryProxy.tagDeletes), for
   * an operator build that deletes by tag (default false: distribution 2.8's 400, as deployed).
   */
  registryTagDeletes?: boolean;
  /** Repository prefix under the registry (default `cocoon`): OCI_REGISTRY is `<host>/<prefix>`. */
  prefix?: string;
  /**
   * Run the replicas as on a developer machine: `deno task start` with a kubeconfig whose user
   * runs an exec credential plugin handing out the operator's token, claimed to expire after
   * ttlSeconds (tests/harness/exec_plugin.ts). Default: the in-cluster sandbox.
   */
  execPlugin?: { ttlSeconds: number };
}

/** A running system; see the module doc. */
export interface Stack extends AsyncDisposable {
  readonly cp: ControlPlane;
  readonly registry: TestRegistry;
  /** The operators' way to the registry. */
  readonly proxy: RegistryProxy;
  /** OCI_REGISTRY as the operators and the simulator see it (`<host>/<prefix>`; hosts differ). */
  readonly prefix: string;
  readonly sim: SimProcess;
  /** The current process of each replica (a killed one stays here until restarted). */
  readonly operators: readonly SandboxedOperator[];
  /** A cluster-admin client for the test's own reads and writes. */
  readonly admin: ApiClient;
  /** The exec credential plugin the replicas authenticate with (StackOptions.execPlugin). */
  readonly execPlugin?: TokenPlugin;
  /** Creates a namespace (no error when it exists). */
  namespace(name: string): Promise<void>;
  /** The Events whose involvedObject is obj (kind, namespace, name; uid when obj has one). */
  events(obj: KubeObject): Promise<CoreEvent[]>;
  /**
   * The sum of a metric's samples with these labels on replica i's /metrics, or on every live
   * replica when i is omitted (0 when absent).
   */
  metric(name: string, labels?: Record<string, string>, i?: number): Promise<number>;
  /** Tags of a VM's repository, sorted ([] when it has none). */
  tagsOf(vmName: string): Promise<string[]>;
  /** Whether replica i's process is running. */
  alive(i: number): boolean;
  /** Sends replica i a signal and waits for it to exit. */
  killOperator(i: number, signal?: Deno.Signal): Promise<Deno.CommandStatus>;
  /** Stops replica i if it runs (SIGTERM) and starts a fresh process in its place. */
  restartOperator(i: number): Promise<SandboxedOperator>;
  /**
   * Every replica is alive, and no replica process was ever answered 403 (the ClusterRole
   * covers every request): the live ones are asked now, the ones killOperator / restartOperator
   * stopped were asked just before.
   */
  assertOperatorsHealthy(): Promise<void>;
  /** Log files of the processes, for failure messages. */
  logFiles(): Record<string, string>;
  /** Stops everything; idempotent. */
  stop(): Promise<void>;
}

/** The default simulator nodes: two nodes of the default pool. */
export const DEFAULT_NODES: readonly SimNode[] = [
  { name: "vk-a", pool: "default", seats: 8 },
  { name: "vk-b", pool: "default", seats: 8 },
];

/** Namespace of the operators (their Lease and ServiceAccount). */
export const OPERATOR_NAMESPACE = "cocoon-system";

/** Runs every cleanup, even after a failure, and throws the first error afterwards. */
async function runAll(cleanups: (() => Promise<unknown>)[]): Promise<void> {
  let first: unknown;
  for (const cleanup of cleanups) {
    try {
      await cleanup();
    } catch (err) {
      first ??= err;
    }
  }
  if (first !== undefined) throw first;
}

/** Starts the system (see the module doc). */
export async function startStack(opts: StackOptions = {}): Promise<Stack> {
  const prefix = opts.prefix ?? "cocoon";
  const replicas = opts.operators ?? 1;
  const leaderElect = opts.leaderElect ?? replicas > 1;
  /** Cleanups of what is running, last started first. */
  const started: (() => Promise<unknown>)[] = [];
  const stopAll = () => runAll(started.splice(0).reverse());
  try {
    const [cp, registry] = await Promise.all([
      startControlPlane(opts.controlPlane).then((cp) => {
        started.push(() => cp.stop());
        return cp;
      }),
      startRegistry({ auth: "none" }).then((r) => {
        started.push(() => r.stop());
        return r;
      }),
    ]);
    const proxy = startRegistryProxy(registry.url);
    proxy.tagDeletes = opts.registryTagDeletes ?? false;
    started.push(async () => {
      // Runs after the operators stopped (cleanups go last first), so nothing is missed.
      await recordRegistryRequests(proxy.requests);
      await proxy.close();
    });
    const transport = new Transport(await loadRestConfig(cp.kubeconfigPath));
    started.push(() => Promise.resolve(transport.close()));
    const admin = new ApiClient(transport, "e2e-test");
    await admin.create(Namespaces, { metadata: { name: OPERATOR_NAMESPACE } });
    if (opts.projectRbac === false && replicas > 0) {
      throw new Error("startStack: projectRbac: false runs no replica (operators: 0)");
    }
    const kubeconfig = opts.projectRbac === false
      ? ""
      : opts.operatorRbac !== undefined
      ? await operatorKubeconfigUnder(cp, opts.operatorRbac)
      : await operatorKubeconfig(cp, opts.extraRbac);
    let execPlugin: TokenPlugin | undefined;
    if (opts.execPlugin) {
      const dir = await Deno.makeTempDir({ prefix: "cocoon-exec-plugin-" });
      started.push(() => Deno.remove(dir, { recursive: true }));
      execPlugin = await writeTokenPlugin(cp, kubeconfig, dir, opts.execPlugin.ttlSeconds);
    }

    const operators: SandboxedOperator[] = [];
    const exited = new Set<SandboxedOperator>();
    /** 403s of replica processes stopped on purpose, read just before they were stopped. */
    const retiredForbidden: { replica: number; count: number; output: string }[] = [];
    const retire = async (i: number) => {
      const op = operators[i];
      const count = await op.forbiddenRequests().catch(() => 0);
      retiredForbidden.push({ replica: i, count, output: op.proc.output.slice(-3000) });
    };
    const startReplica = async (i: number): Promise<SandboxedOperator> => {
      const op = await startSandboxedOperator({
        cp,
        ociRegistry: `${proxy.host}/${prefix}`,
        kubeconfig,
        execPlugin,
        env: {
          POD_NAME: `cocoon-operator-${i}`,
          LEADER_ELECT: String(leaderElect),
          ...opts.operatorEnv,
        },
      });
      const gone = () => exited.add(op);
      op.proc.status.then(gone, gone);
      operators[i] = op;
      return op;
    };
    started.push(() => runAll(operators.map((op) => () => op.stop(10_000))));

    // The simulator and the replicas start side by side; whatever started is stopped on failure.
    const simStart = startSimProcess({
      kubeconfig: cp.kubeconfigPath,
      registry: `${registry.host}/${prefix}`,
      nodes: opts.nodes ? [...opts.nodes] : [...DEFAULT_NODES],
      latencies: opts.latencies,
      args: opts.simArgs,
    }).then((sim) => {
      started.push(() => sim.stop());
      return sim;
    });
    const outcomes = await Promise.allSettled([
      simStart,
      ...Array.from({ length: replicas }, (_, i) => startReplica(i)),
    ]);
    const failed = outcomes.find((o) => o.status === "rejected");
    if (failed) throw failed.reason;
    const sim = await simStart;

    const alive = (i: number) => operators[i] !== undefined && !exited.has(operators[i]);
    const scrape = async (i: number) => await operators[i].metrics();
    const stack: Stack = {
      cp,
      registry,
      proxy,
      prefix,
      sim,
      operators,
      admin,
      execPlugin,
      async namespace(name) {
        try {
          await admin.create(Namespaces, { metadata: { name } });
        } catch (err) {
          if (!isAlreadyExists(err)) throw err;
        }
      },
      async events(obj) {
        const { namespace = "", name, uid } = obj.metadata;
        const list = await admin.list(Events, { namespace });
        return list.items.filter((e) =>
          e.involvedObject.kind === obj.kind && e.involvedObject.name === name &&
          (uid === undefined || e.involvedObject.uid === uid)
        );
      },
      async metric(name, labels = {}, i) {
        const which = i === undefined ? operators.map((_, j) => j).filter(alive) : [i];
        let sum = 0;
        for (const j of which) sum += sampleSum(await scrape(j), name, labels);
        return sum;
      },
      tagsOf: (vmName) => registry.tagsOf(`${prefix}/${vmName}`),
      alive,
      async killOperator(i, signal = "SIGTERM") {
        const op = operators[i];
        if (alive(i)) {
          await retire(i);
          await op.recordMetrics();
        }
        op.proc.kill(signal);
        return await op.proc.status;
      },
      async restartOperator(i) {
        if (alive(i)) {
          await retire(i);
          await operators[i].stop(10_000);
        }
        return await startReplica(i);
      },
      async assertOperatorsHealthy() {
        const dead = operators.map((_, i) => i).filter((i) => !alive(i));
        if (dead.length > 0) {
          const op = operators[dead[0]];
          throw new Error(
            `operator replica(s) ${dead.join(", ")} exited:\n${op.proc.output.slice(-3000)}`,
          );
        }
        for (const op of operators) await op.assertNoForbidden();
        const earlier = retiredForbidden.find((r) => r.count > 0);
        if (earlier) {
          throw new Error(
            `the API server answered 403 to ${earlier.count} request(s) of replica ` +
              `${earlier.replica} before it was stopped: config/rbac/role.yaml or ` +
              `leader_election_role.yaml lacks a verb the code uses\n${earlier.output}`,
          );
        }
      },
      logFiles() {
        const files: Record<string, string> = { sim: sim.proc.logFile };
        operators.forEach((op, i) => (files[`operator-${i}`] = op.proc.logFile));
        return files;
      },
      stop: stopAll,
      [Symbol.asyncDispose]: stopAll,
    };
    return stack;
  } catch (err) {
    await stopAll().catch(() => {});
    throw err;
  }
}

/**
 * Declares a test that runs body on one stack of its own: skipped (saying why) when the registry
 * binary is missing, the process log files named on stderr when the body fails, and the stack
 * stopped in any case. The e2e and fault suites build their steps on it.
 */
export function stackTest(
  name: string,
  opts: StackOptions,
  body: (stack: Stack, t: Deno.TestContext) => Promise<void>,
  test: {
    /** Skip it anyway (the name says why). */
    ignore?: boolean;
    /** Fail at once with this message, starting nothing (a prerequisite CI must have). */
    failWith?: string;
  } = {},
): void {
  Deno.test({
    name,
    ignore: !registryAvailable() || test.ignore === true,
    sanitizeResources: false,
    sanitizeOps: false,
    async fn(t) {
      if (test.failWith) throw new Error(test.failWith);
      const stack = await startStack(opts);
      try {
        await body(stack, t);
      } catch (err) {
        const logs = Object.entries(stack.logFiles()).map(([k, v]) => `${k}: ${v}`).join("\n");
        console.error(`--- ${name}: process logs ---\n${logs}`);
        throw err;
      } finally {
        await stack.stop();
      }
    },
  });
}
