/**
 * Start-up of the operator under test on an empty cluster (control plane, registry and simulator
 * with no CocoonSet), measured from the spawn of its command, `runs` times after one untimed
 * warm-up run (module and compile caches filled):
 *
 * - listeningMs: the first HTTP answer (any status) on the probe port, polled every 2 ms;
 * - readyzMs: the first /readyz 200;
 * - cachesSyncedMs: the manager's "caches synced" log line reaching us;
 * - workersStartedMs: the second "Starting … workers" line (ours says "Starting 4 workers of
 *   cocoonset", controller-runtime "Starting workers"; both controllers, CocoonSet and
 *   CocoonHibernation, run their workers), the point the issue compares: the Go original's
 *   workers run at 253 ms on these machines and its /readyz answers at 48 ms, before its caches
 *   sync (controller-runtime serves probes at once; ours answers /readyz only once started);
 * - cacheSyncToWorkersMs: the two above apart;
 * - launcherMs: from the spawned command to the start of the process that does the work (for
 *   `deno task start`: `deno task`, then scripts/start.ts computing the permission set, then
 *   main.ts); `…FromProcessStart` figures subtract it, for comparison with a binary started
 *   directly. /proc start times have 10 ms resolution;
 * - operatorCpuMs: CPU time (user + system, every thread) the operator process had used when
 *   the above were seen, from /proc (10 ms resolution): the start-up's cost with the machine's
 *   load taken out, which wall times on a shared machine cannot show;
 * - stepStartsMs: when each process of the launch chain started, after the first (stepName:
 *   `deno task`, the launcher, the operator), so the launcher's time splits by process. What
 *   each spends on module loading is in tests/bench/import_trace.ts.
 *
 * A line's time is when it arrived through the pipe, not its own timestamp, so the figures
 * apply to any build whatever its log format. Medians over the runs, and each run.
 *
 * Run alone: `deno run -A tests/bench/startup.ts [--quick] [--operator-cmd "…"]`.
 *
 * @module
 */
import { type BenchFlags, benchFlagsOrExit } from "./flags.ts";
import { progress } from "./load.ts";
import type { OperatorUnderTest } from "./operator_under_test.ts";
import { commandLine, launchChain, readStat } from "./proc_stats.ts";
import { startBenchSystem } from "./system.ts";
import { waitUntil } from "../harness/wait.ts";

/** The Go original on these machines (the Proof issue). */
export const GO_STARTUP = { readyzMs: 48, workersStartedMs: 253 };

/** What to run. */
export interface StartupOptions {
  operatorCmd: string;
  /** Timed runs (default 5). */
  runs?: number;
}

/** One start's figures, ms from the spawn (undefined: never seen within the deadline). */
export interface StartupRun {
  listeningMs?: number;
  readyzMs?: number;
  cachesSyncedMs?: number;
  workersStartedMs?: number;
  launcherMs?: number;
  operatorCpuMs?: number;
  /**
   * When each process of the launch chain started, ms after the first (10 ms resolution), by
   * step: for `deno task start` the task runner, the launcher, the operator.
   */
  steps?: { step: string; startMs: number }[];
}

/** A short name for a process of the launch chain, from its command line. */
export function stepName(cmdline: string): string {
  // The benchmark's own `sh -c "<operator command>"`, first in every chain.
  if (/^(\S*\/)?sh -c /.test(cmdline)) return "sh";
  if (/\bdeno task\b/.test(cmdline)) return "deno task";
  if (/scripts\/start\.ts/.test(cmdline)) return "launcher (start.ts)";
  if (/main\.ts/.test(cmdline)) return "operator (main.ts)";
  return cmdline.split(" ")[0].split("/").at(-1) ?? cmdline;
}

const DEADLINE_MS = 30_000;

/** Resolves with ms since `from` when `p` settles successfully, undefined when it fails. */
function msWhen(p: Promise<unknown>, from: number): Promise<number | undefined> {
  return p.then(() => performance.now() - from, () => undefined);
}

/** Polls `url` every 2 ms until ok(status); rejects after the deadline. */
function pollHttp(url: string, ok: (status: number) => boolean): Promise<true> {
  return waitUntil(async () => {
    const res = await fetch(url);
    await res.body?.cancel();
    return ok(res.status);
  }, { what: url, timeoutMs: DEADLINE_MS, intervalMs: 2 });
}

async function measureOnce(op: OperatorUnderTest): Promise<StartupRun> {
  const t0 = op.spawnedAt;
  const [listeningMs, readyzMs, cachesSyncedMs, workersStartedMs] = await Promise.all([
    msWhen(pollHttp(`${op.probeUrl}/healthz`, () => true), t0),
    msWhen(pollHttp(`${op.probeUrl}/readyz`, (s) => s === 200), t0),
    msWhen(op.proc.waitForOutput(/caches synced/i, DEADLINE_MS), t0),
    msWhen(
      op.proc.waitForOutput(/Starting (\d+ )?workers[\s\S]*Starting (\d+ )?workers/, DEADLINE_MS),
      t0,
    ),
  ]);
  const [root, end] = await Promise.all([readStat(op.proc.pid), readStat(await op.pid())]);
  const chain = await launchChain(op.proc.pid);
  const stats = await Promise.all(chain.map(async (pid) => ({
    stat: await readStat(pid),
    cmdline: await commandLine(pid),
  })));
  const steps = stats.map(({ stat, cmdline }) => ({
    step: stepName(cmdline),
    startMs: (stat.startTicks - root.startTicks) * 1000 / root.ticksPerSecond,
  }));
  return {
    steps,
    listeningMs,
    readyzMs,
    cachesSyncedMs,
    workersStartedMs,
    launcherMs: (end.startTicks - root.startTicks) * 1000 / root.ticksPerSecond,
    operatorCpuMs: end.cpuSeconds * 1000,
  };
}

function median(values: (number | undefined)[]): number | undefined {
  const v = values.filter((x): x is number => x !== undefined).sort((a, b) => a - b);
  if (v.length === 0) return undefined;
  const mid = Math.floor(v.length / 2);
  return v.length % 2 ? v[mid] : (v[mid - 1] + v[mid]) / 2;
}

const round = (x: number | undefined) => x === undefined ? undefined : Math.round(x);
const minus = (a: number | undefined, b: number | undefined) =>
  a === undefined || b === undefined ? undefined : a - b;

/** Runs the benchmark (see the module doc). */
export async function benchStartup(opts: StartupOptions): Promise<Record<string, unknown>> {
  const runs = opts.runs ?? 5;
  await using system = await startBenchSystem({ operatorCmd: opts.operatorCmd });
  const results: StartupRun[] = [];
  let operator = "";
  for (let i = 0; i <= runs; i++) {
    const op = await system.startOperator({ waitReady: false });
    const run = await measureOnce(op);
    operator ||= await op.describe();
    if (i > 0) results.push(run);
    progress(`startup: run ${i}${i === 0 ? " (warm-up)" : ""}: ${JSON.stringify(run)}`);
    await op.stop();
  }
  const m = (k: Exclude<keyof StartupRun, "steps">) => median(results.map((r) => r[k]));
  // Median start of each step (the chain is the same in every run).
  const stepStartsMs = Object.fromEntries(
    (results[0]?.steps ?? []).map(({ step }, i) => [
      step,
      round(median(results.map((r) => r.steps?.[i]?.startMs))),
    ]),
  );
  const workers = m("workersStartedMs");
  const launcher = m("launcherMs");
  return {
    operator,
    runs,
    listeningMs: round(m("listeningMs")),
    readyzMs: round(m("readyzMs")),
    cachesSyncedMs: round(m("cachesSyncedMs")),
    workersStartedMs: round(workers),
    cacheSyncToWorkersMs: round(
      median(results.map((r) => minus(r.workersStartedMs, r.cachesSyncedMs))),
    ),
    launcherMs: round(launcher),
    operatorCpuMs: round(m("operatorCpuMs")),
    stepStartsMs,
    readyzMsFromProcessStart: round(
      median(results.map((r) => minus(r.readyzMs, r.launcherMs))),
    ),
    workersStartedMsFromProcessStart: round(
      median(results.map((r) => minus(r.workersStartedMs, r.launcherMs))),
    ),
    goOriginal: GO_STARTUP,
    workersStartedVsGoMs: round(minus(workers, GO_STARTUP.workersStartedMs)),
    workersStartedFromProcessStartVsGoMs: round(
      minus(minus(workers, launcher), GO_STARTUP.workersStartedMs),
    ),
    each: results.map(({ steps: _, ...r }) =>
      Object.fromEntries(Object.entries(r).map(([k, v]) => [k, round(v)]))
    ),
  };
}

/** The benchmark as the command line asks for it (`--quick`: 2 runs). */
export function startupFromFlags(flags: BenchFlags): Promise<Record<string, unknown>> {
  return benchStartup({ operatorCmd: flags.operatorCmd, runs: flags.quick ? 2 : 5 });
}

if (import.meta.main) {
  const startup = await startupFromFlags(benchFlagsOrExit(Deno.args));
  console.log(JSON.stringify({ startup }, null, 2));
}
