/**
 * A process's resource use as Linux reports it in /proc, read from the outside so any build of
 * the operator (a `deno run`, a compiled binary, the Go original) is measured the same way:
 * CPU seconds (utime + stime of /proc/<pid>/stat), current and peak resident set (VmRSS and
 * VmHWM of /proc/<pid>/status), when it started, and its child processes (to find the process
 * a launcher such as `deno task start` finally runs).
 *
 * @module
 */

/** Clock ticks per second of /proc's time fields (USER_HZ), read once from getconf. */
let ticksPerSecond: number | undefined;

async function clockTicks(): Promise<number> {
  if (ticksPerSecond === undefined) {
    try {
      const out = await new Deno.Command("getconf", { args: ["CLK_TCK"], stderr: "null" })
        .output();
      ticksPerSecond = Number(new TextDecoder().decode(out.stdout).trim()) || 100;
    } catch {
      ticksPerSecond = 100; // USER_HZ on every mainstream Linux architecture
    }
  }
  return ticksPerSecond;
}

/** The fields of /proc/<pid>/stat the benchmarks use. */
export interface ProcStat {
  ppid: number;
  /** User plus system CPU time, in seconds. */
  cpuSeconds: number;
  /** Start time in clock ticks since boot (10 ms resolution at USER_HZ 100). */
  startTicks: number;
  ticksPerSecond: number;
}

/** Parses /proc/<pid>/stat (the command name may hold spaces and parentheses). */
export async function readStat(pid: number): Promise<ProcStat> {
  const text = await Deno.readTextFile(`/proc/${pid}/stat`);
  // Fields after the command name start with field 3 (state); see proc(5).
  const rest = text.slice(text.lastIndexOf(")") + 2).split(" ");
  const field = (n: number) => Number(rest[n - 3]);
  const hz = await clockTicks();
  return {
    ppid: field(4),
    cpuSeconds: (field(14) + field(15)) / hz,
    startTicks: field(22),
    ticksPerSecond: hz,
  };
}

/** Resident memory of a process, in MiB. */
export interface ProcMemory {
  /** VmRSS: resident now. */
  rssMiB: number;
  /** VmHWM: the highest resident set since the process started. */
  peakRssMiB: number;
}

/** Reads VmRSS and VmHWM from /proc/<pid>/status. */
export async function readMemory(pid: number): Promise<ProcMemory> {
  const text = await Deno.readTextFile(`/proc/${pid}/status`);
  const kib = (name: string) => {
    const m = text.match(new RegExp(`^${name}:\\s+(\\d+) kB`, "m"));
    if (!m) throw new Error(`/proc/${pid}/status has no ${name}`);
    return Number(m[1]);
  };
  return { rssMiB: mib(kib("VmRSS") * 1024), peakRssMiB: mib(kib("VmHWM") * 1024) };
}

/**
 * Lowers a process's VmHWM to its current resident set (`5` into /proc/<pid>/clear_refs, Linux
 * 4.0 and later; needs the right to write that file: the same user, or root), so a later
 * VmHWM is the peak of what came after, not of the process's whole life.
 */
export async function resetPeakRss(pid: number): Promise<void> {
  await Deno.writeTextFile(`/proc/${pid}/clear_refs`, "5");
}

/** The machine's load averages over 1, 5 and 15 minutes (/proc/loadavg). */
export async function loadAverage(): Promise<[number, number, number]> {
  const [one, five, fifteen] = (await Deno.readTextFile("/proc/loadavg")).split(" ").map(Number);
  return [one, five, fifteen];
}

/** Bytes as MiB with one decimal. */
export function mib(bytes: number): number {
  return Math.round(bytes / 2 ** 20 * 10) / 10;
}

/** The pids of a process's children (every thread's; /proc/<pid>/task/<tid>/children). */
export async function childrenOf(pid: number): Promise<number[]> {
  const out: number[] = [];
  try {
    for await (const task of Deno.readDir(`/proc/${pid}/task`)) {
      const text = await Deno.readTextFile(`/proc/${pid}/task/${task.name}/children`)
        .catch(() => "");
      for (const word of text.split(/\s+/)) if (word) out.push(Number(word));
    }
  } catch {
    // The process is gone.
  }
  return out.sort((a, b) => a - b);
}

/**
 * A launcher chain: from `pid`, the only child while there is exactly one. `deno task start` →
 * `deno run scripts/start.ts` → `deno run main.ts` gives three pids; a binary started directly
 * is a chain of one.
 */
export async function launchChain(pid: number): Promise<number[]> {
  const chain = [pid];
  for (;;) {
    const children = await childrenOf(chain.at(-1)!);
    if (children.length !== 1) return chain;
    chain.push(children[0]);
  }
}

/** The process a launcher chain ends in (see launchChain): the one doing the work. */
export async function chainEnd(pid: number): Promise<number> {
  return (await launchChain(pid)).at(-1)!;
}

/** The command line of a process (arguments joined by spaces), "" when it is gone. */
export async function commandLine(pid: number): Promise<string> {
  try {
    return (await Deno.readTextFile(`/proc/${pid}/cmdline`)).split("\0").filter((a) => a)
      .join(" ");
  } catch {
    return "";
  }
}

/** CPU seconds of every process on the machine, summed by a short name (see processKind). */
export async function cpuByProcessKind(): Promise<Map<string, number>> {
  const out = new Map<string, number>();
  for await (const entry of Deno.readDir("/proc")) {
    if (!/^\d+$/.test(entry.name)) continue;
    const pid = Number(entry.name);
    try {
      const [stat, cmdline] = await Promise.all([readStat(pid), commandLine(pid)]);
      const kind = processKind(cmdline);
      out.set(kind, (out.get(kind) ?? 0) + stat.cpuSeconds);
    } catch {
      // Gone between the listing and the read.
    }
  }
  return out;
}

/**
 * Which part of a benchmark system a command line belongs to: the control plane, the registry,
 * the simulator, an operator replica, or the benchmark itself (its forwarders and pollers).
 */
export function processKind(cmdline: string): string {
  if (/\bkube-apiserver\b/.test(cmdline)) return "kube-apiserver";
  if (/\betcd\b/.test(cmdline)) return "etcd";
  if (/docker-registry|registry serve/.test(cmdline)) return "registry";
  if (/\bsim\/main\.ts\b/.test(cmdline)) return "simulator";
  if (/(^|\/)main\.ts\b|scripts\/start\.ts|\bdeno task\b/.test(cmdline)) return "operator";
  if (/tests\/bench\//.test(cmdline)) return "benchmark";
  return "other";
}

/** Machine-wide CPU use from /proc/stat: busy and total jiffies (all cores). */
export async function machineCpu(): Promise<{ busy: number; total: number }> {
  const line = (await Deno.readTextFile("/proc/stat")).split("\n")[0];
  const v = line.trim().split(/\s+/).slice(1).map(Number);
  const idle = (v[3] ?? 0) + (v[4] ?? 0);
  const total = v.reduce((a, b) => a + b, 0);
  return { busy: total - idle, total };
}
