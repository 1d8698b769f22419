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
 * Then the fleet (benchFleet): for each size (default 1 000, 5 000 and 10 000 sets of five pods,
 * `--fleet-sets`; `--quick`: 50, 100, 200), on a fresh system, the sets created at once and
 * converged: secondsToAllRunning (first create → every set Running with all five pods ready),
 * peakRssMiB (VmHWM at that moment), cpuSeconds and API requests over that span, then the
 * resident set once the operator has been quiet for 15 s, and the etcd database's size. `fleet10k`
 * repeats the 10 000-set figures; `fleetSlope` fits a straight line (least squares) through
 * (managed pods, MiB) over the sizes: MiB per 1 000 managed pods for the peak and for the
 * settled resident set, and where the line meets zero pods.
 *
 * Run alone: `deno run -A tests/bench/memory_at_scale.ts [--quick] [--operator-cmd "…"]
 * [--fleet-sets N,…]`.
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
import { loadAverage } from "./proc_stats.ts";
import { type CountsByResource, tallyRequests } from "./request_info.ts";
import { type BenchSystem, startBenchSystem } from "./system.ts";
import { sampleSum } from "../harness/prom_text.ts";

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

/** One fleet size's figures (see the module doc). */
export interface FleetFigures {
  sets: number;
  pods: number;
  simNodes: number;
  secondsToAllRunning: number;
  /** VmHWM when every set was Running: the peak of the whole convergence. */
  peakRssMiB: number;
  cpuSeconds: number;
  apiRequests: number;
  /** Requests answered other than with success (a 429 or 5xx: the control plane at its limits). */
  apiRequestsFailed: CountsByResource;
  /** Once the operator was quiet for 15 s after convergence (drained: it was within 5 min). */
  settled: MemoryReport;
  drained: boolean;
  /** etcd's database file when every set was Running, and its quota. */
  etcdDbMiB: number;
  etcdQuotaMiB: number;
  loadAverage: { atStart: number; atEnd: number };
}

/** etcd's own gauges (its /metrics on the client URL), in MiB. */
async function etcdSizes(etcdUrl: string): Promise<{ dbMiB: number; quotaMiB: number }> {
  const text = await (await fetch(`${etcdUrl}/metrics`)).text();
  const toMiB = (name: string) => Math.round(sampleSum(text, name) / 2 ** 20);
  return {
    dbMiB: toMiB("etcd_mvcc_db_total_size_in_bytes"),
    quotaMiB: toMiB("etcd_server_quota_backend_bytes"),
  };
}

/** Converges one fleet size on a fresh system. */
export async function benchFleet(operatorCmd: string, sets: number): Promise<FleetFigures> {
  const nodes = nodesFor(sets);
  await using system = await startBenchSystem({ operatorCmd, nodes });
  const admin = system.stack.admin;
  const op = await system.startOperator();
  const loadAtStart = (await loadAverage())[0];
  const before = await op.usage();
  const t0 = performance.now();
  progress(`fleet: ${sets} CocoonSets (${sets * PODS_PER_SET} pods) on ${nodes.length} nodes`);
  await createSets(admin, 0, sets, 100);
  progress(`fleet: created in ${((performance.now() - t0) / 1000).toFixed(1)} s`);
  const tRunning = await waitConverged(admin, sets, 120_000 + sets * 2_000);
  const atRunning = await op.usage();
  const requests = tallyRequests(system.api.between(t0, tRunning));
  const etcd = await etcdSizes(system.stack.cp.etcdUrl);
  progress(
    `fleet: ${sets} CocoonSets Running after ${((tRunning - t0) / 1000).toFixed(1)} s; ` +
      `peak ${atRunning.peakRssMiB} MiB; etcd ${etcd.dbMiB} MiB`,
  );
  const loadAtEnd = (await loadAverage())[0];
  const drained = await system.waitQuiet(QUIET_MS, 300_000);
  const settled = await memoryReport(op);
  return {
    sets,
    pods: sets * PODS_PER_SET,
    simNodes: nodes.length,
    secondsToAllRunning: +((tRunning - t0) / 1000).toFixed(2),
    peakRssMiB: atRunning.peakRssMiB,
    cpuSeconds: +(atRunning.cpuSeconds - before.cpuSeconds).toFixed(2),
    apiRequests: requests.total,
    apiRequestsFailed: requests.failedByResource,
    settled,
    drained,
    etcdDbMiB: etcd.dbMiB,
    etcdQuotaMiB: etcd.quotaMiB,
    loadAverage: { atStart: loadAtStart, atEnd: loadAtEnd },
  };
}

/** The least-squares line through points (at least two distinct x). */
export function leastSquares(
  points: readonly { x: number; y: number }[],
): { slope: number; intercept: number } {
  const n = points.length;
  const mx = points.reduce((a, p) => a + p.x, 0) / n;
  const my = points.reduce((a, p) => a + p.y, 0) / n;
  const sxx = points.reduce((a, p) => a + (p.x - mx) ** 2, 0);
  if (n < 2 || sxx === 0) throw new Error("a line needs points at two different x at least");
  const sxy = points.reduce((a, p) => a + (p.x - mx) * (p.y - my), 0);
  const slope = sxy / sxx;
  return { slope, intercept: my - slope * mx };
}

/** MiB per 1 000 managed pods across the fleet sizes, for the peak and the settled RSS. */
export function fleetSlope(sizes: readonly FleetFigures[]): Record<string, unknown> {
  const fit = (y: (f: FleetFigures) => number) => {
    const line = leastSquares(sizes.map((f) => ({ x: f.pods / 1000, y: y(f) })));
    return { mibPer1000Pods: +line.slope.toFixed(2), mibAtZeroPods: +line.intercept.toFixed(1) };
  };
  return {
    sets: sizes.map((f) => f.sets),
    pods: sizes.map((f) => f.pods),
    peakRssMiB: fit((f) => f.peakRssMiB),
    settledRssMiB: fit((f) => f.settled.rssMiB),
  };
}

/** The fleet sizes the command line asks for, with fleet10k and the slope when they apply. */
export async function fleetFromFlags(flags: BenchFlags): Promise<Record<string, unknown>> {
  const sizes = flags.fleetSets ?? (flags.quick ? [50, 100, 200] : [1_000, 5_000, 10_000]);
  const fleet: Record<string, FleetFigures> = {};
  for (const sets of sizes) fleet[`sets${sets}`] = await benchFleet(flags.operatorCmd, sets);
  const figures = Object.values(fleet);
  const distinct = new Set(figures.map((f) => f.sets)).size;
  return {
    fleet,
    ...(fleet.sets10000 ? { fleet10k: fleet.sets10000 } : {}),
    ...(distinct >= 2 ? { fleetSlope: fleetSlope(figures) } : {}),
  };
}

if (import.meta.main) {
  const flags = benchFlagsOrExit(Deno.args);
  // --fleet-sets alone measures the fleet alone.
  const scopes = flags.fleetSets ? {} : await memoryAtScaleFromFlags(flags);
  console.log(JSON.stringify({ ...scopes, ...await fleetFromFlags(flags) }, null, 2));
}
