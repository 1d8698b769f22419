/**
 * Shard membership on the real control plane: three members, in-process, on real Leases. Every
 * start is checked against what the others act on at that instant (a crashed member counts as
 * acting until its last renewal plus the lease duration), so an overlap fails the test where it
 * happens.
 */
import assert from "node:assert/strict";
import { ApiClient } from "../../kube/api_client.ts";
import { Leases, Namespaces } from "../../kube/core.ts";
import {
  formatRangeSet,
  FULL_RANGE,
  type RangeSet,
  ShardMember,
  type ShardTiming,
  splitRanges,
} from "../../kube/sharding/mod.ts";
import { intersect, sameSet, subtract, union } from "../../kube/sharding/range.ts";
import { loadRestConfig, Transport } from "../../kube/transport.ts";
import { startControlPlane } from "../harness/control_plane.ts";
import { waitUntil } from "../harness/wait.ts";

/**
 * Short durations so the test takes seconds; the same relations as the defaults. The retention
 * is long: the killed member's Lease must outlive the test (its deletion is
 * sharding_dead_leases_test.ts's).
 */
const TIMING: ShardTiming = {
  leaseDurationMs: 5000,
  renewDeadlineMs: 3000,
  retryPeriodMs: 1000,
  expiryMarginMs: 1000,
  drainTimeoutMs: 5000,
  deadLeaseRetentionMs: 300_000,
};
const NAMESPACE = "shard-members";

interface Running {
  member: ShardMember;
  stop: AbortController;
  done: Promise<void>;
  /** Set when the member was killed: it acts (for the check) until this time. */
  actsUntil?: number;
}

for (const minor of ["1.35", "1.36"] as const) {
  Deno.test({
    name: `${minor}: members split the space, a stopped member is dropped, a leaver hands over`,
    ignore: minor === "1.36" && Deno.env.get("SHARDING_SKIP_1_36") === "1",
    sanitizeResources: false,
    sanitizeOps: false,
    async fn() {
      const cp = await startControlPlane({
        crdDir: "",
        kubernetesMinor: minor,
        apiServerFlags: minor === "1.36" ? ["--feature-gates=ShardedListAndWatch=true"] : [],
      });
      const transport = new Transport(await loadRestConfig(cp.kubeconfigPath));
      const client = new ApiClient(transport);
      const acting = new Map<string, RangeSet>();
      const violations: string[] = [];
      const running = new Map<string, Running>();
      try {
        await client.create(Namespaces, { metadata: { name: NAMESPACE } });
        const start = (identity: string, leaveOnStop: boolean) => {
          const stop = new AbortController();
          const member = new ShardMember({
            client,
            namespace: NAMESPACE,
            identity,
            timing: TIMING,
            leaveOnStop,
            onStart(ranges) {
              for (const [other, held] of acting) {
                if (other === identity) continue;
                const r = running.get(other);
                if (r?.actsUntil !== undefined && Date.now() >= r.actsUntil) continue;
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
          });
          running.set(identity, { member, stop, done: member.run(stop.signal) });
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

        for (const id of ["member-a", "member-b", "member-c"]) start(id, id !== "member-c");
        await waitUntil(converged(["member-a", "member-b", "member-c"]), {
          timeoutMs: 60_000,
          what: "three members holding a third of the space each",
        });
        const leases = await client.list(Leases, { namespace: NAMESPACE });
        assert.equal(leases.items.length, 3);

        // member-c stops renewing (its loop ends, no leave: as after SIGKILL). It counts as acting
        // until its Lease could have expired; the others must not start its range before.
        const c = running.get("member-c")!;
        c.actsUntil = (c.member.state.lastRenewalAt ?? Date.now()) + TIMING.leaseDurationMs;
        c.stop.abort();
        await c.done;
        const killedAt = Date.now();
        await waitUntil(converged(["member-a", "member-b"]), {
          timeoutMs: 60_000,
          what: "two members holding half the space each after member-c stopped",
        });
        assert.ok(Date.now() - killedAt >= TIMING.leaseDurationMs - TIMING.renewDeadlineMs);
        acting.delete("member-c");

        // member-b leaves gracefully: it drains, announces nothing, deletes its Lease.
        const b = running.get("member-b")!;
        b.stop.abort();
        await b.done;
        assert.deepEqual(acting.get("member-b"), []);
        await waitUntil(converged(["member-a"]), {
          timeoutMs: 60_000,
          what: "member-a holding the whole space",
        });
        const names = (await client.list(Leases, { namespace: NAMESPACE })).items.map((l) =>
          l.metadata?.name
        );
        assert.ok(!names.includes(b.member.leaseName), "the leaver deleted its Lease");
        assert.ok(names.includes(c.member.leaseName), "the killed member's Lease stays");
        assert.deepEqual(violations, []);
      } finally {
        for (const r of running.values()) r.stop.abort();
        await Promise.allSettled([...running.values()].map((r) => r.done));
        transport.close();
        await cp.stop();
      }
    },
  });
}
