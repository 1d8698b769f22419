import assert from "node:assert/strict";
import { spawnWatchdog, writePidFile } from "./watchdog.ts";
import { runProcess } from "./process.ts";
import { waitFor } from "./wait.ts";

const watchdogModule = new URL("./watchdog.ts", import.meta.url).href;

function alive(pid: number): boolean {
  try {
    const stat = Deno.readTextFileSync(`/proc/${pid}/stat`);
    return stat.slice(stat.lastIndexOf(")") + 2)[0] !== "Z";
  } catch {
    return false;
  }
}

/**
 * A parent process that starts a detached `sleep` (with a child of its own) and a watchdog for
 * it, prints the pids, and waits to be killed.
 */
function parentScript(dir: string): string {
  return `
import { spawnWatchdog, writePidFile } from ${JSON.stringify(watchdogModule)};
const leader = new Deno.Command("sh", {
  args: ["-c", "sleep 300 & echo member=$!; wait"],
  stdout: "piped", stdin: "null", stderr: "null", detached: true,
}).spawn();
writePidFile(${JSON.stringify(dir)}, "leader", leader.pid);
spawnWatchdog({ pidDir: ${JSON.stringify(dir)}, removeDirs: [${JSON.stringify(dir)}] });
const reader = leader.stdout.pipeThrough(new TextDecoderStream()).getReader();
const first = (await reader.read()).value ?? "";
console.log("leader=" + leader.pid + " " + first.trim());
await new Promise(() => {});
`;
}

Deno.test("watchdog: a SIGKILLed parent's detached group is killed and its folder removed", async () => {
  const dir = await Deno.makeTempDir({ prefix: "watchdog-test-" });
  const parent = await runProcess([Deno.execPath(), "eval", parentScript(dir)]);
  let leader = 0;
  let member = 0;
  try {
    const match = await parent.waitForOutput(/leader=(\d+) member=(\d+)/, 30_000);
    leader = Number(match[1]);
    member = Number(match[2]);
    assert.ok(alive(leader) && alive(member));
    parent.kill("SIGKILL");
    await parent.status;
    await waitFor("the group leader is gone", () => !alive(leader), 10_000, 50);
    await waitFor("its other member is gone", () => !alive(member), 10_000, 50);
    await waitFor(
      "the folder is removed",
      async () => {
        try {
          await Deno.stat(dir);
          return false;
        } catch {
          return true;
        }
      },
      10_000,
      50,
    );
  } finally {
    for (const pid of [leader, member]) {
      if (pid && alive(pid)) Deno.kill(pid, "SIGKILL");
    }
    await parent.stop(1_000);
    await Deno.remove(dir, { recursive: true }).catch(() => {});
  }
});

Deno.test("watchdog: dismissed, it kills nothing and removes nothing", async () => {
  const dir = await Deno.makeTempDir({ prefix: "watchdog-test-" });
  const sleeper = new Deno.Command("sleep", { args: ["300"], stdin: "null" }).spawn();
  try {
    writePidFile(dir, "sleeper", sleeper.pid);
    const watchdog = spawnWatchdog({ pidDir: dir, removeDirs: [dir] });
    await watchdog.dismiss();
    await watchdog.dismiss();
    assert.ok(alive(sleeper.pid));
    assert.ok((await Deno.stat(dir)).isDirectory);
  } finally {
    sleeper.kill("SIGKILL");
    await sleeper.status;
    await Deno.remove(dir, { recursive: true });
  }
});
