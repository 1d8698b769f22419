/**
 * The VM simulator: plays vk-cocoon, the kube-scheduler and the kubelet for a set of virtual
 * nodes against any kube/ Client (a real API server through kube/api_client.ts, or the
 * in-memory kube/testing/fake.ts), with snapshots pushed to a loopback OCI registry. It is a
 * development and test tool: integration tests run it in-process, `deno task sim` runs it as a
 * process (sim/main.ts), benchmarks drive its latencies. Production code never imports it.
 *
 * ```ts
 * import { FakeClient } from "../kube/testing/fake.ts";
 * import { startSimulator } from "./simulator.ts";
 *
 * const sim = await startSimulator({
 *   client: new FakeClient(), // or an ApiClient on a real API server
 *   registry: { url: "127.0.0.1:5000/cocoon" },
 *   nodes: [{ name: "vk-0", pool: "default", seats: 4 }],
 *   latencies: { bootMs: 0 },
 * });
 * // ... create pods like the operator does; they get bound, booted, hibernated, finalized ...
 * console.log(sim.counters.booted, sim.vm("ns", "demo-0")?.phase);
 * await sim.stop();
 * ```
 *
 * What it does to pods is documented in sim/scheduler.ts (binding, Unschedulable) and
 * sim/kubelet.ts (boot, hibernate, wake, delete); failure knobs in sim/knobs.ts.
 *
 * @module
 */
import { getLogger } from "@logtape/logtape";
import type { Client } from "../kube/client.ts";
import { type Clock, realClock } from "../kube/clock.ts";
import { type Node, Nodes, type Pod, Pods } from "../kube/core.ts";
import { errorMessage, isNotFound } from "../kube/errors.ts";
import { SharedInformer } from "../kube/informer.ts";
import { newCounters, type SimCounters, type SimEvent } from "./events.ts";
import type { Knobs } from "./knobs.ts";
import { DEFAULT_LATENCIES, Kubelet, type Latencies } from "./kubelet.ts";
import { ensureNode, LABEL_SIMULATED_NODE, setNodeSeats, type SimNode } from "./nodes.ts";
import { SimRegistry, type SimRegistryAddress } from "./oci_push.ts";
import { Scheduler } from "./scheduler.ts";
import type { VmInfo } from "./vm.ts";

export type { SimCounters, SimEvent, SimEventType } from "./events.ts";
export type { FailMode, Knobs } from "./knobs.ts";
export {
  ANNOTATION_SIM_BOOT_DELAY_MS,
  ANNOTATION_SIM_FAIL,
  ANNOTATION_SIM_FAIL_MESSAGE,
  ANNOTATION_SIM_HIBERNATE_DELAY_MS,
  ANNOTATION_SIM_PUSH_FAIL,
} from "./knobs.ts";
export { DEFAULT_LATENCIES, type Latencies } from "./kubelet.ts";
export type { SimNode } from "./nodes.ts";
export type { SimRegistryAddress } from "./oci_push.ts";
export type { VmInfo, VmPhase } from "./vm.ts";

const log = getLogger(["cocoon-operator", "sim"]);

/** How to run the simulator. */
export interface SimulatorOptions {
  /**
   * An API client: ApiClient for a real API server, FakeClient in unit tests. Not the manager's
   * CachedClient: the simulator lists and watches through it and needs the server's answers.
   */
  client: Client;
  /**
   * The OCI registry snapshots go to, in the operator's OCI_REGISTRY form
   * (`127.0.0.1:5000/prefix`; `http://` accepted). Loopback hosts only, plain HTTP, no auth.
   */
  registry: { url: string; timeoutMs?: number };
  /** The virtual nodes to register (names must be unique). */
  nodes: SimNode[];
  /** Only handle pods of this namespace (default: all namespaces). */
  namespace?: string;
  /** Operation latencies; unset fields keep DEFAULT_LATENCIES. */
  latencies?: Partial<Latencies>;
  /** Failure / timing knobs for every pod (pod annotations override them). */
  knobs?: Knobs;
  /** Knobs picked per pod in-process, e.g. failing every sub-agent (annotations still win). */
  knobsFor?: (pod: Pod) => Knobs | undefined;
  /** Run the scheduler (default true); false when a real scheduler places pods. */
  scheduler?: boolean;
  /** Concurrent VM workers (default 32); one pod is never handled by two at once. */
  workers?: number;
  /** Time source of the latencies and timestamps (default: the wall clock). */
  clock?: Clock;
  /** Receives every simulator event (benchmarks measure latencies from them). */
  onEvent?: (ev: SimEvent) => void;
  /** Delete the Node objects on stop() (default false: nodes stay, like a stopped kubelet's). */
  removeNodesOnStop?: boolean;
  /** How long start waits for its pod and node watches to sync (default 60 s). */
  syncTimeoutMs?: number;
}

/** A running simulator. */
export interface Simulator {
  /** The nodes it runs (registered and watched). */
  readonly nodes: readonly SimNode[];
  /** Live counters (read them any time; they only grow). */
  readonly counters: Readonly<SimCounters>;
  /** The registry it pushes to. */
  readonly registry: SimRegistryAddress;
  /** What the simulator knows about a pod's VM (undefined: not on its nodes, or finished). */
  vm(namespace: string, name: string): VmInfo | undefined;
  /** Seats taken on a node by the scheduler's count (terminating pods included). */
  seatsUsed(node: string): number;
  /** Registers one more node and starts running pods bound to it. */
  addNode(node: SimNode): Promise<void>;
  /** Changes a node's pod capacity; pods waiting for a seat are retried. */
  setSeats(node: string, seats: number): Promise<void>;
  /** Stops scheduling and VM work, closes the watches; idempotent. */
  stop(): Promise<void>;
}

const NODE_NAME = /^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$/;

function validateNode(node: SimNode, seen: Set<string>): void {
  if (!NODE_NAME.test(node.name) || node.name.length > 253) {
    throw new Error(`simulator node name ${JSON.stringify(node.name)} is not a valid node name`);
  }
  if (seen.has(node.name)) throw new Error(`simulator node ${node.name} is listed twice`);
  if (!Number.isInteger(node.seats) || node.seats < 0) {
    throw new Error(`simulator node ${node.name}: seats must be a whole number ≥ 0`);
  }
  seen.add(node.name);
}

function resolveLatencies(partial: Partial<Latencies> = {}): Latencies {
  const out = { ...DEFAULT_LATENCIES };
  for (const [k, v] of Object.entries(partial) as [keyof Latencies, number | undefined][]) {
    if (v === undefined) continue;
    if (!Number.isFinite(v) || v < 0) throw new Error(`simulator latency ${k} must be ≥ 0`);
    out[k] = v;
  }
  return out;
}

/**
 * Registers the nodes, starts the pod and node watches, and once they have synced starts the
 * scheduler and the VM workers. Rejects (after cleaning up) when the options are invalid, a
 * node cannot be registered or the watches do not sync in time.
 */
export async function startSimulator(opts: SimulatorOptions): Promise<Simulator> {
  const seen = new Set<string>();
  for (const node of opts.nodes) validateNode(node, seen);
  const latencies = resolveLatencies(opts.latencies);
  const registry = new SimRegistry(opts.registry.url, { timeoutMs: opts.registry.timeoutMs });
  const clock = opts.clock ?? realClock;
  const client = opts.client;
  const counters = newCounters();
  const nodes: SimNode[] = opts.nodes.map((n) => ({ ...n }));
  const ownNodes = new Set<string>();
  const emit = (ev: Omit<SimEvent, "at">) => {
    if (!opts.onEvent) return;
    try {
      opts.onEvent({ ...ev, at: clock.now() });
    } catch (err) {
      log.warn("simulator event listener threw: {error}", { error: errorMessage(err) });
    }
  };

  for (const [i, node] of nodes.entries()) {
    await ensureNode(client, node, i, clock.now());
    ownNodes.add(node.name);
  }

  const stop = new AbortController();
  const podInformer = new SharedInformer<Pod>({ client, rt: Pods, namespace: opts.namespace });
  const nodeInformer = new SharedInformer<Node>({
    client,
    rt: Nodes,
    labelSelector: { [LABEL_SIMULATED_NODE]: "true" },
  });
  const kubelet = new Kubelet({
    client,
    registry,
    pods: podInformer,
    ownNodes,
    latencies,
    knobs: opts.knobs ?? {},
    knobsFor: opts.knobsFor,
    workers: opts.workers ?? 32,
    clock,
    counters,
    emit,
    signal: stop.signal,
  });
  const scheduler = opts.scheduler === false ? undefined : new Scheduler({
    client,
    pods: podInformer,
    nodes: nodeInformer,
    ownNodes,
    clock,
    counters,
    emit,
  });
  const watches = [podInformer.run(stop.signal), nodeInformer.run(stop.signal)];
  const syncDeadline = AbortSignal.any([
    stop.signal,
    AbortSignal.timeout(opts.syncTimeoutMs ?? 60_000),
  ]);
  try {
    await Promise.all([
      podInformer.waitForSync(syncDeadline),
      nodeInformer.waitForSync(syncDeadline),
    ]);
  } catch (err) {
    stop.abort();
    await Promise.allSettled(watches);
    throw err;
  }
  const workers = [kubelet.run(), ...(scheduler ? [scheduler.run()] : [])];
  log.info("VM simulator running {count} node(s): {nodes}", {
    count: nodes.length,
    nodes: nodes.map((n) => n.name).join(", "),
  });

  let stopped: Promise<void> | undefined;
  return {
    nodes,
    counters,
    registry: registry.address,
    vm: (namespace, name) => kubelet.vm(namespace, name),
    seatsUsed: (node) => scheduler?.used(node) ?? 0,
    async addNode(node) {
      validateNode(node, new Set(ownNodes));
      await ensureNode(client, node, nodes.length, clock.now());
      nodes.push({ ...node });
      ownNodes.add(node.name);
      kubelet.resync(node.name);
      scheduler?.retry();
    },
    async setSeats(node, seats) {
      if (!ownNodes.has(node)) throw new Error(`${node} is not a simulator node`);
      if (!Number.isInteger(seats) || seats < 0) {
        throw new Error("seats must be a whole number ≥ 0");
      }
      await setNodeSeats(client, node, seats);
      const spec = nodes.find((n) => n.name === node);
      if (spec) spec.seats = seats;
    },
    stop() {
      stopped ??= (async () => {
        stop.abort();
        await Promise.allSettled([scheduler?.stop(), kubelet.stop()]);
        await Promise.allSettled([...workers, ...watches]);
        if (opts.removeNodesOnStop) {
          for (const node of nodes) {
            await client.delete(Nodes, "", node.name).catch((err) => {
              if (!isNotFound(err)) {
                log.warn("removing node {node} failed: {error}", {
                  node: node.name,
                  error: errorMessage(err),
                });
              }
            });
          }
        }
        log.info("VM simulator stopped");
      })();
      return stopped;
    },
  };
}
