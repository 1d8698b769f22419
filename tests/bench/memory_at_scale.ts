/**
 * Memory at scale on the real system: the operator's resident set and heap once it manages
 * `sets` CocoonSets of five pods each (200 and 1 000 by default), without and with 20 000
 * unrelated pods (plain pods in other namespaces, without the CocoonSet label).
 *
 * For each scale, on a fresh system:
 * 1. the operator converges the sets (all Running), then its queue drains → `afterConvergence`
 *    (this process also carries whatever converging left behind);
 * 2. a fresh operator process starts on that cluster, lists and reconciles everything once and
 *    drains → `fresh`;
 * 3. the unrelated pods are created while that process runs → `freshThenUnrelatedCreated`
 *    (what a running operator pays for pods it never asked for);
 * 4. another fresh process starts with the unrelated pods present → `freshWithUnrelated`.
 * `unrelatedAddMiB` compares 4 with 2: two processes that did the same work, the only
 * difference being the unrelated pods in the cluster.
 *
 * Each figure is taken once the operator has been quiet (no request other than a watch,
 * api_proxy.ts) for 15 s, time for V8's memory reducer to return what the burst before left
 * committed (see operator_under_test.ts); it is the median of five RSS readings a second apart,
 * the peak (VmHWM) and the heap.
 *
 * Run alone: `deno run -A tests/bench/memory_at_scale.ts [--quick] [--operator-cmd "…"]`.
 *
 * @module
 */
import { type BenchFlags, benchFlagsOrExit } from "./flags.ts";
import {
  createSets,
  createUnrelatedPods,
  nodesFor,
  PODS_PER_SET,
  progress,
  waitConverged,
} from "./load.ts";
import { type MemoryReport, memoryReport } from "./operator_under_test.ts";
import { type BenchSystem, startBenchSystem } from "./system.ts";

/** What to run. */
export interface MemoryAtScaleOptions {
  operatorCmd: string;
  /** CocoonSet counts, one system each (default 200 and 1 000). */
  scales?: number[];
  /** Unrelated pods (default 20 000). */
  unrelated?: number;
}

/** One scale's figures. */
export interface ScaleFigures {
  sets: number;
  pods: number;
  unrelatedPods: number;
  secondsToAllRunning: number;
  afterConvergence: MemoryReport;
  fresh: MemoryReport;
  freshThenUnrelatedCreated: MemoryReport;
  freshWithUnrelated: MemoryReport;
  /** freshWithUnrelated.rssMiB − fresh.rssMiB. */
  unrelatedAddMiB: number;
  /** Whether every phase drained within its deadline (false: a figure taken while busy). */
  drained: boolean;
  unrelatedCreateSeconds: number;
}

/** Quiet time before a figure: the memory reducer runs ~8 s after the last full GC. */
const QUIET_MS = 15_000;

/** Restarts the operator and waits until it has reconciled everything once. */
async function freshOperator(system: BenchSystem, sets: number): Promise<boolean> {
  await system.startOperator();
  return await system.waitQuiet(QUIET_MS, 120_000 + sets * 200);
}

/** Runs one scale on its own system. */
export async function benchScale(
  operatorCmd: string,
  sets: number,
  unrelated: number,
): Promise<ScaleFigures> {
  await using system = await startBenchSystem({ operatorCmd, nodes: nodesFor(sets) });
  const admin = system.stack.admin;
  let drained = true;
  const op1 = await system.startOperator();
  const t0 = performance.now();
  progress(`memory: ${sets} CocoonSets`);
  await createSets(admin, 0, sets, 100);
  const tRunning = await waitConverged(admin, sets, 120_000 + sets * 2_000);
  progress(`memory: ${sets} CocoonSets Running after ${((tRunning - t0) / 1000).toFixed(1)} s`);
  drained &&= await system.waitQuiet(QUIET_MS, 120_000);
  const afterConvergence = await memoryReport(op1);

  progress("memory: fresh operator");
  drained &&= await freshOperator(system, sets);
  const op2 = system.operator!;
  const fresh = await memoryReport(op2);

  progress(`memory: creating ${unrelated} unrelated pods`);
  const tu = performance.now();
  await createUnrelatedPods(admin, unrelated);
  const unrelatedCreateSeconds = +((performance.now() - tu) / 1000).toFixed(1);
  drained &&= await system.waitQuiet(QUIET_MS, 120_000);
  const freshThenUnrelatedCreated = await memoryReport(op2);

  progress("memory: fresh operator with the unrelated pods");
  drained &&= await freshOperator(system, sets);
  const freshWithUnrelated = await memoryReport(system.operator!);
  return {
    sets,
    pods: sets * PODS_PER_SET,
    unrelatedPods: unrelated,
    secondsToAllRunning: +((tRunning - t0) / 1000).toFixed(2),
    afterConvergence,
    fresh,
    freshThenUnrelatedCreated,
    freshWithUnrelated,
    unrelatedAddMiB: +(freshWithUnrelated.rssMiB - fresh.rssMiB).toFixed(1),
    drained,
    unrelatedCreateSeconds,
  };
}

/** Every scale, in order; keys `sets<N>`. */
export async function benchMemoryAtScale(
  opts: MemoryAtScaleOptions,
): Promise<Record<string, ScaleFigures>> {
  const out: Record<string, ScaleFigures> = {};
  for (const sets of opts.scales ?? [200, 1_000]) {
    out[`sets${sets}`] = await benchScale(opts.operatorCmd, sets, opts.unrelated ?? 20_000);
  }
  return out;
}

/** The Go original's figures for 200 CocoonSets (the CocoonSet core issue). */
export const GO_SCOPED_CACHE = { rssMiB: 51, rssMiBWithUnrelated: 240 };

/**
 * The "scopedCache" summary from a scale's figures: RSS of a fresh operator without and with
 * the unrelated pods (see the module doc), the difference and the goal (< 5 MiB).
 */
export function scopedCacheSummary(f: ScaleFigures): Record<string, unknown> {
  return {
    sets: f.sets,
    unrelatedPods: f.unrelatedPods,
    rssMiB: f.fresh.rssMiB,
    rssMiBWithUnrelated: f.freshWithUnrelated.rssMiB,
    addedMiB: f.unrelatedAddMiB,
    addedMiBWhileRunning: +(f.freshThenUnrelatedCreated.rssMiB - f.fresh.rssMiB).toFixed(1),
    goalAddedMiBBelow: 5,
    goOriginal: GO_SCOPED_CACHE,
  };
}

/**
 * The benchmark as the command line asks for it (`--quick`: 50 and 200 sets, 5 000 unrelated
 * pods), with the scopedCache summary of its first scale.
 */
export async function memoryAtScaleFromFlags(flags: BenchFlags): Promise<{
  memoryAtScale: Record<string, ScaleFigures>;
  scopedCache: Record<string, unknown>;
}> {
  const memoryAtScale = await benchMemoryAtScale({
    operatorCmd: flags.operatorCmd,
    scales: flags.quick ? [50, 200] : [200, 1_000],
    unrelated: flags.quick ? 5_000 : 20_000,
  });
  return { memoryAtScale, scopedCache: scopedCacheSummary(Object.values(memoryAtScale)[0]) };
}

if (import.meta.main) {
  console.log(JSON.stringify(await memoryAtScaleFromFlags(benchFlagsOrExit(Deno.args)), null, 2));
}
