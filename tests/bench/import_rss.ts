/**
 * Resident memory of a process that has imported one module (default: main.ts's whole graph):
 * imports it, waits 300 ms for lazy start-up work to settle, runs a full GC and prints
 * Deno.memoryUsage() with RssAnon / RssFile from /proc/self/status, as JSON.
 *
 * `MALLOC_ARENA_MAX=2 deno run -A --v8-flags=--max-semi-space-size=2,--expose-gc
 * tests/bench/import_rss.ts [module]`; a bare specifier resolves through the import map, a path
 * relative to the repository root. Without a module it measures a bare deno (the floor).
 *
 * @module
 */
const repo = new URL("../../", import.meta.url);
const arg = Deno.args[0] ?? "main.ts";
if (arg !== "-") {
  const specifier = /^[./]|\.ts$/.test(arg) ? new URL(arg, repo).href : arg;
  await import(specifier);
}
await new Promise((resolve) => setTimeout(resolve, 300));
const gc = (globalThis as { gc?: () => void }).gc;
if (!gc) throw new Error("run with --v8-flags=--expose-gc");
gc();
const status = await Deno.readTextFile("/proc/self/status");
const kib = (field: string) =>
  Number(new RegExp(`^${field}:\\s+(\\d+) kB$`, "m").exec(status)?.[1]);
const mib = (bytes: number) => Math.round(bytes / 1048576 * 10) / 10;
const mem = Deno.memoryUsage();
console.log(JSON.stringify({
  module: arg === "-" ? "(nothing)" : arg,
  rssMiB: mib(mem.rss),
  heapUsedMiB: mib(mem.heapUsed),
  externalMiB: mib(mem.external),
  rssAnonMiB: mib(kib("RssAnon") * 1024),
  rssFileMiB: mib(kib("RssFile") * 1024),
}));
// Nothing the imported modules started (timers, listeners) may keep the process alive.
Deno.exit(0);
