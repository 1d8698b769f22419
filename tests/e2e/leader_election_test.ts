/**
 * Two operator replicas with leader election on the real system: exactly one leads (the Lease,
 * leader_election_master_status) and only it reconciles; a CocoonSet converges; SIGTERM on the
 * leader releases the Lease and the standby takes over before the lease could have expired; a
 * new CocoonSet converges under the new leader while the first one is left as it was; no pod is
 * ever created twice; the stopped replica comes back as a standby.
 */
import assert from "node:assert/strict";
import type { CocoonSet } from "../../common/apis/v1/cocoonset_types.ts";
import { LEADER_ELECTION_ID } from "../../config.ts";
import { type Lease, Leases, type Pod, Pods } from "../../kube/core.ts";
import type { Stack } from "../harness/stack.ts";
import { OPERATOR_NAMESPACE } from "../harness/stack.ts";
import { recordTimeline, type Timeline } from "../harness/timeline.ts";
import { waitUntil } from "../harness/wait.ts";
import { createSet, inPhase, livePodsOf, waitSet } from "../harness/stack_objects.ts";
import { e2eSuite } from "./_support.ts";

const MASTER = "leader_election_master_status";
const RECONCILES = "controller_runtime_reconcile_total";
/** The operator's lease duration: a takeover faster than this came from a released Lease. */
const LEASE_DURATION_MS = 15_000;

function lease(stack: Stack): Promise<Lease> {
  return stack.admin.get(Leases, OPERATOR_NAMESPACE, LEADER_ELECTION_ID);
}

/** The replica whose POD_NAME the Lease holder carries (identities are `<POD_NAME>_<uuid>`). */
function replicaOf(holder: string): number | undefined {
  const m = /^cocoon-operator-(\d+)_[0-9a-f-]{36}$/.exec(holder);
  return m ? Number(m[1]) : undefined;
}

/** Waits until replica i holds the Lease and is the only replica reporting itself leader. */
async function waitLeader(stack: Stack, timeoutMs: number): Promise<number> {
  return await waitUntil(async () => {
    const i = replicaOf((await lease(stack)).spec?.holderIdentity ?? "");
    if (i === undefined || !stack.alive(i)) return undefined;
    for (const [j] of stack.operators.entries()) {
      if (!stack.alive(j)) continue;
      const want = j === i ? 1 : 0;
      if (await stack.metric(MASTER, { name: LEADER_ELECTION_ID }, j) !== want) return undefined;
    }
    return i;
  }, { what: "exactly one leader", timeoutMs, intervalMs: 50 });
}

async function runningSet(stack: Stack, ns: string): Promise<CocoonSet> {
  const cs = await createSet(stack, ns, "demo", { agent: { replicas: 2 } });
  return await waitSet(
    stack,
    cs,
    "Running",
    (c) => inPhase("Running")(c) && c.status?.readyAgents === 3,
  );
}

/** Every pod name seen in the recording had exactly one uid: nothing was created twice. */
function assertNoDuplicates(pods: Timeline<Pod>, expected: string[]): void {
  const uids = new Map<string, Set<string>>();
  for (const s of pods.sightings) {
    const name = s.object.metadata.name ?? "";
    if (!uids.has(name)) uids.set(name, new Set());
    uids.get(name)!.add(s.object.metadata.uid ?? "");
  }
  assert.deepEqual([...uids.keys()].sort(), expected);
  for (const [name, set] of uids) {
    assert.equal(set.size, 1, `${name} was created ${set.size} times`);
  }
  assert.ok(!pods.sightings.some((s) => s.type === "DELETED"), "no pod was deleted");
}

e2eSuite("two replicas with leader election: one leads, the other takes over", {
  operators: 2,
}, async (stack, step) => {
  await stack.namespace("e2e-leader-a");
  await stack.namespace("e2e-leader-b");
  const podsA = await recordTimeline(stack.admin, Pods, "e2e-leader-a");
  const podsB = await recordTimeline(stack.admin, Pods, "e2e-leader-b");
  try {
    let leader = -1;
    await step("exactly one replica leads", async () => {
      leader = await waitLeader(stack, 30_000);
      assert.equal(
        await stack.metric(MASTER, { name: LEADER_ELECTION_ID }),
        1,
        "one leader in all",
      );
    });

    let first: CocoonSet | undefined;
    await step("a CocoonSet converges, reconciled by the leader only", async () => {
      first = await runningSet(stack, "e2e-leader-a");
      const standby = 1 - leader;
      assert.ok(await stack.metric(RECONCILES, { controller: "cocoonset" }, leader) > 0);
      assert.equal(
        await stack.metric(RECONCILES, { controller: "cocoonset" }, standby),
        0,
        "the standby reconciles nothing",
      );
    });

    await step("SIGTERM on the leader: the standby takes over at once", async () => {
      const old = leader;
      const before = (await lease(stack)).spec?.leaseTransitions ?? 0;
      const status = await stack.killOperator(old, "SIGTERM");
      assert.equal(status.code, 0, "a clean shutdown");
      // Well inside the lease duration: the Lease was released, not left to expire.
      leader = await waitLeader(stack, LEASE_DURATION_MS - 5_000);
      assert.equal(leader, 1 - old);
      const l = await lease(stack);
      assert.equal(l.spec?.leaseTransitions, before + 1);
      // The new leader says so on the Lease.
      await waitUntil(
        async () =>
          (await stack.events(l)).some((e) =>
            e.reason === "LeaderElection" &&
            (e.message ?? "").startsWith(`cocoon-operator-${leader}_`)
          ),
        { what: "the new leader's LeaderElection Event", timeoutMs: 10_000 },
      );
    });

    await step(
      "a new CocoonSet converges under the new leader; the first is untouched",
      async () => {
        const before = await livePodsOf(stack, first!);
        await runningSet(stack, "e2e-leader-b");
        const after = await livePodsOf(stack, first!);
        assert.deepEqual(
          [...after].map(([n, p]) => [n, p.metadata.uid]),
          [...before].map(([n, p]) => [n, p.metadata.uid]),
        );
        assert.ok(await stack.metric(RECONCILES, { controller: "cocoonset" }, leader) > 0);
      },
    );

    await step("no pod was ever created twice", () => {
      assertNoDuplicates(podsA, ["demo-0", "demo-1", "demo-2"]);
      assertNoDuplicates(podsB, ["demo-0", "demo-1", "demo-2"]);
      return Promise.resolve();
    });

    await step("the stopped replica comes back as a standby", async () => {
      const old = 1 - leader;
      await stack.restartOperator(old);
      assert.equal(await waitLeader(stack, 10_000), leader, "leadership stays");
      assert.equal(await stack.metric(MASTER, { name: LEADER_ELECTION_ID }, old), 0);
    });
  } finally {
    await podsA.stop();
    await podsB.stop();
  }
});
