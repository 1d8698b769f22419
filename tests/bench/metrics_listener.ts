/**
 * What HTTP/1.1 only costs on the metrics listener (kube/http1_server.ts, the default) against
 * `Deno.serve` (`--enable-http2`): each mode in fresh processes, interleaved, over TLS with the
 * self-signed certificate the operator makes. Per run:
 *
 * - startMs: `Servers.start()` until the listener is bound (for HTTP/1.1 this includes loading
 *   node:http and node:https, which the operator imports nowhere else);
 * - rssDeltaMiB: resident set after 200 scrapes minus before start (after a GC each);
 * - scrapeMs: median of 200 sequential scrapes of a 100-series registry on one keep-alive
 *   connection, from a Deno fetch client in the same process.
 *
 * Medians over the runs and each run, as JSON: `deno run -A tests/bench/metrics_listener.ts
 * [--runs N]`.
 *
 * @module
 */
import { parseArgs } from "node:util";
import { Counter, Registry } from "../../kube/prometheus/mod.ts";
import { metricsTls } from "../../kube/metrics_serving.ts";
import { Servers } from "../../kube/servers.ts";

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
    const summary = Object.fromEntries(
      (Object.entries(all) as [Mode, Run[]][]).map(([mode, rs]) => [mode, {
        startMs: round(median(rs.map((r) => r.startMs))),
        rssDeltaMiB: round(median(rs.map((r) => r.rssDeltaMiB))),
        scrapeMs: round(median(rs.map((r) => r.scrapeMs))),
        runs: rs.map((r) => ({
          startMs: round(r.startMs),
          rssDeltaMiB: round(r.rssDeltaMiB),
          scrapeMs: round(r.scrapeMs),
        })),
      }]),
    );
    console.log(JSON.stringify({ loadavg: Deno.loadavg(), ...summary }, null, 2));
  }
}
