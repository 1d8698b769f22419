/**
 * The VM simulator as a process, as `deno task sim` runs it (the task's own permission flags,
 * sim/main.ts), with its status endpoint on a free loopback port: what a test reads from an
 * in-process Simulator (seats, counters, a VM's state, the event stream) and the seat changes it
 * makes go through that endpoint (sim/status_server.ts).
 *
 * @module
 */
import type { NumberedSimEvent, SimCounters } from "../../sim/events.ts";
import type { Latencies } from "../../sim/kubelet.ts";
import type { SimNode } from "../../sim/nodes.ts";
import type { NodeSeats } from "../../sim/status_server.ts";
import type { VmInfo } from "../../sim/vm.ts";
import { type ProcessHandle, runProcess } from "./process.ts";
import { taskPermissionFlags } from "./tasks.ts";
import { freePort } from "./wait.ts";

const repoRoot = new URL("../../", import.meta.url).pathname;

/** How to start the simulator process. */
export interface SimProcessOptions {
  /** Kubeconfig it acts with (it plays the kubelet and the scheduler). */
  kubeconfig: string;
  /** The registry in OCI_REGISTRY form (`127.0.0.1:<port>/<prefix>`). */
  registry: string;
  /** Node names with pool, seats and CPU class (`--node name:pool:seats:class`). */
  nodes: SimNode[];
  latencies?: Partial<Latencies>;
  /** More sim flags (e.g. `--log-level=debug`). */
  args?: string[];
}

/** A running simulator process. */
export interface SimProcess {
  readonly proc: ProcessHandle;
  /** `http://127.0.0.1:<port>` of its status endpoint. */
  readonly statusUrl: string;
  /** Seats and usage per node, and the counters. */
  status(): Promise<{ nodes: NodeSeats[]; counters: SimCounters }>;
  /** What the simulator knows about a pod's VM; undefined when it has no record. */
  vm(namespace: string, name: string): Promise<VmInfo | undefined>;
  /** Seats taken on node (terminating pods included). */
  seatsUsed(node: string): Promise<number>;
  /** Changes node's pod capacity; waiting pods are retried. */
  setSeats(node: string, seats: number): Promise<void>;
  /** Events numbered above `since` (default: all kept), and the next number. */
  events(since?: number): Promise<{ events: NumberedSimEvent[]; next: number }>;
  /** SIGTERM (SIGKILL after graceMs); resolves with the exit status. */
  stop(graceMs?: number): Promise<Deno.CommandStatus>;
}

function nodeFlag(n: SimNode): string {
  if (n.labels && Object.keys(n.labels).length > 0) {
    throw new Error(`sim node ${n.name}: extra labels cannot be given on the command line`);
  }
  return `--node=${n.name}:${n.pool ?? ""}:${n.seats}${n.cpuClass ? `:${n.cpuClass}` : ""}`;
}

function latencyFlags(l: Partial<Latencies> = {}): string[] {
  const flags: [keyof Latencies, string][] = [
    ["bootMs", "boot-ms"],
    ["wakeMs", "wake-ms"],
    ["hibernateMs", "hibernate-ms"],
    ["deleteMs", "delete-ms"],
  ];
  return flags.filter(([k]) => l[k] !== undefined).map(([k, flag]) => `--${flag}=${l[k]}`);
}

/** Starts sim/main.ts and waits until it has registered its nodes and serves its status. */
export async function startSimProcess(opts: SimProcessOptions): Promise<SimProcess> {
  const port = freePort();
  const statusUrl = `http://127.0.0.1:${port}`;
  const proc = await runProcess([
    "deno",
    "run",
    ...(await taskPermissionFlags("sim")),
    `${repoRoot}sim/main.ts`,
    `--kubeconfig=${opts.kubeconfig}`,
    `--registry=${opts.registry}`,
    ...opts.nodes.map(nodeFlag),
    ...latencyFlags(opts.latencies),
    `--status-addr=127.0.0.1:${port}`,
    ...(opts.args ?? []),
  ], { cwd: repoRoot });
  try {
    await proc.waitForOutput(/status endpoint on http/, 60_000);
  } catch (err) {
    await proc.stop(2_000).catch(() => {});
    throw err;
  }
  const call = async <T>(path: string, init?: RequestInit): Promise<T | undefined> => {
    const res = await fetch(`${statusUrl}${path}`, init);
    if (res.status === 404 && path.startsWith("/vms/")) {
      await res.body?.cancel();
      return undefined;
    }
    if (res.status === 204) return undefined;
    const body = await res.json();
    if (!res.ok) throw new Error(`sim ${path}: ${res.status} ${JSON.stringify(body)}`);
    return body as T;
  };
  const status = async () =>
    (await call<{ nodes: NodeSeats[]; counters: SimCounters }>("/status"))!;
  return {
    proc,
    statusUrl,
    status,
    vm: (namespace, name) =>
      call<VmInfo>(`/vms/${encodeURIComponent(namespace)}/${encodeURIComponent(name)}`),
    async seatsUsed(node) {
      const n = (await status()).nodes.find((x) => x.name === node);
      if (!n) throw new Error(`${node} is not a simulator node`);
      return n.used;
    },
    async setSeats(node, seats) {
      await call(`/nodes/${encodeURIComponent(node)}/seats`, {
        method: "PUT",
        body: JSON.stringify({ seats }),
      });
    },
    async events(since = 0) {
      return (await call<{ events: NumberedSimEvent[]; next: number }>(`/events?since=${since}`))!;
    },
    stop: (graceMs = 10_000) => proc.stop(graceMs),
  };
}
