import assert from "node:assert/strict";
import { waitFor } from "../harness/wait.ts";
import {
  chainEnd,
  childrenOf,
  commandLine,
  cpuByProcessKind,
  machineCpu,
  processKind,
  readMemory,
  readStat,
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
