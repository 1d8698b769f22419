import assert from "node:assert/strict";
import { waitFor } from "../harness/wait.ts";
import {
  chainEnd,
  childrenOf,
  commandLine,
  cpuByProcessKind,
  loadAverage,
  machineCpu,
  processKind,
  readMemory,
  readStat,
  resetPeakRss,
} from "./proc_stats.ts";

Deno.test("proc_stats: this process's CPU time grows with work and its peak covers its RSS", async () => {
  const before = await readStat(Deno.pid);
  const until = performance.now() + 300;
  let x = 0;
  while (performance.now() < until) x += Math.sqrt(x + 1);
  const after = await readStat(Deno.pid);
  assert.ok(x > 0);
  assert.ok(after.cpuSeconds > before.cpuSeconds, `${before.cpuSeconds} → ${after.cpuSeconds}`);
  assert.equal(after.startTicks, before.startTicks);
  const mem = await readMemory(Deno.pid);
  assert.ok(mem.rssMiB > 0 && mem.peakRssMiB >= mem.rssMiB, JSON.stringify(mem));
});

Deno.test("proc_stats: a launcher chain ends at the process it finally runs", async () => {
  // sh → sh → sleep: each shell has exactly one child until the sleep.
  const child = new Deno.Command("sh", {
    args: ["-c", "sh -c 'sleep 30; true'; true"],
    stdin: "null",
    stdout: "null",
    stderr: "null",
  }).spawn();
  try {
    const end = await waitFor(
      "the chain to reach sleep",
      async () => {
        const pid = await chainEnd(child.pid);
        return (await commandLine(pid)).startsWith("sleep") ? pid : undefined;
      },
      5_000,
      20,
    );
    assert.equal(await commandLine(end), "sleep 30");
    assert.deepEqual(await childrenOf(end), []);
    const middle = (await readStat(end)).ppid;
    assert.equal((await readStat(middle)).ppid, child.pid, "two hops: sh → sh → sleep");
    Deno.kill(end, "SIGKILL");
  } finally {
    try {
      child.kill("SIGKILL");
    } catch {
      // Already exited after its sleep was killed.
    }
    await child.status;
  }
});

Deno.test("processKind names each part of a benchmark system", () => {
  const cases: [string, string][] = [
    ["/root/.cache/x/bin/kube-apiserver --etcd-servers=http://127.0.0.1:1", "kube-apiserver"],
    ["/root/.cache/x/bin/etcd --data-dir /tmp/e", "etcd"],
    ["/usr/bin/docker-registry serve /tmp/r/config.yml", "registry"],
    ["deno run --allow-net=127.0.0.1:1 /work/main/sim/main.ts --status-addr :0", "simulator"],
    ["deno run --no-prompt --allow-net=127.0.0.1:1 /work/main/main.ts", "operator"],
    ["deno task start", "operator"],
    ["deno run -A tests/bench/scale_out.ts --sets 10", "benchmark"],
    ["sleep 5", "other"],
  ];
  for (const [cmdline, kind] of cases) assert.equal(processKind(cmdline), kind, cmdline);
});

Deno.test("cpuByProcessKind and machineCpu read this machine", async () => {
  const kinds = await cpuByProcessKind();
  assert.ok([...kinds.values()].every((v) => v >= 0));
  const cpu = await machineCpu();
  assert.ok(cpu.total > 0 && cpu.busy >= 0 && cpu.busy <= cpu.total);
});

Deno.test("proc_stats: a reset peak forgets an earlier high and covers what follows", async () => {
  // A child that touches 64 MiB, lets it go, then waits: its peak stays high until reset.
  const script = "let b = new Uint8Array(64 * 2 ** 20).fill(1); const x = b[12345]; b = null; " +
    "globalThis.gc(); console.log(x); setTimeout(() => {}, 30_000);";
  const child = new Deno.Command(Deno.execPath(), {
    args: ["eval", "--v8-flags=--expose-gc", script],
    stdin: "null",
    stdout: "piped",
    stderr: "null",
  }).spawn();
  try {
    const reader = child.stdout.getReader();
    await reader.read();
    reader.releaseLock();
    const before = await readMemory(child.pid);
    assert.ok(before.peakRssMiB >= 64, JSON.stringify(before));
    await resetPeakRss(child.pid);
    const after = await readMemory(child.pid);
    assert.ok(
      after.peakRssMiB < before.peakRssMiB - 32,
      `${JSON.stringify(before)} → ${JSON.stringify(after)}`,
    );
    assert.ok(after.peakRssMiB >= after.rssMiB);
  } finally {
    child.kill();
    await child.status;
    await child.stdout.cancel().catch(() => {});
  }
});

Deno.test("proc_stats: the load averages are three non-negative numbers", async () => {
  const load = await loadAverage();
  assert.equal(load.length, 3);
  assert.ok(load.every((n) => Number.isFinite(n) && n >= 0), JSON.stringify(load));
});
