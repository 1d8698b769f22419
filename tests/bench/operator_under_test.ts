/**
 * The operator a benchmark measures, started from a command line (`--operator-cmd`), so the same
 * harness measures this project's operator or any other build of a cocoon-operator that reads
 * the same environment: KUBECONFIG, OCI_REGISTRY, METRICS_ADDR, PROBE_ADDR, LEADER_ELECT,
 * POD_NAMESPACE, POD_NAME, OPERATOR_LOG_LEVEL (the Go original reads all of them).
 *
 * The default command is this project's `deno task start`: the launcher computes the minimal
 * permission set for that environment and runs main.ts in a child `deno` process. The command
 * runs under `sh -c` in the repository root; the process measured is where its chain of single
 * children ends (proc_stats.ts chainEnd): main.ts for the start task, the binary itself for a
 * compiled build. CPU seconds and resident memory are read from /proc for that process alone
 * (the launchers are not counted). The heap comes from V8's GC trace (gc_trace.ts, enabled by
 * DENO_V8_FLAGS=--trace-gc in the environment: the heap in use after the newest GC before the
 * moment asked for, and the live heap after the newest full GC, known once the process has
 * exited and flushed its stdout) or, for a Go build, from its go_memstats_heap_alloc_bytes
 * metric; neither needs anything new in the operator.
 *
 * Differences from a deployment, on purpose: leader election is off (one replica; no Lease
 * writes in the steady-state figures), the API server is reached through the counting proxy
 * (api_proxy.ts) under the operator's own ServiceAccount token and ClusterRole, the
 * listeners are loopback ports, and V8's memory reducer may start 2 s after the process does
 * rather than 30 s (`--gc-memory-reducer-start-delay-ms`). The reducer is what returns the heap
 * a start-up or a burst of work left committed once allocation goes quiet (about a third of
 * the resident set of a freshly started operator); it otherwise waits 30 s into the process's
 * life, and a resident set read before or after it differs by tens of MiB. With the shorter
 * delay a quiet operator reaches the state it would reach in production within ~10 s, so the
 * memory figures are taken after it (and say when it last ran: lastReducingGcAtMs).
 *
 * This module stands next to tests/harness/stack.ts rather than inside it: the stack starts
 * the in-cluster-sandboxed main.ts only, and a benchmark needs any command line.
 *
 * @module
 */
import { realClock, sleep } from "../../kube/clock.ts";
import { type ProcessHandle, runProcess } from "../harness/process.ts";
import { freePort, waitUntil } from "../harness/wait.ts";
import { sampleSum } from "../harness/prom_text.ts";
import { parseGcTrace, traceHeap } from "./gc_trace.ts";
import {
  chainEnd,
  commandLine,
  launchChain,
  mib,
  readMemory,
  readStat,
  resetPeakRss,
} from "./proc_stats.ts";

const repoRoot = new URL("../../", import.meta.url).pathname;

/** This project's operator, launched the way a developer runs it. */
export const DEFAULT_OPERATOR_CMD = "deno task start";

/** How to start the operator. */
export interface OperatorUnderTestOptions {
  /** Shell command line (`sh -c`, working directory: the repository root). */
  command: string;
  /** Kubeconfig it connects with (the counting proxy's). */
  kubeconfig: string;
  /** OCI_REGISTRY (`host:port/prefix`). */
  ociRegistry: string;
  /** More environment (overrides the defaults above). */
  env?: Record<string, string>;
}

/** CPU and resident memory of the measured process. */
export interface OperatorUsage {
  pid: number;
  /** User + system CPU seconds since it started. */
  cpuSeconds: number;
  rssMiB: number;
  /** Highest resident set since it started (VmHWM). */
  peakRssMiB: number;
}

/**
 * The operator's heap at one moment and where the figure comes from. V8 writes its GC trace
 * through a buffered stdout that is flushed when the process exits, so a V8 figure is filled in
 * by stop() (from the collections up to that moment); read it after the operator stopped. A Go
 * figure is read from /metrics at once.
 */
export interface OperatorHeap {
  source: "v8 --trace-gc" | "go_memstats_heap_alloc_bytes" | "none";
  /**
   * V8: heap in use after the newest GC before the moment (young garbage gone, old-generation
   * garbage since the last full GC still counted); Go: allocated heap objects.
   */
  heapMiB?: number;
  /** V8: heap committed after that GC; Go: heap spans in use. */
  committedHeapMiB?: number;
  /** V8: heap in use after the newest full GC (Mark-Compact) before the moment: live then. */
  liveHeapAtLastFullGcMiB?: number;
  /** V8: the moment, in ms since the operator process started. */
  atMs?: number;
  /** V8: when the newest GC and the newest full GC before the moment ran (ms since start). */
  lastGcAtMs?: number;
  lastFullGcAtMs?: number;
  /** V8: when its memory reducer last collected before the moment (undefined: not yet). */
  lastReducingGcAtMs?: number;
}

/** A running operator under test. */
export interface OperatorUnderTest {
  /** The launched command (the chain's first process). */
  readonly proc: ProcessHandle;
  /** performance.now() just before the spawn. */
  readonly spawnedAt: number;
  /** `http://127.0.0.1:<port>` of the health probes. */
  readonly probeUrl: string;
  /** `http://127.0.0.1:<port>` of /metrics. */
  readonly metricsUrl: string;
  /**
   * The measured process's pid: the end of the launch chain, looked up on the first call and
   * kept, so call it once the operator answers (waitReady does).
   */
  pid(): Promise<number>;
  /** Its command line, for the report. */
  describe(): Promise<string>;
  usage(): Promise<OperatorUsage>;
  /** Lowers the peak (VmHWM) to the resident set now: a later peakRssMiB covers what follows. */
  resetPeakRss(): Promise<void>;
  /** Its heap now (a V8 figure is completed by stop(); see OperatorHeap). */
  heap(): Promise<OperatorHeap>;
  /** The /metrics text. */
  metrics(): Promise<string>;
  /** Requests by HTTP method from rest_client_requests_total (client-go's own counter). */
  restClientRequests(): Promise<Record<string, number>>;
  /** Polls /readyz until 200; rejects with the output's tail if the process exits first. */
  waitReady(timeoutMs?: number, intervalMs?: number): Promise<void>;
  /** SIGTERM to the measured process, then the launchers; SIGKILL after graceMs. */
  stop(graceMs?: number): Promise<void>;
}

/** Starts the command; does not wait for readiness (see waitReady). */
export async function startOperatorUnderTest(
  opts: OperatorUnderTestOptions,
): Promise<OperatorUnderTest> {
  const probePort = freePort();
  const metricsPort = freePort();
  const probeUrl = `http://127.0.0.1:${probePort}`;
  const metricsUrl = `http://127.0.0.1:${metricsPort}`;
  const spawnedAt = performance.now();
  const proc = await runProcess(["sh", "-c", opts.command], {
    cwd: repoRoot,
    kubeconfig: opts.kubeconfig,
    env: {
      OCI_REGISTRY: opts.ociRegistry,
      PROBE_ADDR: `127.0.0.1:${probePort}`,
      METRICS_ADDR: `127.0.0.1:${metricsPort}`,
      // Read over plain http by the benchmark (a compiled binary would default to HTTPS).
      METRICS_SECURE: "false",
      LEADER_ELECT: "false",
      POD_NAMESPACE: "cocoon-system",
      POD_NAME: "cocoon-operator-bench",
      OPERATOR_LOG_LEVEL: "info",
      DENO_V8_FLAGS: "--trace-gc,--gc-memory-reducer-start-delay-ms=2000",
      ...opts.env,
    },
  });
  let exited = false;
  proc.status.finally(() => exited = true).catch(() => {});
  let measured: number | undefined;
  const pid = async () => measured ??= await chainEnd(proc.pid);
  let measuredStart: number | undefined;
  /** When the measured process started, on this process's performance.now() clock. */
  const startedAt = async () => {
    if (measuredStart === undefined) {
      const [root, end] = await Promise.all([readStat(proc.pid), readStat(await pid())]);
      measuredStart = spawnedAt + (end.startTicks - root.startTicks) * 1000 / root.ticksPerSecond;
    }
    return measuredStart;
  };
  const pendingHeaps: OperatorHeap[] = [];
  /** Fills the V8 figures from the trace, which is complete once the process has exited. */
  const completeHeaps = () => {
    if (measured === undefined) return;
    const events = parseGcTrace(proc.stdout, measured);
    for (const heap of pendingHeaps.splice(0)) {
      const trace = traceHeap(events.filter((e) => e.atMs <= (heap.atMs ?? Infinity)));
      if (trace.collections === 0) continue;
      heap.source = "v8 --trace-gc";
      heap.heapMiB = trace.heapAfterLastGcMiB;
      heap.committedHeapMiB = trace.committedAfterLastGcMiB;
      heap.liveHeapAtLastFullGcMiB = trace.liveHeapMiB;
      heap.lastGcAtMs = trace.lastGcAtMs;
      heap.lastFullGcAtMs = trace.lastFullGcAtMs;
      heap.lastReducingGcAtMs = trace.lastReducingGcAtMs;
    }
  };
  proc.status.finally(completeHeaps).catch(() => {});
  const metrics = async () => {
    const res = await fetch(`${metricsUrl}/metrics`);
    return await res.text();
  };

  return {
    proc,
    spawnedAt,
    probeUrl,
    metricsUrl,
    pid,
    async describe() {
      return await commandLine(await pid());
    },
    async usage() {
      const p = await pid();
      const [stat, mem] = await Promise.all([readStat(p), readMemory(p)]);
      return { pid: p, cpuSeconds: +stat.cpuSeconds.toFixed(2), ...mem };
    },
    async resetPeakRss() {
      await resetPeakRss(await pid());
    },
    async heap() {
      const text = await metrics().catch(() => "");
      if (/^go_memstats_heap_alloc_bytes /m.test(text)) {
        return {
          source: "go_memstats_heap_alloc_bytes",
          heapMiB: mib(sampleSum(text, "go_memstats_heap_alloc_bytes")),
          committedHeapMiB: mib(sampleSum(text, "go_memstats_heap_inuse_bytes")),
        };
      }
      const heap: OperatorHeap = {
        source: "none",
        atMs: Math.round(performance.now() - await startedAt()),
      };
      pendingHeaps.push(heap);
      return heap;
    },
    metrics,
    async restClientRequests() {
      const text = await metrics();
      const out: Record<string, number> = {};
      for (const method of ["GET", "POST", "PUT", "PATCH", "DELETE"]) {
        const n = sampleSum(text, "rest_client_requests_total", { method });
        if (n > 0) out[method] = n;
      }
      return out;
    },
    async waitReady(timeoutMs = 60_000, intervalMs = 100) {
      await waitUntil(async () => {
        if (exited) {
          throw new Error(`operator exited before ready:\n${proc.output.slice(-3000)}`);
        }
        const res = await fetch(`${probeUrl}/readyz`);
        await res.body?.cancel();
        return res.status === 200;
      }, { what: `operator /readyz (${opts.command})`, timeoutMs, intervalMs }).catch((err) => {
        throw new Error(`${err.message}\n--- operator output ---\n${proc.output.slice(-3000)}`);
      });
      await pid();
    },
    async stop(graceMs = 20_000) {
      if (exited) return;
      // The chain as it is now, with start times, so a reused pid is never signalled.
      const chain: { pid: number; start: number }[] = [];
      for (const p of await launchChain(proc.pid)) {
        const stat = await readStat(p).catch(() => undefined);
        if (stat) chain.push({ pid: p, start: stat.startTicks });
      }
      const signal = async (entry: { pid: number; start: number }, sig: Deno.Signal) => {
        const stat = await readStat(entry.pid).catch(() => undefined);
        if (stat?.startTicks !== entry.start) return;
        try {
          Deno.kill(entry.pid, sig);
        } catch {
          // Exited in between.
        }
      };
      // The operator shuts down gracefully on SIGTERM; its launchers then exit with it.
      const last = chain.at(-1);
      if (last) await signal(last, "SIGTERM");
      let timer: ReturnType<typeof setTimeout> | undefined;
      // A slow exit is worth a line on stderr: which process of the chain is still there.
      const slow = setTimeout(async () => {
        const alive = [];
        for (const e of chain) {
          const stat = await readStat(e.pid).catch(() => undefined);
          if (stat?.startTicks === e.start) {
            alive.push(`${e.pid} (${(await commandLine(e.pid)).slice(0, 60)})`);
          }
        }
        console.error(
          `[bench] operator still exiting after 5 s; alive: ${
            alive.join(", ") || "none (output pipes still open)"
          }`,
        );
      }, 5_000);
      const done = await Promise.race([
        proc.status.then(() => true),
        new Promise<false>((r) => timer = setTimeout(() => r(false), graceMs)),
      ]);
      clearTimeout(timer);
      clearTimeout(slow);
      if (!done) {
        for (const entry of chain.reverse()) await signal(entry, "SIGKILL");
        await proc.status;
      }
    },
  };
}

/** Resident memory and heap of the operator at one moment, as the documents report them. */
export interface MemoryReport {
  rssMiB: number;
  peakRssMiB: number;
  /** Filled in when the operator stops, for a V8 figure (see OperatorHeap). */
  heap: OperatorHeap;
}

/**
 * The operator's memory now: RSS as the median of `samples` readings one second apart (a GC
 * in between moves a single reading by megabytes), the peak, and the heap.
 */
export async function memoryReport(op: OperatorUnderTest, samples = 5): Promise<MemoryReport> {
  const rss: number[] = [];
  let peak = 0;
  for (let i = 0; i < samples; i++) {
    if (i > 0) await sleep(realClock, 1_000, new AbortController().signal);
    const u = await op.usage();
    rss.push(u.rssMiB);
    peak = Math.max(peak, u.peakRssMiB);
  }
  rss.sort((a, b) => a - b);
  return { rssMiB: rss[Math.floor(rss.length / 2)], peakRssMiB: peak, heap: await op.heap() };
}
