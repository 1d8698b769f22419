/**
 * What deleting a large CocoonSet costs the operator, next to what creating it cost: API requests
 * by verb and operator CPU seconds for a set of `replicas` sub-agents (plus the main), on the real
 * control plane (kube-apiserver with its watch cache, etcd), a real registry behind the counting
 * proxy, the VM simulator in-process with every latency 0, and the operator as a separate process
 * (main.ts under the in-cluster permission set and exactly config/rbac's ClusterRole, leader
 * election off so no Lease renewals are counted).
 *
 * - Requests: the operator's own `rest_client_requests_total`, scraped from /metrics before and
 *   after each phase; the registry requests it sent, from the proxy.
 * - CPU: utime + stime of the operator process from /proc/<pid>/stat before and after.
 * - A phase ends when its outcome is visible (every agent Ready; the set and its pods gone) and the
 *   operator has been quiet (no new API request) for a while; the quiet wait is inside the phase.
 *
 * The set uses snapshotPolicy `never` (the shape the original was measured with: 2 002 tag
 * DELETEs for 1 001 pods).
 *
 * Run alone: `deno run -A tests/bench/delete_at_scale.ts [--replicas 1000]` (prints one JSON line
 * with the details, then the summary); `deno task bench` runs it as its `deleteAtScale` key.
 *
 * @module
 */
import { parseArgs } from "node:util";
import { ApiClient } from "../../kube/api_client.ts";
import { Namespaces, Pods } from "../../kube/core.ts";
import { isNotFound } from "../../kube/errors.ts";
import { loadRestConfig, Transport } from "../../kube/transport.ts";
import { CocoonSets } from "../../common/apis/v1/resources.ts";
import { LABEL_COCOON_SET } from "../../common/meta/keys.ts";
import { startSimulator } from "../../sim/simulator.ts";
import { startControlPlane } from "../harness/control_plane.ts";
import { startRegistry } from "../harness/registry.ts";
import { startRegistryProxy } from "../harness/registry_proxy.ts";
import { startSandboxedOperator } from "../harness/sandboxed_operator.ts";
import { waitUntil } from "../harness/wait.ts";
import {
  countDelta,
  cpuSecondsOf,
  reconcilesOf,
  requestsByMethod,
} from "../harness/operator_metrics.ts";

/** The `deleteAtScale` summary key of `deno task bench`. */
export interface DeleteAtScaleSummary {
  replicas: number;
  createRequests: number;
  deleteRequests: number;
  createCpuSeconds: number;
  deleteCpuSeconds: number;
}

/** One phase's figures. */
export interface PhaseCost {
  /** Operator API requests by HTTP method. */
  requestsByMethod: Record<string, number>;
  requests: number;
  /** Operator requests to the registry by HTTP method (HEAD probes, DELETE tags). */
  registryByMethod: Record<string, number>;
  cpuSeconds: number;
  wallSeconds: number;
  /** CocoonSet reconcile passes. */
  passes: number;
}

/** The summary and both phases in detail. */
export interface DeleteAtScaleResult {
  summary: DeleteAtScaleSummary;
  create: PhaseCost;
  delete: PhaseCost;
}

const NS = "bench";
const SET = "scale";
const PREFIX = "cocoon";

function total(byMethod: Record<string, number>): number {
  return Object.values(byMethod).reduce((a, b) => a + b, 0);
}

function countBy<T>(items: readonly T[], key: (t: T) => string): Record<string, number> {
  const out: Record<string, number> = {};
  for (const i of items) out[key(i)] = (out[key(i)] ?? 0) + 1;
  return out;
}

/** Measures create and delete of a CocoonSet with `replicas` sub-agents (see module doc). */
export async function benchDeleteAtScale(replicas = 1000): Promise<DeleteAtScaleResult> {
  const cp = await startControlPlane({ watchCache: true });
  const registry = await startRegistry({ auth: "none" });
  const proxy = startRegistryProxy(registry.url);
  const transport = new Transport(await loadRestConfig(cp.kubeconfigPath));
  const admin = new ApiClient(transport);
  const cleanups: (() => Promise<unknown>)[] = [];
  try {
    await admin.create(Namespaces, { metadata: { name: "cocoon-system" } });
    await admin.create(Namespaces, { metadata: { name: NS } });
    const sim = await startSimulator({
      client: admin,
      registry: { url: `${registry.host}/${PREFIX}` },
      // Sub-agents are bound to the main's node: one node holds the whole set.
      nodes: [{ name: "vk-bench", seats: replicas + 16 }],
      namespace: NS,
      latencies: { bootMs: 0, wakeMs: 0, hibernateMs: 0, deleteMs: 0 },
    });
    cleanups.push(() => sim.stop());
    const op = await startSandboxedOperator({
      cp,
      ociRegistry: `${proxy.host}/${PREFIX}`,
      args: ["--leader-elect=false"],
    });
    cleanups.push(() => op.stop(10_000));
    const pid = op.proc.pid;

    /** Waits until the operator sent no API request for quietMs; returns the last scrape. */
    const quiet = async (quietMs = 3_000) => {
      let last = total(requestsByMethod(await op.metrics()));
      let since = Date.now();
      return await waitUntil(async () => {
        const text = await op.metrics();
        const now = total(requestsByMethod(text));
        if (now !== last) {
          last = now;
          since = Date.now();
          return undefined;
        }
        return Date.now() - since >= quietMs ? text : undefined;
      }, { what: "the operator to go quiet", timeoutMs: 600_000, intervalMs: 250 });
    };
    const mark = async () => {
      const text = await quiet();
      return {
        requests: requestsByMethod(text),
        passes: reconcilesOf(text, "cocoonset"),
        cpu: await cpuSecondsOf(pid),
        registry: proxy.requests.length,
        at: performance.now(),
      };
    };
    const cost = async (
      before: Awaited<ReturnType<typeof mark>>,
      until: () => Promise<boolean>,
      what: string,
    ): Promise<PhaseCost> => {
      await waitUntil(until, { what, timeoutMs: 900_000, intervalMs: 500 });
      const after = await mark();
      const byMethod = countDelta(after.requests, before.requests);
      return {
        requestsByMethod: byMethod,
        requests: total(byMethod),
        registryByMethod: countBy(
          proxy.requests.slice(before.registry, after.registry),
          (r) => r.method,
        ),
        cpuSeconds: +(after.cpu - before.cpu).toFixed(2),
        wallSeconds: +((after.at - before.at) / 1000).toFixed(1),
        passes: after.passes - before.passes,
      };
    };

    const start = await mark();
    await admin.create(CocoonSets, {
      apiVersion: "cocoonset.cocoonstack.io/v1",
      kind: "CocoonSet",
      metadata: { name: SET, namespace: NS },
      spec: {
        agent: { image: "ghcr.io/cocoonstack/cocoon/ubuntu:24.04", replicas },
        snapshotPolicy: "never",
      },
    });
    const create = await cost(start, async () => {
      const cs = await admin.get(CocoonSets, NS, SET);
      return cs.status?.readyAgents === replicas + 1 && cs.status?.phase === "Running";
    }, `${replicas + 1} agents Ready`);

    const beforeDelete = await mark();
    await admin.delete(CocoonSets, NS, SET);
    const del = await cost(beforeDelete, async () => {
      try {
        await admin.get(CocoonSets, NS, SET);
        return false;
      } catch (err) {
        if (!isNotFound(err)) throw err;
      }
      const pods = await admin.list(Pods, {
        namespace: NS,
        labelSelector: { [LABEL_COCOON_SET]: SET },
      });
      return pods.items.length === 0;
    }, "the set and its pods gone");
    await op.assertNoForbidden();
    return {
      summary: {
        replicas,
        createRequests: create.requests,
        deleteRequests: del.requests,
        createCpuSeconds: create.cpuSeconds,
        deleteCpuSeconds: del.cpuSeconds,
      },
      create,
      delete: del,
    };
  } finally {
    for (const c of cleanups.reverse()) await c().catch(() => {});
    transport.close();
    await proxy.close();
    await registry.stop();
    await cp.stop();
  }
}

/** The replica count of `--replicas N`: a whole number of at least 1, else undefined. */
export function parseReplicas(args: string[]): number | undefined {
  try {
    const { values } = parseArgs({
      args,
      options: { replicas: { type: "string", default: "1000" } },
      strict: true,
      allowPositionals: false,
    });
    const n = Number(values.replicas);
    return Number.isSafeInteger(n) && n >= 1 ? n : undefined;
  } catch {
    return undefined;
  }
}

if (import.meta.main) {
  const replicas = parseReplicas(Deno.args);
  if (replicas === undefined) {
    console.error("usage: deno run -A tests/bench/delete_at_scale.ts [--replicas N] (N ≥ 1)");
    Deno.exit(2);
  }
  const r = await benchDeleteAtScale(replicas);
  console.log(JSON.stringify({ bench: "delete_at_scale", create: r.create, delete: r.delete }));
  console.log(JSON.stringify({ deleteAtScale: r.summary }));
}
