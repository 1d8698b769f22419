/**
 * The harness servers as `deno task dev` runs them (`detached: true`): each in a session of its
 * own, so a terminal's Ctrl-C does not reach them; exits the harness asked for (stop, apiserver
 * restart) are not reported; a server killed from outside is, through `unexpectedExit`, with a
 * line naming it.
 */
import assert from "node:assert/strict";
import { startControlPlane } from "../harness/control_plane.ts";
import { registryAvailable, startRegistry } from "../harness/registry.ts";
import { waitUntil } from "../harness/wait.ts";
import { flushMicrotasks } from "../../kube/testing/wait.ts";

/** Process group and session of `pid`, from /proc. */
function groupAndSession(pid: number): { group: number; session: number } {
  const stat = Deno.readTextFileSync(`/proc/${pid}/stat`);
  const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  return { group: Number(fields[2]), session: Number(fields[3]) };
}

/** "pending" while `p` has not settled (after letting queued callbacks run). */
async function stateOf(p: Promise<string>): Promise<string> {
  await flushMicrotasks();
  return await Promise.race([p, Promise.resolve("pending")]);
}

Deno.test("detached control plane: own sessions; a restart is not an exit, a killed etcd is", async () => {
  const cp = await startControlPlane({ crdDir: "", detached: true });
  try {
    const apiserverPid = Number(await Deno.readTextFile(`${cp.dataDir}/kube-apiserver.pid`));
    const etcdPid = Number(await Deno.readTextFile(`${cp.dataDir}/etcd.pid`));
    for (const pid of [apiserverPid, etcdPid]) {
      assert.deepEqual(groupAndSession(pid), { group: pid, session: pid });
    }

    await cp.restartApiServer();
    assert.equal(await stateOf(cp.unexpectedExit), "pending", "a restart is asked for");

    Deno.kill(etcdPid, "SIGKILL");
    const line = await waitUntil(
      () => stateOf(cp.unexpectedExit).then((s) => s !== "pending" && s),
      {
        timeoutMs: 10_000,
        what: "unexpectedExit",
      },
    );
    assert.match(line, /^etcd exited on SIGKILL/);
  } finally {
    await cp.stop();
  }
});

Deno.test("control plane: stop() is not an unexpected exit", async () => {
  const cp = await startControlPlane({ crdDir: "" });
  await cp.stop();
  assert.equal(await stateOf(cp.unexpectedExit), "pending");
});

Deno.test({
  name: "detached registry: own session; stop() is not an exit, a killed registry is",
  ignore: !registryAvailable(),
  async fn() {
    const kept = await startRegistry({ auth: "none", detached: true });
    assert.deepEqual(groupAndSession(kept.pid), { group: kept.pid, session: kept.pid });
    await kept.stop();
    assert.equal(await stateOf(kept.unexpectedExit), "pending");

    const killed = await startRegistry({ auth: "none", detached: true });
    try {
      Deno.kill(killed.pid, "SIGKILL");
      const line = await waitUntil(
        () => stateOf(killed.unexpectedExit).then((s) => s !== "pending" && s),
        { timeoutMs: 10_000, what: "unexpectedExit" },
      );
      assert.match(line, /^docker-registry exited on SIGKILL/);
    } finally {
      await killed.stop();
    }
  },
});
