/**
 * The process families a Go operator serves from client_golang's process collector (which
 * controller-runtime installs on its registry): CPU time, resident memory and start time, so
 * restart, CPU and memory panels built for Go operators work here. Only what Deno reports without
 * extra permissions: the file-descriptor and virtual-memory families would need `/proc` reads.
 */
import { Counter, Gauge, type Registry } from "./prom_client.ts";

/**
 * node:process, imported at the first scrape rather than at start-up: Deno builds its Node
 * process object on that import, ~12 ms on the start-up path and ~1.5 MiB resident
 * (docs/architecture.md, "Start-up"), for one call per scrape.
 */
let nodeProcess: Promise<typeof import("node:process")> | undefined;

/** Wall-clock start of this process in seconds since the epoch; fixed at module load. */
const startSeconds = (Date.now() - performance.now()) / 1000;

/** Families that read the process at scrape time; not registered anywhere until register(). */
const families = [
  new Counter({
    name: "process_cpu_seconds_total",
    help: "User and system CPU time this process has used, in seconds.",
    registers: [],
    async collect() {
      const { user, system } = (await (nodeProcess ??= import("node:process"))).cpuUsage();
      this.reset();
      this.inc((user + system) / 1e6);
    },
  }),
  new Gauge({
    name: "process_resident_memory_bytes",
    help: "Resident set size of this process, in bytes.",
    registers: [],
    collect() {
      this.set(Deno.memoryUsage().rss);
    },
  }),
  new Gauge({
    name: "process_start_time_seconds",
    help: "When this process started, in seconds since the Unix epoch.",
    registers: [],
    collect() {
      this.set(startSeconds);
    },
  }),
];

/** Adds the process families to reg; adding them again is a no-op. */
export function registerProcessMetrics(reg: Registry): void {
  for (const metric of families) reg.registerMetric(metric);
}
