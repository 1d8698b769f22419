/**
 * Leader failover on real processes: two operator replicas with leader election (15 s lease,
 * 10 s renew deadline, 2 s retry). SIGKILL of the leader leaves its Lease to expire: the standby
 * takes over within 20 s. SIGTERM of the leader releases the Lease on the way out: the standby
 * takes over within 3 s. Each time, a CocoonSet created while nobody leads converges under the
 * new leader, and the killed replica comes back as the standby.
 *
 * Figures: takeover time (kill → the Lease names the standby) and the time until the set created
 * in the gap is Running.
 */
import assert from "node:assert/strict";
import { type Lease, Leases } from "../../kube/core.ts";
import { LEADER_ELECTION_ID } from "../../config.ts";
import { OPERATOR_NAMESPACE, type Stack } from "../harness/stack.ts";
import { waitUntil } from "../harness/wait.ts";
import { createSet, inPhase, waitSet } from "../harness/stack_objects.ts";
import { faultSuite, killAndRestart, sigkillOperator } from "./_support.ts";

const NS = "faults-leader";

/** The replica index holding the Lease (identity `cocoon-operator-<i>_<uuid>`), if any. */
async function holder(stack: Stack): Promise<number | undefined> {
  let lease: Lease;
  try {
    lease = await stack.admin.get(Leases, OPERATOR_NAMESPACE, LEADER_ELECTION_ID);
  } catch {
    return undefined;
  }
  const m = lease.spec?.holderIdentity?.match(/^cocoon-operator-(\d+)_/);
  return m ? Number(m[1]) : undefined;
}

/** Polls the Lease every 50 ms until replica i holds it; returns when that was seen. */
async function waitHolder(stack: Stack, i: number, timeoutMs: number): Promise<number> {
  await waitUntil(async () => (await holder(stack)) === i, {
    what: `replica ${i} holds the Lease`,
    timeoutMs,
    intervalMs: 50,
  });
  return Date.now();
}

faultSuite("leader failover", { operators: 2 }, async (stack, scenario) => {
  const leader0 = await waitUntil(() => holder(stack), {
    what: "a leader",
    timeoutMs: 30_000,
    intervalMs: 100,
  });
  const running = inPhase("Running");
  await waitSet(stack, await createSet(stack, NS, "steady"), "Running", running);

  let leader = leader0;
  await scenario("SIGKILL of the leader: the standby takes over within 20 s", async (fig) => {
    const standby = 1 - leader;
    // Restarted only after the takeover: nothing but the Lease's expiry hands leadership over.
    const killedAt = await sigkillOperator(stack, leader);
    const gap = await createSet(stack, NS, "gap-kill");
    const tookOver = await waitHolder(stack, standby, 40_000);
    fig.takeoverMs = tookOver - killedAt;
    await waitSet(stack, gap, "Running under the new leader", running);
    fig.gapSetRunningMs = Date.now() - killedAt;
    assert.ok(
      (fig.takeoverMs as number) <= 20_000,
      `takeover took ${fig.takeoverMs} ms (limit 20 s)`,
    );
    const killed = leader;
    leader = standby;
    const restart = Date.now();
    await stack.restartOperator(killed);
    fig.restartMs = Date.now() - restart;
    assert.equal(await holder(stack), leader, "the restarted replica waits as the standby");
  });

  await scenario("SIGTERM of the leader: the standby takes over within 3 s", async (fig) => {
    const standby = 1 - leader;
    const termAt = Date.now();
    const status = await stack.killOperator(leader, "SIGTERM");
    fig.exitCode = status.code;
    assert.equal(status.code, 0, "a SIGTERM'd leader exits 0 after releasing the Lease");
    const gap = await createSet(stack, NS, "gap-term");
    const tookOver = await waitHolder(stack, standby, 20_000);
    fig.takeoverMs = tookOver - termAt;
    await waitSet(stack, gap, "Running under the new leader", running);
    fig.gapSetRunningMs = Date.now() - termAt;
    assert.ok(
      (fig.takeoverMs as number) <= 3_000,
      `takeover took ${fig.takeoverMs} ms (limit 3 s)`,
    );
    const stopped = leader;
    leader = standby;
    await stack.restartOperator(stopped);
  });

  await scenario("SIGKILL of the standby changes nothing", async (fig) => {
    const standby = 1 - leader;
    const { restartMs } = await killAndRestart(stack, standby);
    fig.restartMs = restartMs;
    assert.equal(await holder(stack), leader);
    await waitSet(stack, await createSet(stack, NS, "after"), "Running", running);
  });
});
