/**
 * What a set above the per-set limit costs the operator: its resident memory while a
 * set with limit + 1 replicas is refused and while one with `replicas: 2147483647` is, next to
 * idle; and, to show what the default limit buys, a set at the limit converging (memory, time and
 * the size of its status, which must fit in one etcd object).
 *
 * Real control plane (kube-apiserver with its watch cache, etcd), a real registry, the VM
 * simulator in-process with every latency 0, and the operator as a separate process (main.ts under
 * the in-cluster permission set, leader election off). RSS is VmRSS of the operator process,
 * read once it sent no API request for 3 s. Nothing here asserts: the tests do that.
 *
 * Run alone: `deno run -A tests/bench/refused_at_scale.ts [--limit 1000]` (prints the summary as
 * one JSON line); `deno task bench` runs it as its `refusedAtScale` key.
 *
 * @module
 */
import { parseArgs } from "node:util";
import { ApiClient } from "../../kube/api_client.ts";
import { Namespaces } from "../../kube/core.ts";
import { loadRestConfig, Transport } from "../../kube/transport.ts";
import type { CocoonSet } from "../../common/apis/v1/cocoonset_types.ts";
import { CocoonSets } from "../../common/apis/v1/resources.ts";
import { startSimulator } from "../../sim/simulator.ts";
import { startControlPlane } from "../harness/control_plane.ts";
import { startRegistry } from "../harness/registry.ts";
import { startSandboxedOperator } from "../harness/sandboxed_operator.ts";
import { waitUntil } from "../harness/wait.ts";
import { requestsByMethod } from "../harness/operator_metrics.ts";
import { readMemory } from "./proc_stats.ts";

/** The `refusedAtScale` summary key of `deno task bench`. */
export interface RefusedAtScaleSummary {
  /** --max-replicas-per-set the operator ran with. */
  limit: number;
  /** RSS with one small set Running and nothing to do. */
  idleRssMiB: number;
  /** RSS once a set with limit + 1 replicas is refused (InvalidSpec). */
  overLimitRssMiB: number;
  /** RSS once a set with replicas 2147483647 is refused too. */
  int32MaxRssMiB: number;
  /** A set with exactly `limit` replicas: seconds to all Running, RSS after, peak RSS. */
  atLimitSeconds: number;
  atLimitRssMiB: number;
  atLimitPeakRssMiB: number;
  /** Bytes of that set's status as JSON (etcd takes objects up to 1.5 MiB). */
  atLimitStatusBytes: number;
}

const NS = "bench-refused";
const PREFIX = "cocoon";
const IMAGE = "ghcr.io/cocoonstack/cocoon/ubuntu:24.04";

/** Measures the figures of RefusedAtScaleSummary (see module doc). */
export async function benchRefusedAtScale(limit = 1000): Promise<RefusedAtScaleSummary> {
  const cp = await startControlPlane({ watchCache: true });
  const registry = await startRegistry({ auth: "none" });
  const transport = new Transport(await loadRestConfig(cp.kubeconfigPath));
  const admin = new ApiClient(transport);
  const cleanups: (() => Promise<unknown>)[] = [];
  try {
    await admin.create(Namespaces, { metadata: { name: "cocoon-system" } });
    await admin.create(Namespaces, { metadata: { name: NS } });
    const sim = await startSimulator({
      client: admin,
      registry: { url: `${registry.host}/${PREFIX}` },
      nodes: [{ name: "vk-bench", seats: limit + 16 }],
      namespace: NS,
      latencies: { bootMs: 0, wakeMs: 0, hibernateMs: 0, deleteMs: 0 },
    });
    cleanups.push(() => sim.stop());
    const op = await startSandboxedOperator({
      cp,
      ociRegistry: `${registry.host}/${PREFIX}`,
      args: ["--leader-elect=false", `--max-replicas-per-set=${limit}`],
    });
    cleanups.push(() => op.stop(10_000));
    const pid = op.proc.pid;

    const requests = async () =>
      Object.values(requestsByMethod(await op.metrics())).reduce((a, b) => a + b, 0);
    /** RSS once the operator sent no API request for 3 s. */
    const quietRss = async () => {
      let last = await requests();
      let since = Date.now();
      await waitUntil(async () => {
        const now = await requests();
        if (now !== last) {
          last = now;
          since = Date.now();
          return false;
        }
        return Date.now() - since >= 3_000;
      }, { what: "the operator to go quiet", timeoutMs: 600_000, intervalMs: 250 });
      return await readMemory(pid);
    };
    const create = (name: string, replicas: number) =>
      admin.create(CocoonSets, {
        apiVersion: "cocoonset.cocoonstack.io/v1",
        kind: "CocoonSet",
        metadata: { name, namespace: NS },
        spec: { agent: { image: IMAGE, replicas }, snapshotPolicy: "never" },
      });
    const waitSet = (name: string, ok: (cs: CocoonSet) => boolean, what: string) =>
      waitUntil(async () => {
        const cs = await admin.get(CocoonSets, NS, name);
        return ok(cs) ? cs : undefined;
      }, { what: `${name}: ${what}`, timeoutMs: 900_000, intervalMs: 250 });
    const refused = (cs: CocoonSet) =>
      cs.status?.conditions?.some((c) => c.type === "Ready" && c.reason === "InvalidSpec") ===
        true && cs.status?.readyAgents === 1;

    await create("small", 1);
    await waitSet("small", (cs) => cs.status?.phase === "Running", "Running");
    const idle = await quietRss();

    await create("over", limit + 1);
    await waitSet("over", refused, "refused");
    const over = await quietRss();

    await create("int32max", 2_147_483_647);
    await waitSet("int32max", refused, "refused");
    const int32Max = await quietRss();

    const started = performance.now();
    await create("atlimit", limit);
    const atLimit = await waitSet(
      "atlimit",
      (cs) => cs.status?.phase === "Running" && cs.status.readyAgents === limit + 1,
      `${limit + 1} agents Running`,
    );
    const seconds = (performance.now() - started) / 1000;
    const after = await quietRss();
    return {
      limit,
      idleRssMiB: idle.rssMiB,
      overLimitRssMiB: over.rssMiB,
      int32MaxRssMiB: int32Max.rssMiB,
      atLimitSeconds: +seconds.toFixed(1),
      atLimitRssMiB: after.rssMiB,
      atLimitPeakRssMiB: after.peakRssMiB,
      atLimitStatusBytes: new TextEncoder().encode(JSON.stringify(atLimit.status)).length,
    };
  } finally {
    for (const c of cleanups.reverse()) await c().catch(() => {});
    transport.close();
    await registry.stop();
    await cp.stop();
  }
}

if (import.meta.main) {
  const { values } = parseArgs({
    args: Deno.args,
    options: { limit: { type: "string", default: "1000" } },
    strict: true,
    allowPositionals: false,
  });
  const limit = Number(values.limit);
  if (!Number.isSafeInteger(limit) || limit < 1) {
    console.error("usage: deno run -A tests/bench/refused_at_scale.ts [--limit N] (N ≥ 1)");
    Deno.exit(2);
  }
  console.log(JSON.stringify({ refusedAtScale: await benchRefusedAtScale(limit) }));
}
