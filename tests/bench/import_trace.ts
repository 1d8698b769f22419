/**
 * Where start-up time goes before the operator does any work: a table of how long a fresh
 * `deno run` takes to import each heavy module (and the entry points' whole module graphs), each
 * in its own process, `runs` times, medians: wall time, and the main thread's CPU time
 * (/proc/thread-self/schedstat), which the machine's load changes much less. Beside it the floor: a `deno run` of an empty
 * module, from spawn to exit, and the process's own clock when the import began (the runtime's
 * boot). Run it with the module and V8 code caches warm (the first run of each row fills them and
 * is not counted). The child imports nothing else first (not even a `node:` module, which would
 * start Deno's Node compatibility layer before the row's own import).
 *
 * `deno run -A tests/bench/import_trace.ts [--runs 5]`; prints JSON. The operator's own start-up
 * after its imports (the first requests, the caches' sync) is in `deno task bench:startup`.
 *
 * @module
 */
import { OPERATOR_V8_FLAGS } from "../../scripts/runtime_flags.ts";

const repo = new URL("../../", import.meta.url);
const self = new URL(import.meta.url).pathname;

/** What each row imports: bare specifiers resolve through the repository's import map. */
export const traced: readonly { name: string; specifier: string }[] = [
  { name: "prom-client (its index)", specifier: "prom-client" },
  { name: "kube/prom_client.ts", specifier: new URL("kube/prom_client.ts", repo).href },
  { name: "@logtape/logtape", specifier: "@logtape/logtape" },
  { name: "js-yaml", specifier: "js-yaml" },
  { name: "config.ts", specifier: new URL("config.ts", repo).href },
  { name: "permissions.ts", specifier: new URL("permissions.ts", repo).href },
  { name: "kube/kubeconfig.ts", specifier: new URL("kube/kubeconfig.ts", repo).href },
  { name: "kube/metrics.ts", specifier: new URL("kube/metrics.ts", repo).href },
  { name: "kube/manager.ts", specifier: new URL("kube/manager.ts", repo).href },
  { name: "metrics/metrics.ts", specifier: new URL("metrics/metrics.ts", repo).href },
  { name: "scripts/start.ts (graph)", specifier: new URL("scripts/start.ts", repo).href },
  { name: "main.ts (graph)", specifier: new URL("main.ts", repo).href },
  { name: "operator.ts (graph)", specifier: new URL("operator.ts", repo).href },
];

/** One process's figures (ms). */
interface Sample {
  /** Spawn to exit, as the parent saw it. */
  wallMs: number;
  /** The child's performance.now() when its import began: the runtime's boot. */
  bootMs?: number;
  /** The dynamic import alone. */
  importMs?: number;
  /** The main thread's CPU time during the import. */
  importCpuMs?: number;
}

const CHILD_FLAG = "--import-trace-child";

async function runChild(specifier: string | undefined): Promise<Sample> {
  const args = [
    "run",
    "--no-prompt",
    "-A",
    `--v8-flags=${OPERATOR_V8_FLAGS.join(",")}`,
    self,
    CHILD_FLAG,
    ...(specifier ? [specifier] : []),
  ];
  const t0 = performance.now();
  const out = await new Deno.Command(Deno.execPath(), {
    args,
    cwd: repo.pathname,
    env: { DENO_NO_UPDATE_CHECK: "1" },
    stdin: "null",
    stdout: "piped",
    stderr: "inherit",
  }).output();
  const wallMs = performance.now() - t0;
  if (!out.success) throw new Error(`import of ${specifier ?? "nothing"} failed`);
  const line = new TextDecoder().decode(out.stdout).trim().split("\n").at(-1) ?? "{}";
  return { wallMs, ...(JSON.parse(line) as Omit<Sample, "wallMs">) };
}

function median(xs: number[]): number {
  const v = [...xs].sort((a, b) => a - b);
  const mid = Math.floor(v.length / 2);
  return v.length % 2 ? v[mid] : (v[mid - 1] + v[mid]) / 2;
}

const r1 = (x: number) => Math.round(x * 10) / 10;

/** The table: one row per traced module, plus the empty baseline. */
export async function importTrace(runs: number): Promise<Record<string, unknown>[]> {
  const rows: Record<string, unknown>[] = [];
  for (const row of [{ name: "(nothing: bare deno run)", specifier: "" }, ...traced]) {
    await runChild(row.specifier || undefined); // warm-up: module and code caches
    const samples: Sample[] = [];
    for (let i = 0; i < runs; i++) samples.push(await runChild(row.specifier || undefined));
    rows.push({
      module: row.name,
      wallMs: r1(median(samples.map((s) => s.wallMs))),
      bootMs: r1(median(samples.map((s) => s.bootMs ?? 0))),
      importMs: r1(median(samples.map((s) => s.importMs ?? 0))),
      importCpuMs: r1(median(samples.map((s) => s.importCpuMs ?? 0))),
      importMsEach: samples.map((s) => r1(s.importMs ?? 0)),
    });
  }
  return rows;
}

if (import.meta.main && Deno.args[0] === CHILD_FLAG) {
  /** The main thread's time on a CPU so far (ns in the first field of schedstat), in ms. */
  const cpuMs = () =>
    Number(Deno.readTextFileSync("/proc/thread-self/schedstat").split(" ")[0]) / 1e6;
  const bootMs = performance.now();
  const cpu0 = cpuMs();
  const specifier = Deno.args[1];
  if (specifier) await import(specifier);
  const importCpuMs = cpuMs() - cpu0;
  console.log(JSON.stringify({ bootMs, importMs: performance.now() - bootMs, importCpuMs }));
  // Nothing the imported modules started (timers, listeners) may keep the process alive.
  Deno.exit(0);
} else if (import.meta.main) {
  // Imported here, not at the top: a child must not start the Node layer before its row does.
  const { parseArgs } = await import("node:util");
  const { values } = parseArgs({ args: Deno.args, options: { runs: { type: "string" } } });
  const runs = Number(values.runs ?? 5);
  const { loadAverage } = await import("./proc_stats.ts");
  const load = (await loadAverage()).join(" ");
  console.log(JSON.stringify({ runs, loadAverage: load, rows: await importTrace(runs) }, null, 2));
}
