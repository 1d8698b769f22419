/**
 * Sharded replicas beside a single leader of another build, on the real API server: the shard
 * group holds the leader Lease (`cocoon-operator.cocoonset.cocoonstack.io`) as a fence
 * (kube/sharding/fence.ts).
 *
 * - A Lease written as the Go original's leader writes it (client-go's LeaseLock), renewed every
 *   2 s, keeps two sharded managers from reconciling anything while they stand by (ready); once
 *   the leader stops renewing (the Go original does not release on SIGTERM), the group takes the
 *   Lease after its 15 s and reconciles everything.
 * - While the group runs, a candidate with the Go original's election (controller-runtime's
 *   defaults: 15 s lease, 10 s renew deadline, 2 s retry; no release) never acquires, also
 *   across a member's graceful exit; once the last member is gone it does, and no member
 *   reconciled after that.
 */
import assert from "node:assert/strict";
import { ApiClient } from "../../kube/api_client.ts";
import { controllerManagedBy } from "../../kube/builder.ts";
import { ConfigMaps, type Lease, Leases, Namespaces } from "../../kube/core.ts";
import { LeaderElector } from "../../kube/leader.ts";
import type { Request } from "../../kube/reconcile.ts";
import { ShardedManager } from "../../kube/sharding/mod.ts";
import { rfc3339Micro } from "../../kube/time.ts";
import { loadRestConfig, Transport } from "../../kube/transport.ts";
import { startControlPlane } from "../harness/control_plane.ts";
import { waitUntil } from "../harness/wait.ts";

const OPERATOR_NS = "cocoon-system";
const LEASE = "cocoon-operator.cocoonset.cocoonstack.io";
const GO_LEADER = "cocoon-operator-7c9d8b6f5-2xk4p_5b0e9d7a-3c1f-4e8b-9a2d-6f4c3b2a1e0d";
const NAMESPACES = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot"].map((n) =>
  `fence-${n}`
);

interface Reconciled {
  identity: string;
  key: string;
  at: number;
}

Deno.test({
  name:
    "sharded replicas beside a Go-style leader: no reconcile while it holds the leader Lease, " +
    "and a Go-style candidate never acquires while the group runs",
  sanitizeResources: false,
  sanitizeOps: false,
  async fn(t) {
    const cp = await startControlPlane({ crdDir: "" });
    const transport = new Transport(await loadRestConfig(cp.kubeconfigPath));
    const client = new ApiClient(transport);
    const reconciled: Reconciled[] = [];
    const managers = new Map<
      string,
      { mgr: ShardedManager; stop: AbortController; run: Promise<unknown> }
    >();
    let goRenewing: ReturnType<typeof setInterval> | undefined;
    try {
      for (const ns of [OPERATOR_NS, ...NAMESPACES]) {
        await client.create(Namespaces, { metadata: { name: ns } });
      }
      for (const ns of NAMESPACES) {
        await client.create(ConfigMaps, { metadata: { name: "cm", namespace: ns } });
      }
      const start = (identity: string) => {
        const mgr = new ShardedManager({
          client,
          metricsBindAddress: "0",
          healthProbeBindAddress: "127.0.0.1:0",
          leaderElectionId: LEASE,
          leaderElectionNamespace: OPERATOR_NS,
          identity,
        });
        controllerManagedBy(mgr).for(ConfigMaps).build({
          reconcile: (req: Request) => {
            if (NAMESPACES.includes(req.namespace)) {
              reconciled.push({ identity, key: `${req.namespace}/${req.name}`, at: Date.now() });
            }
            return Promise.resolve({});
          },
        });
        const stop = new AbortController();
        managers.set(identity, { mgr, stop, run: mgr.start(stop.signal) });
      };
      const readyz = async (identity: string) => {
        const addr = managers.get(identity)?.mgr.servers.probeAddr;
        if (!addr) return 0;
        const res = await fetch(`http://127.0.0.1:${addr.port}/readyz`);
        await res.body?.cancel();
        return res.status;
      };
      const holder = async () =>
        (await client.get(Leases, OPERATOR_NS, LEASE)).spec?.holderIdentity;

      let lastGoRenewal = 0;
      await t.step(
        "a live Go leader: the shards stand by, ready, and reconcile nothing",
        async () => {
          const now = rfc3339Micro(Date.now());
          let lease: Lease = await client.create(Leases, {
            apiVersion: "coordination.k8s.io/v1",
            kind: "Lease",
            metadata: { name: LEASE, namespace: OPERATOR_NS },
            spec: {
              holderIdentity: GO_LEADER,
              leaseDurationSeconds: 15,
              acquireTime: now,
              renewTime: now,
              leaseTransitions: 2,
            },
          });
          lastGoRenewal = Date.now();
          goRenewing = setInterval(async () => {
            const sentAt = Date.now();
            lease = await client.update(Leases, {
              ...lease,
              spec: { ...lease.spec, renewTime: rfc3339Micro(sentAt) },
            });
            lastGoRenewal = sentAt;
          }, 2_000);
          start("shard-a_1");
          start("shard-b_1");
          for (const id of managers.keys()) {
            await waitUntil(async () => (await readyz(id)) === 200, {
              timeoutMs: 60_000,
              what: `${id} ready (standing by)`,
            });
          }
          for (const { mgr } of managers.values()) {
            assert.equal(mgr.scope.fenceStatus, "foreign");
            assert.ok(mgr.scope.active.length > 0, "ranges active, reconciles held back");
          }
          // Five more Go renewals with the shards' share active: still nothing reconciled.
          const until = lastGoRenewal + 10_000;
          await waitUntil(() => lastGoRenewal >= until, {
            timeoutMs: 30_000,
            what: "five renewals",
          });
          assert.deepEqual(reconciled, []);
          assert.equal(await holder(), GO_LEADER);
        },
      );

      await t.step(
        "the Go leader stops without releasing: the group takes the Lease after it expires",
        async () => {
          clearInterval(goRenewing);
          goRenewing = undefined;
          const stoppedAt = lastGoRenewal;
          await waitUntil(
            () => NAMESPACES.every((ns) => reconciled.some((r) => r.key === `${ns}/cm`)),
            { timeoutMs: 60_000, what: "every namespace reconciled by the group" },
          );
          const first = Math.min(...reconciled.map((r) => r.at));
          assert.ok(
            first >= stoppedAt + 15_000,
            `reconciled ${first - stoppedAt} ms after the Go leader's last renewal`,
          );
          assert.ok(managers.has((await holder()) ?? ""), "a member holds the Lease");
        },
      );

      await t.step(
        "a Go-style candidate never acquires while the group runs, and does once it is gone",
        async () => {
          let ledAt = 0;
          const goStop = new AbortController();
          const candidate = new LeaderElector({
            client,
            namespace: OPERATOR_NS,
            name: LEASE,
            identity: GO_LEADER,
            leaseDurationMs: 15_000,
            renewDeadlineMs: 10_000,
            retryPeriodMs: 2_000,
            releaseOnCancel: false,
            onStartedLeading: () => {
              ledAt = Date.now();
            },
            onStoppedLeading: () => {},
          });
          const election = candidate.run(goStop.signal);
          try {
            // Longer than a lease duration, with the holder leaving gracefully half way through.
            const holders = new Set<string>();
            const watchUntil = async (ms: number) => {
              const end = Date.now() + ms;
              while (Date.now() < end) {
                holders.add((await holder()) ?? "");
                await new Promise((r) => setTimeout(r, 500));
              }
            };
            await watchUntil(10_000);
            const first = (await holder())!;
            const leaver = managers.get(first)!;
            leaver.stop.abort();
            await leaver.run;
            managers.delete(first);
            await watchUntil(12_000);
            assert.equal(ledAt, 0, "the candidate acquired beside live members");
            assert.deepEqual([...holders].filter((h) => h !== first && !managers.has(h)), []);
            assert.ok(managers.has((await holder()) ?? ""), "the remaining member took it over");
            // The last member goes: the Lease is left to run out, then the candidate takes it.
            for (const { stop, run } of managers.values()) {
              stop.abort();
              await run;
            }
            const lastStopped = Date.now();
            managers.clear();
            await waitUntil(() => ledAt > 0, { timeoutMs: 60_000, what: "the candidate leads" });
            assert.equal(await holder(), GO_LEADER);
            assert.ok(
              reconciled.every((r) => r.at < ledAt),
              "a member reconciled after the candidate took the Lease",
            );
            assert.ok(ledAt >= lastStopped, "acquired before the group was gone");
          } finally {
            goStop.abort();
            await election;
          }
        },
      );
    } finally {
      if (goRenewing !== undefined) clearInterval(goRenewing);
      for (const { stop, run } of managers.values()) {
        stop.abort();
        await run.catch(() => {});
      }
      transport.close();
      await cp.stop();
    }
  },
});
