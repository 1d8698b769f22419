/**
 * What HTTP/1.1 only costs on the metrics listener (kube/http1_server.ts, the default) against
 * `Deno.serve` (`--enable-http2`), each mode in fresh processes, interleaved, over TLS with the
 * self-signed certificate the operator makes.
 *
 * `listener`, the servers alone in a bench process, per run:
 * - startMs: `Servers.start()` until the listener is bound (for HTTP/1.1 this includes loading
 *   node:http and node:https, which the operator imports nowhere else);
 * - rssDeltaMiB: resident set after 200 scrapes minus before start (after a GC each);
 * - scrapeMs: median of 200 sequential scrapes of a 100-series registry on one keep-alive
 *   connection, from a Deno fetch client in the same process.
 *
 * `operator`, the real operator (main.ts under the in-cluster sandbox, secure metrics, an empty
 * 1.35 control plane), per run: readyMs from spawn to /readyz, rssMiB (VmRSS) and cpuSeconds
 * 3 s after it was ready.
 *
 * Medians over the runs and each run, as JSON: `deno run -A tests/bench/metrics_listener.ts
 * [--runs N]`.
 *
 * @module
 */
import { parseArgs } from "node:util";
import { Counter, Registry } from "../../kube/prom_client.ts";
import { metricsTls } from "../../kube/metrics_serving.ts";
import { Servers } from "../../kube/servers.ts";
import { startControlPlane } from "../harness/control_plane.ts";
import { operatorKubeconfig } from "../harness/operator_identity.ts";
import { startSandboxedOperator } from "../harness/sandboxed_operator.ts";
import { readMemory, readStat } from "./proc_stats.ts";

type Mode = "http1" | "http2";

interface Run {
  startMs: number;
  rssDeltaMiB: number;
  scrapeMs: number;
}

const SCRAPES = 200;

function gc(): void {
  (globalThis as { gc?: () => void }).gc?.();
}

function median(values: number[]): number {
  const s = [...values].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)];
}

/** One run in this process (child mode). */
async function child(mode: Mode): Promise<Run> {
  const registry = new Registry();
  const c = new Counter({
    name: "bench_total",
    help: "b",
    labelNames: ["i"],
    registers: [registry],
  });
  for (let i = 0; i < 100; i++) c.inc({ i: String(i) });
  const tls = await metricsTls(undefined);
  gc();
  const rssBefore = Deno.memoryUsage().rss;
  const servers = new Servers({
    healthProbeBindAddress: "0",
    metricsBindAddress: "127.0.0.1:0",
    registry,
    metricsHttp2: mode === "http2",
    metricsSecurity: { tls, filter: (h) => h },
  });
  const t0 = performance.now();
  await servers.start();
  const startMs = performance.now() - t0;
  const ca = tls.cert.slice(tls.cert.indexOf("-----END CERTIFICATE-----") + 26);
  const client = Deno.createHttpClient({ caCerts: [ca] });
  const url = `https://127.0.0.1:${servers.metricsAddr!.port}/metrics`;
  const times: number[] = [];
  for (let i = 0; i < SCRAPES; i++) {
    const s = performance.now();
    const res = await fetch(url, { client });
    await res.text();
    times.push(performance.now() - s);
  }
  gc();
  const rssDeltaMiB = (Deno.memoryUsage().rss - rssBefore) / 1048576;
  client.close();
  await servers.close();
  return { startMs, rssDeltaMiB, scrapeMs: median(times) };
}

interface OperatorRun {
  readyMs: number;
  rssMiB: number;
  cpuSeconds: number;
}

/** The operator in each mode, `runs` times, interleaved, on one control plane. */
async function operatorRuns(runs: number): Promise<Record<Mode, OperatorRun[]>> {
  const cp = await startControlPlane();
  const all: Record<Mode, OperatorRun[]> = { http1: [], http2: [] };
  try {
    const kubeconfig = await operatorKubeconfig(cp);
    for (let i = 0; i < runs; i++) {
      for (const mode of ["http1", "http2"] as const) {
        const t0 = performance.now();
        const op = await startSandboxedOperator({
          cp,
          // Never contacted: the cluster has no CocoonSet.
          ociRegistry: "127.0.0.1:5999/bench",
          kubeconfig,
          secureMetrics: true,
          args: mode === "http2" ? ["--enable-http2"] : [],
        });
        const readyMs = performance.now() - t0;
        // Settled: the start-up's garbage collected, the first lease renewals done.
        await new Promise((resolve) => setTimeout(resolve, 3000));
        const { rssMiB } = await readMemory(op.proc.pid);
        const { cpuSeconds } = await readStat(op.proc.pid);
        all[mode].push({ readyMs, rssMiB, cpuSeconds });
        await op.stop(5000);
      }
    }
  } finally {
    await cp.stop();
  }
  return all;
}

async function spawn(mode: Mode): Promise<Run> {
  const out = await new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", "--v8-flags=--expose-gc", import.meta.filename!, "--child", mode],
    stdout: "piped",
    stderr: "inherit",
  }).output();
  if (!out.success) throw new Error(`child ${mode} failed`);
  return JSON.parse(new TextDecoder().decode(out.stdout)) as Run;
}

if (import.meta.main) {
  const { values } = parseArgs({
    args: Deno.args,
    options: { child: { type: "string" }, runs: { type: "string" } },
  });
  if (values.child) {
    console.log(JSON.stringify(await child(values.child as Mode)));
  } else {
    const runs = Number(values.runs ?? 7);
    const all: Record<Mode, Run[]> = { http1: [], http2: [] };
    for (let i = 0; i < runs; i++) {
      for (const mode of ["http1", "http2"] as const) all[mode].push(await spawn(mode));
    }
    const round = (n: number) => Math.round(n * 100) / 100;
    const summarize = <R extends object>(byMode: Record<Mode, R[]>) =>
      Object.fromEntries(
        (Object.entries(byMode) as [Mode, R[]][]).map(([mode, rs]) => {
          const keys = Object.keys(rs[0]) as (keyof R)[];
          const med = Object.fromEntries(
            keys.map((k) => [k, round(median(rs.map((r) => Number(r[k]))))]),
          );
          const each = rs.map((r) => Object.fromEntries(keys.map((k) => [k, round(Number(r[k]))])));
          return [mode, { ...med, runs: each }];
        }),
      );
    const operator = await operatorRuns(Math.max(2, Math.ceil(runs / 2)));
    console.log(JSON.stringify(
      { loadavg: Deno.loadavg(), listener: summarize(all), operator: summarize(operator) },
      null,
      2,
    ));
  }
}
