/**
 * Convergence on the real system: the operator under test on a real control plane with the VM
 * simulator (tests/harness/stack.ts), N CocoonSets (default 100) of one main agent, three
 * sub-agents and one toolbox created at once, and then a steady state.
 *
 * Figures:
 * - secondsToAllRunning: from the first create until every set is Running for its spec with
 *   all five pods ready (seen by a watch of the benchmark's own: load.ts watchObjects).
 * - apiRequests: what the operator asked the API server in that time, by resource and verb
 *   (conflicts: how many of them were refused with 409),
 *   counted by the proxy its kubeconfig points at (api_proxy.ts; why a proxy: see there), and
 *   restClientRequests: its own rest_client_requests_total by method since it started, as a
 *   cross-check of the proxy.
 * - cpuSeconds: user + system CPU of the operator process over the same span; peakRssMiB: its
 *   VmHWM at the end of it (since process start); heap: see operator_under_test.ts.
 * - steadyState: every write (create, update, patch, delete) the operator makes in the
 *   `steadySeconds` (default 60) that start 5 s after all sets are Running (goal: 0), the
 *   writes in those 5 s, and the non-watch reads of the window.
 * - idleCpuMsPerSecond: the operator's CPU in that window, ms per second (goal < 1): what it
 *   spends with nothing to do (timers, metric collection, queue ticks, bookmarks), and
 *   idleCpuMsPerSecondBySegment: the same for each third of the window (the first third holds
 *   V8's memory-reducer collections after the burst; the last is the rate that lasts).
 *
 * `deno task bench` runs it for 100 and 1 000 sets (`--sets` chooses), each on a fresh system.
 *
 * The simulator plays the kubelets with its default latencies (boot 100 ms); the operator
 * runs with its default concurrency (4 CocoonSet workers) and leader election off.
 *
 * Run alone: `deno run -A tests/bench/convergence.ts [--quick] [--operator-cmd "…"]`.
 *
 * @module
 */
import { realClock, sleep } from "../../kube/clock.ts";
import { type BenchFlags, benchFlagsOrExit } from "./flags.ts";
import { createSets, nodesFor, PODS_PER_SET, progress, waitConverged } from "./load.ts";
import { type CpuSample, idleCpuFigures } from "./idle_cpu.ts";
import { memoryReport } from "./operator_under_test.ts";
import { countByResource, isWrite, tallyRequests } from "./request_info.ts";
import { startBenchSystem } from "./system.ts";

/** What to run. */
export interface ConvergenceOptions {
  operatorCmd: string;
  /** CocoonSets created at once (default 100). */
  sets?: number;
  /** Length of the steady-state window (default 60). */
  steadySeconds?: number;
}

/** Parts of the steady-state window whose idle CPU is reported one by one (the first holds V8's
 * memory-reducer collections, the last the rate that lasts). */
const IDLE_SEGMENTS = 3;

/** How long after all sets are Running the steady-state window starts. */
const SETTLE_MS = 5_000;

/** Runs the benchmark (see the module doc). */
export async function benchConvergence(opts: ConvergenceOptions): Promise<Record<string, unknown>> {
  const sets = opts.sets ?? 100;
  const steadySeconds = opts.steadySeconds ?? 60;
  const nodes = nodesFor(sets);
  await using system = await startBenchSystem({ operatorCmd: opts.operatorCmd, nodes });
  const op = await system.startOperator();
  const startupRequests = system.api.requests.length;
  await system.waitQuiet(2_000, 30_000);

  const before = await op.usage();
  const t0 = performance.now();
  progress(`convergence: creating ${sets} CocoonSets`);
  await createSets(system.stack.admin, 0, sets, 100);
  const createdMs = performance.now() - t0;
  const tRunning = await waitConverged(system.stack.admin, sets, 120_000 + sets * 2_000);
  const after = await op.usage();
  progress(`convergence: all Running after ${((tRunning - t0) / 1000).toFixed(1)} s`);
  const converging = tallyRequests(system.api.between(t0, tRunning));
  const restClientRequests = await op.restClientRequests();

  const quiet = new AbortController().signal;
  await sleep(realClock, SETTLE_MS, quiet);
  const tSteady = performance.now();
  const steadyFrom = await op.usage();
  progress(`convergence: steady state for ${steadySeconds} s`);
  // The window in IDLE_SEGMENTS equal parts, sampled at each boundary (see idle_cpu.ts).
  const cpuSamples: CpuSample[] = [{ atMs: tSteady, cpuSeconds: steadyFrom.cpuSeconds }];
  for (let i = 1; i <= IDLE_SEGMENTS; i++) {
    await sleep(
      realClock,
      tSteady + steadySeconds * 1000 * i / IDLE_SEGMENTS - performance.now(),
      quiet,
    );
    const atMs = performance.now();
    cpuSamples.push({ atMs, cpuSeconds: (await op.usage()).cpuSeconds });
  }
  const tEnd = cpuSamples[cpuSamples.length - 1].atMs;
  const idle = idleCpuFigures(cpuSamples);
  const idleCpuMsPerSecond = idle.msPerSecond;
  const steadyWrites = system.api.between(tSteady, tEnd).filter(isWrite);
  const settleWrites = system.api.between(tRunning, tSteady).filter(isWrite);
  const steadyReads = system.api.between(tSteady, tEnd).filter((r) =>
    !isWrite(r) && r.verb !== "watch"
  );
  const memory = await memoryReport(op);

  return {
    operator: await op.describe(),
    sets,
    pods: sets * PODS_PER_SET,
    simNodes: nodes.length,
    createSeconds: +(createdMs / 1000).toFixed(2),
    secondsToAllRunning: +((tRunning - t0) / 1000).toFixed(2),
    apiRequests: converging,
    apiRequestsAtStartup: startupRequests,
    restClientRequests,
    cpuSeconds: +(after.cpuSeconds - before.cpuSeconds).toFixed(2),
    peakRssMiB: after.peakRssMiB,
    rssMiBAtAllRunning: after.rssMiB,
    afterSteadyState: memory,
    idleCpuMsPerSecond,
    idleCpuMsPerSecondBySegment: idle.segmentsMsPerSecond,
    steadyState: {
      seconds: steadySeconds,
      startsSecondsAfterAllRunning: SETTLE_MS / 1000,
      writes: steadyWrites.length,
      writesByResource: countByResource(steadyWrites),
      writesBeforeWindow: settleWrites.length,
      writesBeforeWindowByResource: countByResource(settleWrites),
      nonWatchReads: steadyReads.length,
      goalWrites: 0,
    },
  };
}

/**
 * The benchmark as the command line asks for it, keyed by set count (default 100 and 1 000;
 * `--quick`: 20 sets, a 10 s window; `--sets` overrides the counts).
 */
export async function convergenceFromFlags(
  flags: BenchFlags,
): Promise<Record<string, Record<string, unknown>>> {
  const out: Record<string, Record<string, unknown>> = {};
  for (const sets of flags.sets ?? (flags.quick ? [20] : [100, 1000])) {
    out[`sets${sets}`] = await benchConvergence({
      operatorCmd: flags.operatorCmd,
      sets,
      steadySeconds: flags.quick ? 10 : 60,
    });
  }
  return out;
}

if (import.meta.main) {
  const convergence = await convergenceFromFlags(benchFlagsOrExit(Deno.args));
  console.log(JSON.stringify({ convergence }, null, 2));
}
