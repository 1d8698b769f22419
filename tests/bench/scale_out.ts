/**
 * Scale-out: the same load converged by 1 and by 2 sharded replicas (SHARDS=auto both
 * times, so the code path is the same) on a Kubernetes 1.36 control plane with the
 * ShardedListAndWatch gate on, so the API server filters each replica's lists by its range.
 *
 * Each run starts a fresh system (control plane, registry, simulator), starts the replicas, waits
 * until each owns 1/n of the hash space, then creates N CocoonSets (default 1 000, main agent
 * only) over M namespaces (default 200) and waits until every one is Running.
 *
 * Figures, per run:
 * - secondsToAllRunning: from the first create until every set is Running with its agents (a
 *   cluster-wide list every 2 s).
 * - perReplica[i].cpuSeconds: user + system CPU of replica i over that span.
 * - perReplica[i].peakRssMiB: its VmHWM at the end of the span (since process start).
 * - perReplica[i].bytesReceived: bytes the API server sent replica i over that span, counted by a
 *   TCP forwarder per replica in front of the API server (TLS passes through it untouched; it
 *   counts the encrypted stream, so headers and TLS framing are included, as on the wire).
 *
 * Goals: 2 replicas ≥ 1.6× faster than 1; each replica's RSS and received bytes
 * ≤ 0.6× of the single replica's. Progress and the setup (control plane, whether each replica's
 * lists came back server-filtered, the machine's load) go to stderr.
 *
 * Run alone: `deno run -A tests/bench/scale_out.ts [--sets 1000] [--namespaces 200]
 * [--sub-agents 0] [--operator-cmd "…"]`. `deno task bench` runs it with the defaults
 * (`--quick`: 100 sets over 20 namespaces).
 *
 * @module
 */
import { parseArgs } from "node:util";
import type { CocoonSet } from "../../common/apis/v1/cocoonset_types.ts";
import { CocoonSets } from "../../common/apis/v1/resources.ts";
import type { ApiClient } from "../../kube/api_client.ts";
import { IMAGE } from "../harness/stack_objects.ts";
import { operatorKubeconfig } from "../harness/operator_identity.ts";
import { sampleSum } from "../harness/prom_text.ts";
import { startStack } from "../harness/stack.ts";
import { waitUntil } from "../harness/wait.ts";
import { ensureNamespace, inParallel, progress } from "./load.ts";
import {
  DEFAULT_OPERATOR_CMD,
  type OperatorUnderTest,
  startOperatorUnderTest,
} from "./operator_under_test.ts";
import { cpuByProcessKind, loadAverage, machineCpu } from "./proc_stats.ts";

/** What to run. */
export interface ScaleOutOptions {
  operatorCmd: string;
  sets: number;
  namespaces: number;
  /** Sub-agents per set (default 0: the main agent only). */
  subAgents?: number;
}

/** One replica's figures over the span. */
export interface ReplicaFigures {
  peakRssMiB: number;
  cpuSeconds: number;
  bytesReceived: number;
}

/** One run's figures. */
export interface ScaleOutRun {
  secondsToAllRunning: number;
  perReplica: ReplicaFigures[];
  /**
   * Where the machine's CPU went over the same span (beside the figures): the share of
   * all cores that was busy, and CPU seconds by part of the system (proc_stats.ts processKind),
   * to show which part bounds the convergence.
   */
  machine?: { busyFraction: number; cpuSecondsByKind: Record<string, number> };
}

/** The report: `{"replicas1": …, "replicas2": …}`. */
export interface ScaleOutReport {
  replicas1: ScaleOutRun;
  replicas2: ScaleOutRun;
}

const MEMBER_RBAC = "config/overlays/sharded/members";
const GATE = "--feature-gates=ShardedListAndWatch=true";

/** A TCP forwarder to the API server that counts the bytes it relays back to the client. */
interface CountingForwarder {
  readonly port: number;
  /** Bytes from the API server to the client so far. */
  received(): number;
  close(): void;
}

function startCountingForwarder(target: URL): CountingForwarder {
  const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const conns = new Set<Deno.Conn>();
  let received = 0;
  const counter = () =>
    new TransformStream<Uint8Array, Uint8Array>({
      transform(chunk, ctl) {
        received += chunk.byteLength;
        ctl.enqueue(chunk);
      },
    });
  const relay = async (client: Deno.Conn) => {
    const upstream = await Deno.connect({
      hostname: target.hostname,
      port: Number(target.port),
    });
    conns.add(upstream);
    try {
      await Promise.allSettled([
        client.readable.pipeTo(upstream.writable),
        upstream.readable.pipeThrough(counter()).pipeTo(client.writable),
      ]);
    } finally {
      conns.delete(upstream);
    }
  };
  (async () => {
    for await (const conn of listener) {
      conns.add(conn);
      relay(conn).catch(() => {}).finally(() => conns.delete(conn));
    }
  })().catch(() => {});
  return {
    port: (listener.addr as Deno.NetAddr).port,
    received: () => received,
    close() {
      listener.close();
      for (const c of conns) {
        try {
          c.close();
        } catch {
          // Already closed by its pipe.
        }
      }
    },
  };
}

/** A copy of a JSON kubeconfig whose clusters point at `server` (the CA stays: TLS is end to end). */
async function kubeconfigVia(kubeconfig: string, server: string, tag: string): Promise<string> {
  const config = JSON.parse(await Deno.readTextFile(kubeconfig)) as {
    clusters?: { cluster: Record<string, unknown> }[];
  };
  for (const c of config.clusters ?? []) c.cluster.server = server;
  const path = kubeconfig.replace(/(\.kubeconfig)?$/, `.${tag}.kubeconfig`);
  await Deno.writeTextFile(path, JSON.stringify(config, null, 2), { mode: 0o600 });
  return path;
}

/**
 * Set i in namespace `scale-<i mod M>`. FNV-1a spreads names that differ only at the end badly:
 * the 200 default namespaces fall 100 / 100 on the two halves (so the 2-replica run is balanced)
 * but into only two of four quarters; a run with more replicas needs names whose varying part
 * leads (see tests/e2e/sharding_test.ts).
 */
function scaleSet(i: number, namespaces: number, subAgents: number): CocoonSet {
  return {
    apiVersion: "cocoonset.cocoonstack.io/v1",
    kind: "CocoonSet",
    metadata: { name: `set-${i}`, namespace: `scale-${i % namespaces}` },
    spec: { agent: { image: IMAGE, replicas: subAgents } },
  };
}

async function countRunning(admin: ApiClient, agents: number): Promise<number> {
  const list = await admin.list(CocoonSets, {});
  return list.items.filter((cs) =>
    cs.status?.phase === "Running" && cs.status.readyAgents === agents &&
    cs.status.observedGeneration === cs.metadata.generation
  ).length;
}

/** One run with `replicas` sharded replicas on a fresh system. */
export async function benchScaleOutRun(
  opts: ScaleOutOptions,
  replicas: number,
): Promise<ScaleOutRun> {
  const subAgents = opts.subAgents ?? 0;
  const pods = opts.sets * (1 + subAgents);
  const nodeCount = Math.max(2, Math.ceil(pods * 1.25 / 250));
  const nodes = Array.from({ length: nodeCount }, (_, i) => ({
    name: `vk-${i}`,
    pool: "default",
    seats: Math.ceil(pods * 1.25 / nodeCount) + 2,
  }));
  progress(`scaleOut ${replicas}: starting a 1.36 control plane (${GATE}), ${nodeCount} nodes`);
  await using stack = await startStack({
    operators: 0,
    nodes,
    extraRbac: [MEMBER_RBAC],
    controlPlane: { kubernetesMinor: "1.36", apiServerFlags: [GATE] },
  });
  const base = await operatorKubeconfig(stack.cp, [MEMBER_RBAC]);
  const forwarders: CountingForwarder[] = [];
  const ops: OperatorUnderTest[] = [];
  try {
    for (let i = 0; i < replicas; i++) {
      const fwd = startCountingForwarder(new URL(stack.cp.server));
      forwarders.push(fwd);
      ops.push(
        await startOperatorUnderTest({
          command: opts.operatorCmd,
          kubeconfig: await kubeconfigVia(base, `https://127.0.0.1:${fwd.port}`, `replica${i}`),
          ociRegistry: `${stack.proxy.host}/${stack.prefix}`,
          env: { SHARDS: "auto", POD_NAME: `cocoon-operator-${i}` },
        }),
      );
    }
    await Promise.all(ops.map((op) => op.waitReady(180_000)));
    await waitUntil(async () => {
      for (const op of ops) {
        const text = await op.metrics();
        const fraction = sampleSum(text, "cocoon_operator_shard_owned_fraction");
        if (Math.abs(fraction - 1 / replicas) > 1e-9) return undefined;
      }
      return true;
    }, {
      what: `${replicas} replicas owning 1/${replicas} each`,
      timeoutMs: 180_000,
      intervalMs: 500,
    });

    const before = await Promise.all(ops.map((op) => op.usage()));
    const [machineBefore, kindsBefore] = await Promise.all([machineCpu(), cpuByProcessKind()]);
    const bytesBefore = forwarders.map((f) => f.received());
    const t0 = performance.now();
    progress(`scaleOut ${replicas}: creating ${opts.sets} sets over ${opts.namespaces} namespaces`);
    const nsNames = Array.from({ length: opts.namespaces }, (_, i) => `scale-${i}`);
    await inParallel(nsNames, 10, (ns) => ensureNamespace(stack.admin, ns));
    const indexes = Array.from({ length: opts.sets }, (_, i) => i);
    await inParallel(
      indexes,
      50,
      (i) => stack.admin.create(CocoonSets, scaleSet(i, opts.namespaces, subAgents)),
    );
    let lastLog = performance.now();
    await waitUntil(async () => {
      const running = await countRunning(stack.admin, 1 + subAgents);
      if (performance.now() - lastLog > 10_000) {
        progress(`scaleOut ${replicas}: ${running}/${opts.sets} Running`);
        lastLog = performance.now();
      }
      return running === opts.sets ? true : undefined;
    }, {
      what: `all ${opts.sets} sets Running`,
      timeoutMs: 300_000 + opts.sets * 2_000,
      intervalMs: 2_000,
    });
    const tRunning = performance.now();
    const after = await Promise.all(ops.map((op) => op.usage()));
    const [machineAfter, kindsAfter] = await Promise.all([machineCpu(), cpuByProcessKind()]);
    const machine = {
      busyFraction: +((machineAfter.busy - machineBefore.busy) /
        Math.max(1, machineAfter.total - machineBefore.total)).toFixed(2),
      cpuSecondsByKind: Object.fromEntries(
        [...kindsAfter].map(([k, v]) => [k, +(v - (kindsBefore.get(k) ?? 0)).toFixed(2)])
          .filter(([, v]) => (v as number) > 0.05)
          .sort((a, b) => (b[1] as number) - (a[1] as number)),
      ),
    };
    const perReplica = ops.map((_, i) => ({
      peakRssMiB: after[i].peakRssMiB,
      cpuSeconds: +(after[i].cpuSeconds - before[i].cpuSeconds).toFixed(2),
      bytesReceived: forwarders[i].received() - bytesBefore[i],
    }));
    const serverFiltered = await Promise.all(
      ops.map(async (op) => sampleSum(await op.metrics(), "cocoon_operator_shard_server_filtered")),
    );
    progress(
      `scaleOut ${replicas}: all Running after ${((tRunning - t0) / 1000).toFixed(1)} s; ` +
        `server-filtered informers per replica: ${serverFiltered.join(", ")}; ` +
        `load average: ${(await loadAverage()).join(" ")}; ` +
        `machine: ${JSON.stringify(machine)}`,
    );
    return { secondsToAllRunning: +((tRunning - t0) / 1000).toFixed(2), perReplica, machine };
  } finally {
    await Promise.allSettled(ops.map((op) => op.stop()));
    for (const f of forwarders) f.close();
  }
}

/** Both runs. */
export async function benchScaleOut(opts: ScaleOutOptions): Promise<ScaleOutReport> {
  const replicas1 = await benchScaleOutRun(opts, 1);
  const replicas2 = await benchScaleOutRun(opts, 2);
  return { replicas1, replicas2 };
}

/** The goals above against a report, for the log (the report itself stays as specified). */
export function scaleOutGoals(r: ScaleOutReport): Record<string, boolean | number> {
  const one = r.replicas1.perReplica[0];
  const speedup = r.replicas1.secondsToAllRunning / r.replicas2.secondsToAllRunning;
  const rss = Math.max(...r.replicas2.perReplica.map((p) => p.peakRssMiB / one.peakRssMiB));
  const bytes = Math.max(...r.replicas2.perReplica.map((p) => p.bytesReceived / one.bytesReceived));
  return {
    speedup: +speedup.toFixed(2),
    speedupGoalMet: speedup >= 1.6,
    worstRssRatio: +rss.toFixed(2),
    rssGoalMet: rss <= 0.6,
    worstBytesRatio: +bytes.toFixed(2),
    bytesGoalMet: bytes <= 0.6,
  };
}

/** The options `deno task bench` uses: the 1 000 / 200, or 100 / 20 with --quick. */
export function scaleOutOptions(operatorCmd: string, quick: boolean): ScaleOutOptions {
  return quick
    ? { operatorCmd, sets: 100, namespaces: 20 }
    : { operatorCmd, sets: 1000, namespaces: 200 };
}

if (import.meta.main) {
  const { values } = parseArgs({
    args: Deno.args,
    options: {
      sets: { type: "string", default: "1000" },
      namespaces: { type: "string", default: "200" },
      "sub-agents": { type: "string", default: "0" },
      "operator-cmd": { type: "string", default: DEFAULT_OPERATOR_CMD },
    },
  });
  const whole = (name: string, text: string, min: number) => {
    const n = Number(text);
    if (!Number.isInteger(n) || n < min) {
      console.error(`--${name}: want a whole number ≥ ${min}, got ${JSON.stringify(text)}`);
      Deno.exit(2);
    }
    return n;
  };
  const report = await benchScaleOut({
    operatorCmd: values["operator-cmd"],
    sets: whole("sets", values.sets, 1),
    namespaces: whole("namespaces", values.namespaces, 1),
    subAgents: whole("sub-agents", values["sub-agents"], 0),
  });
  progress(`scaleOut goals: ${JSON.stringify(scaleOutGoals(report))}`);
  console.log(JSON.stringify({ scaleOut: report }, null, 2));
}
