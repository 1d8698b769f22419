import assert from "node:assert/strict";
import { runProcess } from "./process.ts";

Deno.test("runProcess collects output, tees it to the log and reports the exit code", async () => {
  const proc = await runProcess(["sh", "-c", 'echo "out:$GREETING"; echo err >&2; exit 3'], {
    env: { GREETING: "hi" },
    kubeconfig: "/nonexistent/kubeconfig",
  });
  try {
    const status = await proc.status;
    assert.equal(status.code, 3);
    assert.equal(proc.stdout, "out:hi\n");
    assert.equal(proc.stderr, "err\n");
    const logged = await Deno.readTextFile(proc.logFile);
    assert.match(logged, /out:hi/);
    assert.match(logged, /err/);
  } finally {
    await Deno.remove(proc.logFile);
  }
});

Deno.test("runProcess passes KUBECONFIG to the child", async () => {
  const proc = await runProcess(["sh", "-c", 'echo "kc=$KUBECONFIG"'], { kubeconfig: "/x/y" });
  try {
    assert.equal((await proc.status).code, 0);
    assert.equal(proc.stdout, "kc=/x/y\n");
  } finally {
    await Deno.remove(proc.logFile);
  }
});

Deno.test("waitForOutput resolves on a later line and stop ends a long-running child", async () => {
  const proc = await runProcess([
    "sh",
    "-c",
    "echo starting; sleep 0.2; echo 'ready on 8080'; exec sleep 60",
  ]);
  try {
    const match = await proc.waitForOutput(/ready on (\d+)/, 10_000);
    assert.equal(match[1], "8080");
    const status = await proc.stop(5_000);
    assert.equal(status.success, false);
    assert.equal(status.signal, "SIGTERM");
  } finally {
    proc.kill("SIGKILL");
    await proc.status;
    await Deno.remove(proc.logFile);
  }
});

Deno.test("waitForOutput rejects when the child exits without the pattern", async () => {
  const proc = await runProcess(["sh", "-c", "echo nothing useful"]);
  try {
    await assert.rejects(proc.waitForOutput(/never/, 10_000), /exited/);
  } finally {
    await proc.status;
    await Deno.remove(proc.logFile);
  }
});

Deno.test("waitForOutput times out", async () => {
  const proc = await runProcess(["sleep", "30"]);
  try {
    await assert.rejects(proc.waitForOutput(/never/, 100), /timed out/);
  } finally {
    await proc.stop();
    await Deno.remove(proc.logFile);
  }
});
