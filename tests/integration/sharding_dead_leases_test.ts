/**
 * Dead members' Leases on the real control plane (1.35 and 1.36), members in-process on real
 * Leases:
 * - a member whose loop stops without leaving (as after SIGKILL) has its Lease deleted by the
 *   surviving member that sorts first, once the Lease was unrenewed for the lease duration, the
 *   safety margin and the retention (the delete carries the resourceVersion it listed);
 * - a member restarted in the same pod (same POD_NAME, new identity) ignores and deletes its
 *   predecessor's Lease at once, and holds the whole space while that Lease would still be
 *   unexpired by its renewTime + leaseDurationSeconds.
 */
import assert from "node:assert/strict";
import { ApiClient } from "../../kube/api_client.ts";
import { Leases, Namespaces } from "../../kube/core.ts";
import {
  type DeadReason,
  formatRangeSet,
  FULL_RANGE,
  HELD_ANNOTATION,
  memberLeaseName,
  type RangeSet,
  ShardMember,
  type ShardTiming,
  splitRanges,
} from "../../kube/sharding/mod.ts";
import { intersect, sameSet, subtract, union } from "../../kube/sharding/range.ts";
import { loadRestConfig, Transport } from "../../kube/transport.ts";
import { startControlPlane } from "../harness/control_plane.ts";
import { waitUntil } from "../harness/wait.ts";

/** Short durations, the defaults' relations; a short retention so the test takes seconds. */
const TIMING: ShardTiming = {
  leaseDurationMs: 5000,
  renewDeadlineMs: 3000,
  retryPeriodMs: 1000,
  expiryMarginMs: 1000,
  drainTimeoutMs: 5000,
  deadLeaseRetentionMs: 2000,
};
/** For the restart: a long lease, so "still unexpired" leaves a wide window. */
const RESTART_TIMING: ShardTiming = {
  leaseDurationMs: 60_000,
  renewDeadlineMs: 10_000,
  retryPeriodMs: 1000,
  expiryMarginMs: 1000,
  drainTimeoutMs: 5000,
};

interface Running {
  member: ShardMember;
  stop: AbortController;
  done: Promise<void>;
}

/** Members in one namespace, each start checked against what the others act on. */
function memberSet(client: ApiClient, namespace: string, timing: ShardTiming) {
  const acting = new Map<string, RangeSet>();
  /** Killed members count as acting until this time (what they held, for the check). */
  const actsUntil = new Map<string, number>();
  const violations: string[] = [];
  const deletions: string[] = [];
  const running = new Map<string, Running>();
  const start = (identity: string, podName?: string) => {
    const stop = new AbortController();
    const member = new ShardMember({
      client,
      namespace,
      identity,
      podName,
      timing,
      leaveOnStop: false,
      onStart(ranges) {
        for (const [other, held] of acting) {
          if (other === identity || Date.now() >= (actsUntil.get(other) ?? Infinity)) continue;
          if (intersect(held, ranges).length > 0) {
            violations.push(`${identity} started ${formatRangeSet(ranges)} held by ${other}`);
          }
        }
        acting.set(identity, union(acting.get(identity) ?? [], ranges));
      },
      onStop() {},
      onRelease(ranges) {
        acting.set(identity, subtract(acting.get(identity) ?? [], ranges));
      },
      onAbandon(ranges) {
        acting.set(identity, subtract(acting.get(identity) ?? [], ranges));
      },
      onDeadLeaseDeleted: (dead: string, reason: DeadReason) =>
        deletions.push(`${identity} deleted ${dead} (${reason})`),
    });
    const r = { member, stop, done: member.run(stop.signal) };
    running.set(identity, r);
    return r;
  };
  /**
   * Stops a member's loop without leaving: its Lease stays as after SIGKILL. For the check it
   * acts on what it held until its Lease could have expired, or, with `goneNow` (its pod's
   * container restarted: the process is gone), not at all.
   */
  const kill = async (identity: string, goneNow = false) => {
    const r = running.get(identity)!;
    r.stop.abort();
    await r.done;
    const last = r.member.state.lastRenewalAt ?? Date.now();
    actsUntil.set(identity, goneNow ? Date.now() : last + timing.leaseDurationMs);
    running.delete(identity);
    return r;
  };
  const converged = (ids: string[]) => () => {
    const split = splitRanges(ids);
    const all = union([], ids.flatMap((id) => [...(acting.get(id) ?? [])]));
    return sameSet(all, [FULL_RANGE]) &&
      ids.every((id) =>
        sameSet(acting.get(id) ?? [], [split.get(id)!]) &&
        sameSet(running.get(id)!.member.state.active, [split.get(id)!])
      );
  };
  const stopAll = async () => {
    for (const r of running.values()) r.stop.abort();
    await Promise.allSettled([...running.values()].map((r) => r.done));
  };
  return { start, kill, converged, stopAll, violations, deletions };
}

for (const minor of ["1.35", "1.36"] as const) {
  Deno.test({
    name:
      `${minor}: dead members' Leases are deleted: a killed one's after the retention, a restarted pod's predecessor's at once`,
    ignore: minor === "1.36" && Deno.env.get("SHARDING_SKIP_1_36") === "1",
    sanitizeResources: false,
    sanitizeOps: false,
    async fn(t) {
      const cp = await startControlPlane({
        crdDir: "",
        kubernetesMinor: minor,
        apiServerFlags: minor === "1.36" ? ["--feature-gates=ShardedListAndWatch=true"] : [],
      });
      const transport = new Transport(await loadRestConfig(cp.kubeconfigPath));
      const client = new ApiClient(transport);
      try {
        await t.step("a killed member's Lease is deleted by the first survivor", async () => {
          const ns = "shard-dead";
          await client.create(Namespaces, { metadata: { name: ns } });
          const set = memberSet(client, ns, TIMING);
          try {
            for (const id of ["member-a", "member-b", "member-c"]) set.start(id);
            await waitUntil(set.converged(["member-a", "member-b", "member-c"]), {
              timeoutMs: 60_000,
              what: "three members holding a third each",
            });
            const c = await set.kill("member-c");
            const lastRenewal = c.member.state.lastRenewalAt!;
            const name = c.member.leaseName;
            const goneAt = await waitUntil(async () => {
              const names = (await client.list(Leases, { namespace: ns })).items.map((l) =>
                l.metadata.name
              );
              return names.includes(name) ? undefined : Date.now();
            }, { timeoutMs: 60_000, intervalMs: 100, what: "member-c's Lease deleted" });
            // Never while it could block: not before its expiry, margin and retention passed in
            // the survivors' view, which started no earlier than its last renewal.
            const keptFor = TIMING.leaseDurationMs + TIMING.expiryMarginMs +
              TIMING.deadLeaseRetentionMs!;
            assert.ok(
              goneAt >= lastRenewal + keptFor,
              `deleted ${goneAt - lastRenewal} ms after its last renewal`,
            );
            assert.deepEqual(set.deletions, ["member-a deleted member-c (expired)"]);
            await waitUntil(set.converged(["member-a", "member-b"]), {
              timeoutMs: 60_000,
              what: "two members holding half each",
            });
            const left = (await client.list(Leases, { namespace: ns })).items;
            assert.deepEqual(left.map((l) => l.spec?.holderIdentity).sort(), [
              "member-a",
              "member-b",
            ]);
            assert.deepEqual(set.violations, []);
          } finally {
            await set.stopAll();
          }
        });

        await t.step(
          "a restarted process of the same pod takes the whole space without waiting for its predecessor's Lease",
          async () => {
            const ns = "shard-restart";
            await client.create(Namespaces, { metadata: { name: ns } });
            const set = memberSet(client, ns, RESTART_TIMING);
            try {
              const pod = "operator-7d9f-x2k4q";
              const first = `${pod}_11111111-1111-4111-8111-111111111111`;
              set.start(first, pod);
              await waitUntil(set.converged([first]), {
                timeoutMs: 60_000,
                what: "the first process holding the whole space",
              });
              await set.kill(first, true);
              const old = await client.get(Leases, ns, memberLeaseName(first));
              const wouldExpireAt = Date.parse(old.spec!.renewTime!) +
                old.spec!.leaseDurationSeconds! * 1000;
              const second = `${pod}_22222222-2222-4222-8222-222222222222`;
              set.start(second, pod);
              await waitUntil(async () => {
                const items = (await client.list(Leases, { namespace: ns })).items;
                const ids = items.map((l) => l.spec?.holderIdentity);
                const mine = items.find((l) => l.spec?.holderIdentity === second);
                return !ids.includes(first) &&
                  mine?.metadata.annotations?.[HELD_ANNOTATION] === formatRangeSet([FULL_RANGE]) &&
                  set.converged([second])();
              }, {
                timeoutMs: 60_000,
                what: "the predecessor's Lease gone and the new process holding the whole space",
              });
              assert.ok(
                Date.now() < wouldExpireAt,
                "the predecessor's Lease would still be unexpired by its renewTime + duration",
              );
              assert.deepEqual(set.deletions, [`${second} deleted ${first} (predecessor)`]);
              assert.deepEqual(set.violations, []);
            } finally {
              await set.stopAll();
            }
          },
        );
      } finally {
        transport.close();
        await cp.stop();
      }
    },
  });
}
