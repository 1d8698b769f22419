/**
 * Two operator processes with `--shards=auto` (SHARDS=auto) on one real control plane and the
 * simulator: each holds a member Lease, the two split the namespace hash space, and every
 * CocoonSet is reconciled by the replica whose range holds its namespace's hash (audited on the
 * operators' own structured logs: the lines the CocoonSet pass writes carry namespace and set).
 * Then one replica is SIGKILLed: once its Lease expires in the survivor's view, the survivor takes
 * over its namespaces, and scaling those sets up converges with no pod created twice and no VM
 * running twice (the fault suite's watch). The killed replica comes back and gets its half again.
 *
 * Client-side filtering only (the caches are cluster-wide, no shardSelector is sent), on 1.35 and on
 * 1.36 with ShardedListAndWatch on (SHARDING_SKIP_1_36=1 skips that run).
 */
import assert from "node:assert/strict";
import type { CocoonSet } from "../../common/apis/v1/cocoonset_types.ts";
import { Events, Leases } from "../../kube/core.ts";
import { fnv1a64 } from "../../kube/sharding/hash.ts";
import { HELD_ANNOTATION, MEMBER_GROUP_LABEL } from "../../kube/sharding/membership.ts";
import { HASH_SPACE_END } from "../../kube/sharding/range.ts";
import { OPERATOR_NAMESPACE, type Stack } from "../harness/stack.ts";
import { createSet, inPhase, patchSpec, waitSet } from "../harness/stack_objects.ts";
import { waitUntil } from "../harness/wait.ts";
import { faultSuite, operatorLog, sigkillOperator, watchSystem } from "../faults/_support.ts";

/** Picked so that five hash into each half (asserted below). */
const NAMESPACES = [
  "alpha",
  "bravo",
  "charlie",
  "delta",
  "echo",
  "foxtrot",
  "hotel",
  "india",
  "juliet",
  "mike",
].map((n) => `shard-${n}`);
/** Identities are `cocoon-operator-<i>_<uuid>`: sorted, replica 0 gets the lower half. */
const HALF = HASH_SPACE_END / 2n;
const ownerOf = (ns: string) => (fnv1a64(ns) < HALF ? 0 : 1);
/** Lease 15 s + margin 5 s in the survivor's view, then a claim and an activation round. */
const TAKEOVER_MS = 90_000;

/** Namespaces whose CocoonSet pass logged anything on replica i since `since`. */
function namespacesWrittenBy(stack: Stack, i: number, since = 0): Set<string> {
  const out = new Set<string>();
  for (const line of operatorLog(stack, i, since)) {
    const ns = line.properties.namespace;
    if (typeof ns === "string" && ns.startsWith("shard-") && "cocoonset" in line.properties) {
      out.add(ns);
    }
  }
  return out;
}

async function memberLeases(stack: Stack) {
  const list = await stack.admin.list(Leases, {
    namespace: OPERATOR_NAMESPACE,
    labelSelector: { [MEMBER_GROUP_LABEL]: "cocoon-operator" },
  });
  return list.items;
}

const converged = (agents: number) => (cs: CocoonSet) =>
  inPhase("Running")(cs) && cs.status?.readyAgents === agents;

for (const minor of ["1.35", "1.36"] as const) {
  if (minor === "1.36" && Deno.env.get("SHARDING_SKIP_1_36") === "1") continue;
  shardingSuite(minor);
}

function shardingSuite(minor: "1.35" | "1.36"): void {
  faultSuite(`${minor}: two sharded replicas split the namespaces and take over a killed one's`, {
    operators: 2,
    leaderElect: false,
    operatorEnv: { SHARDS: "auto" },
    // The member-Lease Role of the sharded install, as config/overlays/sharded adds it.
    extraRbac: ["config/overlays/sharded/members"],
    // 1.36 with the gate on: the caches' lists and watches carry shardSelector and the server
    // filters them; on 1.35 the same selector is ignored and the caches filter on the client.
    controlPlane: {
      kubernetesMinor: minor,
      apiServerFlags: minor === "1.36" ? ["--feature-gates=ShardedListAndWatch=true"] : [],
    },
    nodes: [
      { name: "vk-a", pool: "default", seats: 16 },
      { name: "vk-b", pool: "default", seats: 16 },
    ],
  }, async (stack, scenario) => {
    assert.ok(
      NAMESPACES.some((ns) => ownerOf(ns) === 0) && NAMESPACES.some((ns) => ownerOf(ns) === 1),
      "the namespaces fall on both halves",
    );
    const watch = await watchSystem(stack);
    const sets = new Map<string, CocoonSet>();
    try {
      await scenario("each replica holds one half in its member Lease", async (fig) => {
        const leases = await waitUntil(async () => {
          const items = await memberLeases(stack);
          const held = items.map((l) => l.metadata.annotations?.[HELD_ANNOTATION] ?? "");
          return items.length === 2 && held.every((h) => h !== "" && !h.includes(",")) &&
              new Set(held).size === 2
            ? items
            : undefined;
        }, { what: "two member Leases with one range each", timeoutMs: 30_000 });
        fig.members = leases.map((l) => l.spec?.holderIdentity);
        // Each member says so with an Event on its own Lease.
        await waitUntil(async () => {
          const events = (await stack.admin.list(Events, { namespace: OPERATOR_NAMESPACE })).items;
          const on = new Set(
            events.filter((e) => e.reason === "ShardAcquired" && e.involvedObject.kind === "Lease")
              .map((e) => e.involvedObject.name),
          );
          return leases.every((l) => on.has(l.metadata.name ?? "")) ? true : undefined;
        }, { what: "a ShardAcquired Event on each member Lease", timeoutMs: 20_000 });
      });

      await scenario(
        "10 sets over 10 namespaces converge, each written only by its namespace's owner",
        async (fig) => {
          for (const ns of NAMESPACES) {
            sets.set(ns, await createSet(stack, ns, "demo", { agent: { replicas: 1 } }));
          }
          for (const cs of sets.values()) {
            await waitSet(stack, cs, "Running, 2 agents", converged(2));
          }
          const written = [namespacesWrittenBy(stack, 0), namespacesWrittenBy(stack, 1)];
          fig.writtenBy = written.map((s) => [...s].sort());
          for (const ns of NAMESPACES) {
            const writers = [0, 1].filter((i) => written[i].has(ns));
            assert.deepEqual(writers, [ownerOf(ns)], `${ns} written by replicas ${writers}`);
          }
          // Each replica held only its half. On 1.35 its caches dropped the other half's objects
          // themselves. On 1.36.3 with the gate the server applies the selector to built-in
          // kinds (pods) but ignores it for custom resources (CocoonSets): those the client
          // filters on either server.
          for (const i of [0, 1]) {
            assert.ok(
              await stack.metric("cocoon_operator_shard_filtered_objects_total", {
                resource: "cocoonsets.cocoonset.cocoonstack.io",
              }, i) > 0,
              `replica ${i} filtered the other half's CocoonSets`,
            );
            assert.equal(
              await stack.metric("cocoon_operator_shard_server_filtered", { resource: "pods" }, i),
              minor === "1.36" ? 1 : 0,
              `replica ${i}: whether the server filtered its pod list`,
            );
            assert.equal(await stack.metric("cocoon_operator_shard_owned_fraction", {}, i), 0.5);
          }
        },
      );

      await scenario(
        "SIGKILL replica 0: replica 1 takes its namespaces over, scale-ups converge, no duplicate",
        async (fig) => {
          const moved = NAMESPACES.filter((ns) => ownerOf(ns) === 0);
          const killedAt = await sigkillOperator(stack, 0);
          // New work for the dead replica's namespaces, right away: only a new owner can do it.
          for (const ns of moved) {
            sets.set(ns, await patchSpec(stack, sets.get(ns)!, { agent: { replicas: 2 } }));
          }
          for (const ns of moved) {
            await waitSet(stack, sets.get(ns)!, "Running, 3 agents", converged(3), TAKEOVER_MS);
          }
          fig.takeoverMs = Date.now() - killedAt;
          const after = namespacesWrittenBy(stack, 1, killedAt);
          for (const ns of moved) assert.ok(after.has(ns), `replica 1 wrote ${ns} after the kill`);
          assert.equal(await stack.metric("cocoon_operator_shard_owned_fraction", {}, 1), 1);
          // The untouched half was not disturbed.
          for (const ns of NAMESPACES.filter((n) => ownerOf(n) === 1)) {
            await waitSet(stack, sets.get(ns)!, "still Running, 2 agents", converged(2));
          }
          await watch.judge(fig);
        },
      );

      await scenario("the killed replica comes back and gets its half again", async () => {
        await stack.restartOperator(0);
        await waitUntil(
          async () =>
            (await stack.metric("cocoon_operator_shard_owned_fraction", {}, 0)) === 0.5 &&
              (await stack.metric("cocoon_operator_shard_owned_fraction", {}, 1)) === 0.5
              ? true
              : undefined,
          { what: "both replicas own half again", timeoutMs: 60_000 },
        );
      });
    } finally {
      await watch.stop();
    }
  });
}
