import assert from "node:assert/strict";
import { describeExit, spawnDevChild } from "./dev_child.ts";
import { waitFor } from "../kube/testing/wait.ts";

/** Whether a process with this pid is alive (present and not a zombie). */
function alive(pid: number): boolean {
  try {
    const stat = Deno.readTextFileSync(`/proc/${pid}/stat`);
    return stat.slice(stat.lastIndexOf(")") + 2)[0] !== "Z";
  } catch {
    return false;
  }
}

function sh(script: string, lines: string[]) {
  return spawnDevChild({
    name: "t",
    command: "sh",
    args: ["-c", script],
    onLine: (l) => lines.push(l),
  });
}

Deno.test("dev child: stdout and stderr lines reach onLine, the last unterminated one too", async () => {
  const lines: string[] = [];
  const child = sh("echo one; echo two >&2; printf three", lines);
  const status = await child.status;
  assert.equal(status.code, 0);
  assert.deepEqual([...lines].sort(), ["one", "three", "two"]);
});

Deno.test("dev child: waitForLine resolves with the matching line", async () => {
  const lines: string[] = [];
  const child = sh("echo starting; echo 'ready: nodes=a,b'; exec sleep 30", lines);
  try {
    assert.equal(await child.waitForLine(/ready: nodes=/, 10_000), "ready: nodes=a,b");
  } finally {
    await child.stop(1_000);
  }
});

Deno.test("dev child: waitForLine rejects when the child exits without the line", async () => {
  const child = sh("echo nope; exit 4", []);
  await assert.rejects(child.waitForLine(/ready/, 10_000), /exited with code 4 before printing/);
});

Deno.test("dev child: stop kills the whole group when SIGTERM is ignored", async () => {
  const lines: string[] = [];
  // Ignored signals stay ignored across fork and exec: neither shell nor sleep heeds SIGTERM.
  const child = sh('trap "" TERM; sleep 300 & echo "grandchild=$!"; wait', lines);
  const grandchild = Number((await child.waitForLine(/^grandchild=/, 10_000)).split("=")[1]);
  assert.ok(alive(grandchild));
  const status = await child.stop(200);
  assert.equal(status.signal, "SIGKILL");
  await waitFor("the grandchild is gone", () => !alive(grandchild));
});

Deno.test("dev child: a child that exits leaving a grandchild on its pipes still settles", async () => {
  const lines: string[] = [];
  const child = sh('sleep 300 & echo "grandchild=$!"; exit 3', lines);
  const status = await child.status;
  assert.equal(status.code, 3);
  const grandchild = Number(lines.find((l) => l.startsWith("grandchild="))?.split("=")[1]);
  assert.ok(grandchild > 0);
  await waitFor("the grandchild is gone", () => !alive(grandchild));
});

Deno.test("dev child: the child runs in a session of its own", async () => {
  const child = sh("exec sleep 30", []);
  try {
    const stat = Deno.readTextFileSync(`/proc/${child.pid}/stat`);
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    // Fields after the name: state, ppid, pgrp, session.
    assert.equal(Number(fields[2]), child.pid, "process group");
    assert.equal(Number(fields[3]), child.pid, "session");
  } finally {
    await child.stop(1_000);
  }
});

Deno.test("dev child: the pid file exists while the child runs and is gone after", async () => {
  const dir = await Deno.makeTempDir();
  try {
    const child = spawnDevChild({
      name: "sim",
      command: "sh",
      args: ["-c", "exec sleep 30"],
      pidDir: dir,
      onLine: () => {},
    });
    assert.equal(await Deno.readTextFile(`${dir}/sim.pid`), String(child.pid));
    await child.stop(1_000);
    await assert.rejects(Deno.stat(`${dir}/sim.pid`), Deno.errors.NotFound);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("dev child: describeExit names the code or the signal", () => {
  assert.equal(describeExit({ success: false, code: 1, signal: null }), "exited with code 1");
  assert.equal(
    describeExit({ success: false, code: 137, signal: "SIGKILL" }),
    "was killed by SIGKILL",
  );
});
