/**
 * Sharded replicas (SHARDS=auto) on the real control plane with the simulator.
 *
 * 300 CocoonSets over 60 namespaces converge on 3 replicas; one replica is SIGKILLed while sets
 * are still being created and scaled and 20 of them are suspending (retain: their `:hibernate`
 * snapshots are held across the hand-overs, and resumed later): its namespaces move and converge
 * with no pod created twice, no VM running twice and no needed tag deleted (the fault suite's
 * watch); then a 4th replica joins and one leaves cleanly (SIGTERM), each while scale-ups are
 * being issued, and at last all four run: after each change the ranges rebalance to disjoint
 * equal shares covering the space. Throughout, the writer audit (tests/e2e/_sharding_support.ts) checks on the replicas' logs
 * that no two processes ever acted on one namespace at once and every write came from the
 * namespace's owner of that moment.
 *
 * Runs on 1.35 (the server ignores shardSelector: client-side filtering) and on 1.36 with
 * ShardedListAndWatch on (the server filters the Pod lists, each replica's
 * `cocoon_operator_shard_server_filtered{resource="pods"}` says so; 1.36.3 ignores the selector on
 * custom resources, so CocoonSets are filtered on the client there too). SHARDING_SKIP_1_36=1
 * skips the 1.36 run;
 * SHARDING_E2E_SETS / SHARDING_E2E_NAMESPACES scale it (default 300 / 60).
 */
import assert from "node:assert/strict";
import type { CocoonSet } from "../../common/apis/v1/cocoonset_types.ts";
import { Leases } from "../../kube/core.ts";
import { fnv1a64 } from "../../kube/sharding/hash.ts";
import { HELD_ANNOTATION, MEMBER_GROUP_LABEL } from "../../kube/sharding/membership.ts";
import {
  HASH_SPACE_END,
  overlaps,
  parseRangeSet,
  type RangeSet,
  size,
} from "../../kube/sharding/range.ts";
import { OPERATOR_NAMESPACE, type Stack } from "../harness/stack.ts";
import { createSet, patchSpec } from "../harness/stack_objects.ts";
import { waitUntil } from "../harness/wait.ts";
import {
  faultSuite,
  type LogLine,
  operatorLog,
  sigkillOperator,
  type SystemWatch,
  watchSystem,
} from "../faults/_support.ts";
import { auditWriters, identityOf, type ProcessLog } from "./_sharding_support.ts";

const SETS = Number(Deno.env.get("SHARDING_E2E_SETS") ?? 300);
const NAMESPACE_COUNT = Number(Deno.env.get("SHARDING_E2E_NAMESPACES") ?? 60);
/**
 * The varying part leads: FNV-1a mixes a byte into the top bits only through the bytes after it,
 * so names that differ only at the end (`shard-e2e-00`…`-59`) all hash into one quarter of the
 * space and would leave every other replica idle. These spread over every share used below
 * (checked by the first test of this file).
 */
const NAMESPACES = Array.from(
  { length: NAMESPACE_COUNT },
  (_, i) => `${String(i).padStart(2, "0")}-sharding-e2e`,
);
/** Which of n equal shares (splitRanges order) a namespace hashes into. */
const shareOf = (ns: string, n: number) => {
  const width = HASH_SPACE_END / BigInt(n);
  return Math.min(n - 1, Number(fnv1a64(ns) / width));
};
const SETS_PER_NAMESPACE = Math.ceil(SETS / NAMESPACE_COUNT);
/** Generous: 300 sets on a shared 2-core machine, plus a take-over. */
const CONVERGE_MS = 600_000;
/** Lease 15 s + margin 5 s in each survivor's view, claim and activation rounds, a drain. */
const REBALANCE_MS = 180_000;

/** Spacing of the scale-ups issued during a membership change (60 of them: about 20 s). */
const PACE_MS = 300;

/** Four processes are started; replica 3 leaves at once and is the "4th replica" later. */
const REPLICAS = 4;

Deno.test("sharding e2e namespaces fall into every share of 2, 3 and 4 members", () => {
  for (const n of [2, 3, 4]) {
    const counts = new Array(n).fill(0);
    for (const ns of NAMESPACES) counts[shareOf(ns, n)]++;
    assert.ok(counts.every((c) => c >= 5), `${n} members: namespaces per share ${counts}`);
  }
});

for (const minor of ["1.35", "1.36"] as const) {
  if (minor === "1.36" && Deno.env.get("SHARDING_SKIP_1_36") === "1") continue;
  shardingE2e(minor);
}

function shardingE2e(minor: "1.35" | "1.36"): void {
  faultSuite(`${minor}: ${SETS} sets over ${NAMESPACE_COUNT} namespaces on sharded replicas`, {
    operators: REPLICAS,
    leaderElect: false,
    operatorEnv: { SHARDS: "auto" },
    extraRbac: ["config/overlays/sharded/members"],
    controlPlane: {
      kubernetesMinor: minor,
      apiServerFlags: minor === "1.36" ? ["--feature-gates=ShardedListAndWatch=true"] : [],
    },
    nodes: [
      { name: "vk-a", pool: "default", seats: 200 },
      { name: "vk-b", pool: "default", seats: 200 },
      { name: "vk-c", pool: "default", seats: 200 },
    ],
  }, async (stack, scenario) => {
    /** Logs of processes already replaced, plus when each ended if it was killed. */
    const past: ProcessLog[] = [];
    const generation = new Array(REPLICAS).fill(0);
    const killedAt = new Map<number, number>();
    /** Replicas whose current (stopped) process is already in `past`. */
    const retired = new Set<number>();
    const current = (i: number): ProcessLog => ({
      name: `replica ${i} #${generation[i]}`,
      lines: operatorLog(stack, i),
      endedAt: killedAt.get(i) ?? Infinity,
    });
    const retire = (i: number) => {
      if (retired.has(i)) return;
      past.push(current(i));
      retired.add(i);
    };
    const restart = async (i: number) => {
      retire(i);
      await stack.restartOperator(i);
      generation[i]++;
      killedAt.delete(i);
      retired.delete(i);
    };
    const allLogs = (): ProcessLog[] => [
      ...past,
      ...stack.operators.map((_, i) => i).filter((i) => !retired.has(i)).map(current),
    ];
    const live = () => stack.operators.map((_, i) => i).filter((i) => stack.alive(i));
    /** Sets by name `ns/name`, the phase each should reach and with how many agents. */
    const want = new Map<string, Want>();
    const create = async (ns: string, k: number) => {
      const cs = await createSet(stack, ns, `s${k}`, { agent: { replicas: 0 } });
      want.set(`${ns}/s${k}`, { cs, phase: "Running", agents: 1 });
    };
    /** Scales a set's sub-agents, resuming it if it was suspended. */
    const scale = async (key: string, subAgents: number) => {
      const w = want.get(key)!;
      const resume = w.phase === "Suspended" ? { suspend: false } : {};
      await patchSpec(stack, w.cs, { agent: { replicas: subAgents }, ...resume });
      Object.assign(w, { phase: "Running", agents: 1 + subAgents });
    };

    /**
     * Scales set `s<k>` of every namespace up while `change` (a membership change and the wait
     * for its rebalance) runs, one patch per PACE_MS, so that writes are due before, during and
     * after the hand-overs. The pause only spreads the writes over time; nothing waits on it.
     */
    const scaleDuring = async <T>(k: number, change: () => Promise<T>): Promise<T> => {
      const patches = (async () => {
        for (const ns of NAMESPACES) {
          await scale(`${ns}/s${k}`, 1);
          await new Promise((r) => setTimeout(r, PACE_MS));
        }
      })();
      try {
        return await change();
      } finally {
        await patches;
      }
    };

    const watch = await watchSystem(stack);
    try {
      await scenario(
        "replica 3 leaves at once; 3 members split the space in thirds",
        async (fig) => {
          await stack.killOperator(3, "SIGTERM");
          retire(3);
          fig.ranges = await waitRebalanced(stack, [0, 1, 2]);
          assertServerFiltering(minor, await serverFiltered(stack, [0, 1, 2]));
        },
      );

      await scenario(
        "sets are created and scaled; SIGKILL replica 0 mid-way; all converge, no duplicate",
        async (fig) => {
          const order: [string, number][] = [];
          for (let k = 0; k < SETS_PER_NAMESPACE; k++) {
            for (const ns of NAMESPACES) if (order.length < SETS) order.push([ns, k]);
          }
          const half = Math.floor(order.length / 2);
          for (const [ns, k] of order.slice(0, half)) await create(ns, k);
          // Suspend (retain) s1 of every third namespace once it runs, so `:hibernate` snapshots
          // are held across the hand-overs (resumed in the next scenario: restored, then dropped).
          const suspended = NAMESPACES.filter((_, i) => i % 3 === 0).map((ns) => `${ns}/s1`);
          await waitConverged(stack, watch, new Map(suspended.map((key) => [key, want.get(key)!])));
          for (const key of suspended) {
            const w = want.get(key)!;
            await patchSpec(stack, w.cs, { suspend: true });
            w.phase = "Suspended";
          }
          // Mid scale-up: half the sets exist and are being reconciled, some suspending.
          killedAt.set(0, await sigkillOperator(stack, 0));
          for (const [ns, k] of order.slice(half)) await create(ns, k);
          // Scale the first set of every namespace up, the dead replica's namespaces included.
          for (const ns of NAMESPACES) await scale(`${ns}/s0`, 1);
          fig.convergedMs = await waitConverged(stack, watch, want);
          fig.ranges = await waitRebalanced(stack, [1, 2]);
          // Replica 0 owned the first third: each of those namespaces was written after the
          // kill, by a survivor (its s0 was scaled up).
          const moved = NAMESPACES.filter((ns) => shareOf(ns, 3) === 0);
          const after = new Set(
            [1, 2].flatMap((i) => operatorLog(stack, i, killedAt.get(0)!))
              .filter((l) => "cocoonset" in l.properties).map((l) => l.properties.namespace),
          );
          fig.movedNamespaces = moved.length;
          assert.deepEqual(
            moved.filter((ns) => !after.has(ns)),
            [],
            "moved, written by a survivor",
          );
          await watch.judge(fig);
          Object.assign(fig, auditWriters(allLogs(), NAMESPACES));
        },
      );

      await scenario("a 4th replica joins mid-flow: thirds again, work goes on", async (fig) => {
        fig.ranges = await scaleDuring(1, async () => {
          await restart(3);
          return await waitRebalanced(stack, [1, 2, 3]);
        });
        fig.convergedMs = await waitConverged(stack, watch, want);
        assertServerFiltering(minor, await serverFiltered(stack, [3]));
        await watch.judge(fig);
        Object.assign(fig, auditWriters(allLogs(), NAMESPACES));
      });

      await scenario(
        "replica 1 leaves cleanly (SIGTERM) mid-flow: halves, no overlap",
        async (fig) => {
          fig.ranges = await scaleDuring(2, async () => {
            const status = await stack.killOperator(1, "SIGTERM");
            assert.equal(status.success, true, "replica 1 exits cleanly on SIGTERM");
            retire(1);
            return await waitRebalanced(stack, [2, 3]);
          });
          fig.convergedMs = await waitConverged(stack, watch, want);
          await watch.judge(fig);
          Object.assign(fig, auditWriters(allLogs(), NAMESPACES));
        },
      );

      await scenario("replicas 0 and 1 come back: quarters", async (fig) => {
        await restart(0);
        await restart(1);
        fig.ranges = await waitRebalanced(stack, [0, 1, 2, 3]);
        assert.deepEqual(live(), [0, 1, 2, 3]);
        fig.convergedMs = await waitConverged(stack, watch, want);
        await watch.judge(fig);
        Object.assign(fig, auditWriters(allLogs(), NAMESPACES));
      });
    } finally {
      await watch.stop();
    }
  });
}

/** What a set should reach. */
interface Want {
  cs: CocoonSet;
  phase: "Running" | "Suspended";
  /** Ready agents when Running. */
  agents: number;
}

/**
 * Polls the test's own watch until every set reached its phase for its current generation
 * (Running: with its agents ready); returns the ms taken.
 */
async function waitConverged(
  stack: Stack,
  watch: SystemWatch,
  want: ReadonlyMap<string, Want>,
): Promise<number> {
  const started = Date.now();
  let behind: string[] = [];
  await waitUntil(() => {
    behind = [];
    for (const [key, w] of want) {
      const cs = watch.sets.current.get(key);
      const ok = cs?.status?.phase === w.phase &&
        (w.phase !== "Running" || cs.status.readyAgents === w.agents) &&
        cs.status.observedGeneration === cs.metadata.generation;
      if (!ok) behind.push(key);
    }
    return behind.length === 0 ? true : undefined;
  }, {
    what: `all ${want.size} sets in their phase`,
    timeoutMs: CONVERGE_MS,
    intervalMs: 1_000,
  }).catch((err) => {
    throw new Error(`${err} (${behind.length} behind, e.g. ${behind.slice(0, 5)})`, {
      cause: err,
    });
  });
  void stack;
  return Date.now() - started;
}

/**
 * Waits until exactly the replicas `members` hold member Leases whose held ranges are disjoint,
 * cover the space and are equal shares, and each replica's gauges agree (members, owned
 * fraction, range bounds disjoint). Returns each replica's held text.
 */
async function waitRebalanced(stack: Stack, members: readonly number[]): Promise<string[]> {
  const n = members.length;
  let last = "";
  return await waitUntil(async () => {
    const identities = members.map((i) => identityOf(operatorLog(stack, i)));
    if (identities.some((id) => id === "")) return (last = "identities not logged yet"), undefined;
    const leases = (await stack.admin.list(Leases, {
      namespace: OPERATOR_NAMESPACE,
      labelSelector: { [MEMBER_GROUP_LABEL]: "cocoon-operator" },
    })).items;
    const held: RangeSet[] = [];
    const texts: string[] = [];
    for (const id of identities) {
      const lease = leases.find((l) => l.spec?.holderIdentity === id);
      const text = lease?.metadata.annotations?.[HELD_ANNOTATION];
      if (text === undefined) return (last = `no held annotation for ${id}`), undefined;
      texts.push(text);
      held.push(parseRangeSet(text));
    }
    // Leases of live members other than these (a killed one's stays until it expires; it must not
    // announce anything another member also holds).
    for (let a = 0; a < n; a++) {
      for (let b = a + 1; b < n; b++) {
        if (overlaps(held[a], held[b])) return (last = `overlap ${texts}`), undefined;
      }
    }
    const sizes = held.map(size);
    if (sizes.reduce((x, y) => x + y, 0n) !== HASH_SPACE_END) {
      return (last = `held does not cover the space: ${texts}`), undefined;
    }
    const share = HASH_SPACE_END / BigInt(n);
    if (sizes.some((s) => s < share)) return (last = `unequal shares ${texts}`), undefined;
    const bounds: [number, number][] = [];
    for (const i of members) {
      const membersSeen = await stack.metric("cocoon_operator_shard_members", {}, i);
      const fraction = await stack.metric("cocoon_operator_shard_owned_fraction", {}, i);
      if (membersSeen !== n || Math.abs(fraction - 1 / n) > 1e-9) {
        return (last = `replica ${i}: members ${membersSeen}, fraction ${fraction}`), undefined;
      }
      bounds.push([
        await stack.metric("cocoon_operator_shard_range_start", {}, i),
        await stack.metric("cocoon_operator_shard_range_end", {}, i),
      ]);
    }
    bounds.sort((x, y) => x[0] - y[0]);
    for (let k = 1; k < bounds.length; k++) {
      assert.ok(bounds[k][0] >= bounds[k - 1][1], `range gauges overlap: ${bounds}`);
    }
    return texts;
  }, {
    what: `replicas ${members} splitting the space in ${n} disjoint shares`,
    timeoutMs: REBALANCE_MS,
    intervalMs: 1_000,
  }).catch((err) => {
    throw new Error(`${err} (last: ${last})`, { cause: err });
  });
}

/**
 * Each replica's `cocoon_operator_shard_server_filtered` for Pods (the bulk of what a replica
 * lists). The custom resources are not counted: kube-apiserver 1.36.3 answers their sharded lists
 * without shardInfo (apiextensions does not apply the selector), so they are filtered on the
 * client on both versions.
 */
async function serverFiltered(stack: Stack, replicas: readonly number[]): Promise<number[]> {
  const out: number[] = [];
  for (const i of replicas) {
    out.push(
      await stack.metric("cocoon_operator_shard_server_filtered", { resource: "pods" }, i),
    );
  }
  return out;
}

/** 1.36 with the gate: every replica's Pod lists carried shardInfo; 1.35: no list did. */
function assertServerFiltering(minor: "1.35" | "1.36", perReplica: readonly number[]): void {
  const want = perReplica.map(() => (minor === "1.36" ? 1 : 0));
  assert.deepEqual(perReplica, want, `Pod lists server-filtered on ${minor}: ${perReplica}`);
}
// The audit must be able to fail: fed logs with an overlap, a stray write or a second create,
// it says so (no control plane needed).
Deno.test("sharding e2e writer audit: refuses overlapping owners, stray writes, double creates", () => {
  const ns = "shard-e2e-00";
  const whole = "0x0000000000000000-0x10000000000000000";
  const handover = (at: number, reason: string): LogLine => ({
    at,
    level: "INFO",
    message: `shard hand-over ${reason}`,
    properties: { reason, identity: "x", ranges: whole },
  });
  const write = (at: number, pod: string): LogLine => ({
    at,
    level: "INFO",
    message: `created main agent ${ns}/${pod}`,
    properties: { namespace: ns, cocoonset: "s0", pod: `${ns}/${pod}` },
  });
  const a = (lines: LogLine[], endedAt = Infinity): ProcessLog => ({ name: "a", lines, endedAt });
  const b = (lines: LogLine[]): ProcessLog => ({ name: "b", lines, endedAt: Infinity });
  const aHands = [
    handover(1000, "ShardAcquired"),
    write(1500, "s0-0"),
    handover(2000, "ShardReleased"),
  ];
  // Clean: a hands over to b.
  const fig = auditWriters(
    [a(aHands), b([handover(2500, "ShardAcquired"), write(3000, "s1-0")])],
    [ns],
  );
  assert.deepEqual(fig, { passLines: 2, podCreates: 2, namespaceSpans: 2 });
  // b starts before a released.
  assert.throws(
    () => auditWriters([a(aHands), b([handover(1800, "ShardAcquired")])], [ns]),
    /b acted from .* while a still did/,
  );
  // A SIGKILLed process acts until its death: b starting before it overlaps.
  assert.throws(
    () => auditWriters([a(aHands.slice(0, 2), 1200), b([handover(1100, "ShardAcquired")])], [ns]),
    /still did/,
  );
  // a writes after its release.
  assert.throws(
    () => auditWriters([a([...aHands, write(2100, "s2-0")])], [ns]),
    /outside its spans/,
  );
  // The same pod created by both.
  assert.throws(
    () =>
      auditWriters([a(aHands), b([handover(2500, "ShardAcquired"), write(3000, "s0-0")])], [ns]),
    /created by a and again by b/,
  );
});
