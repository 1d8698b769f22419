/**
 * A summary of a V8 CPU profile (`.cpuprofile`, as `deno run --cpu-prof` writes one when the
 * process exits): where the main thread's samples went, by function (self time), by source file
 * (self time) and by function including what it called. `(idle)` is time the thread waited for
 * I/O or timers, `(garbage collector)` the collections the main thread ran; worker threads (V8's
 * concurrent GC, the runtime's I/O) are not in the profile.
 *
 * To profile the operator in a benchmark, run main.ts directly under `--cpu-prof` (the launcher
 * drops flags it does not know), e.g.
 * `deno task bench:flows --flows hibernateWake --operator-cmd "MALLOC_ARENA_MAX=2
 * OPERATOR_ALLOW_EXTRA_PERMISSIONS=true deno run -A
 * --v8-flags=--max-semi-space-size=2,--memory-saver-mode --cpu-prof --cpu-prof-dir=/tmp/prof
 * main.ts"`, then `deno run --allow-read tests/bench/cpu_profile.ts /tmp/prof/*.cpuprofile`.
 * The profile is written when the operator exits (the benchmark stops it with SIGTERM). Run so,
 * the operator also gets the benchmark's DENO_V8_FLAGS (`--trace-gc`), which `deno task start`
 * does not pass on.
 *
 * @module
 */

/** The parts of a `.cpuprofile` this reads (Chrome DevTools protocol, Profiler.Profile). */
export interface CpuProfile {
  nodes: {
    id: number;
    callFrame: { functionName: string; url: string; lineNumber: number };
    children?: number[];
  }[];
  samples: number[];
  /** Microseconds between consecutive samples (the first from startTime). */
  timeDeltas: number[];
}

/** Seconds by name, largest first. */
export type Ranking = [name: string, seconds: number][];

/** The profile summarized (seconds of the main thread). */
export interface ProfileSummary {
  totalSeconds: number;
  bySelf: Ranking;
  byFile: Ranking;
  inclusive: Ranking;
}

/** `file.ts:line` of a URL under `root`, else the URL's last two segments. */
function shortUrl(url: string, root: string): string {
  if (url === "") return "";
  if (root && url.startsWith(root)) return url.slice(root.length);
  return url.split("/").slice(-2).join("/");
}

function ranked(m: Map<string, number>, top: number): Ranking {
  return [...m.entries()].sort((a, b) => b[1] - a[1]).slice(0, top)
    .map(([k, us]) => [k, Math.round(us / 1e4) / 100]);
}

/** Summarizes a profile; `root` (a file URL prefix) is cut from the names of project files. */
export function summarizeProfile(
  profile: CpuProfile,
  opts: { root?: string; top?: number } = {},
): ProfileSummary {
  const root = opts.root ?? "";
  const top = opts.top ?? 30;
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  const parent = new Map<number, number>();
  for (const n of profile.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
  const name = (id: number) => {
    const cf = byId.get(id)!.callFrame;
    const where = shortUrl(cf.url, root);
    return where ? `${cf.functionName || "(anonymous)"} ${where}:${cf.lineNumber + 1}` : (
      cf.functionName || "(anonymous)"
    );
  };
  const timeById = new Map<number, number>();
  profile.samples.forEach((id, i) =>
    timeById.set(id, (timeById.get(id) ?? 0) + (profile.timeDeltas[i] ?? 0))
  );
  const bySelf = new Map<string, number>();
  const byFile = new Map<string, number>();
  const inclusive = new Map<string, number>();
  let total = 0;
  for (const [id, us] of timeById) {
    total += us;
    const self = name(id);
    bySelf.set(self, (bySelf.get(self) ?? 0) + us);
    const cf = byId.get(id)!.callFrame;
    const file = shortUrl(cf.url, root) || cf.functionName || "(anonymous)";
    byFile.set(file, (byFile.get(file) ?? 0) + us);
    // Each function once per sample, however deep it recursed.
    const seen = new Set<string>();
    for (let at: number | undefined = id; at !== undefined; at = parent.get(at)) {
      const n = name(at);
      if (seen.has(n)) continue;
      seen.add(n);
      inclusive.set(n, (inclusive.get(n) ?? 0) + us);
    }
  }
  return {
    totalSeconds: Math.round(total / 1e4) / 100,
    bySelf: ranked(bySelf, top),
    byFile: ranked(byFile, top),
    inclusive: ranked(inclusive, top),
  };
}

if (import.meta.main) {
  const root = new URL("../../", import.meta.url).href;
  for (const file of Deno.args) {
    const profile = JSON.parse(await Deno.readTextFile(file)) as CpuProfile;
    const s = summarizeProfile(profile, { root, top: 40 });
    console.log(`# ${file}: ${s.totalSeconds} s of the main thread`);
    for (
      const [title, rows] of [["self", s.bySelf], ["file", s.byFile], [
        "inclusive",
        s.inclusive,
      ]] as const
    ) {
      console.log(`## by ${title}`);
      for (const [n, sec] of rows) console.log(`${sec.toFixed(2).padStart(9)}  ${n}`);
    }
  }
}
