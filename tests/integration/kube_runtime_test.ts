/**
 * The kube/ runtime on a real kube-apiserver + etcd: API semantics (the same cases the fake
 * passes), a For+Owns controller, informer resilience across an apiserver restart and an etcd
 * compaction, Event aggregation, and leader election between operator processes running under
 * the operator's own ClusterRole.
 */
import { LEADER_ELECTION_ID } from "../../config.ts";
import assert from "node:assert/strict";
import { ApiClient } from "../../kube/api_client.ts";
import type { Client } from "../../kube/client.ts";
import {
  type CoreEvent,
  Events,
  Leases,
  Namespaces,
  Pods,
  ServiceAccounts,
} from "../../kube/core.ts";
import { isAlreadyExists, isNotFound } from "../../kube/errors.ts";
import { Recorder } from "../../kube/events.ts";
import { Manager } from "../../kube/manager.ts";
import { loadRestConfig, Transport } from "../../kube/transport.ts";
import { type ControlPlane, startControlPlane } from "../harness/control_plane.ts";
import { startGatedPodInformer } from "../harness/gated_informer.ts";
import {
  demoPodName,
  DemoSets,
  RECONCILED_BY_LABEL,
  REPLICAS_LABEL,
  setupDemoController,
} from "../harness/demo_controller.ts";
import { operatorKubeconfig } from "../harness/operator_identity.ts";
import { type ProcessHandle, runProcess } from "../harness/process.ts";
import { expectGoneWatch, semanticsCases, Widgets } from "../semantics/api_semantics.ts";
import { waitFor } from "../harness/wait.ts";

const repoRoot = new URL("../../", import.meta.url).pathname;

async function adminClient(cp: ControlPlane): Promise<{ client: ApiClient; close(): void }> {
  const transport = new Transport(await loadRestConfig(cp.kubeconfigPath));
  return { client: new ApiClient(transport), close: () => transport.close() };
}

async function createNamespace(c: Client, name: string): Promise<void> {
  await c.create(Namespaces, { metadata: { name } });
  // Pods need the namespace's default ServiceAccount when the ServiceAccount admission plugin
  // is on; there is no controller-manager to create it.
  await c.create(ServiceAccounts, { metadata: { name: "default", namespace: name } })
    .catch((err) => {
      if (!isAlreadyExists(err)) throw err;
    });
}

function demoSet(ns: string, name: string, replicas = 1) {
  return {
    metadata: { name, namespace: ns },
    spec: { agent: { image: "ghcr.io/example/agent:1", replicas } },
  };
}

async function gone(p: Promise<unknown>): Promise<boolean> {
  try {
    await p;
    return false;
  } catch (err) {
    return isNotFound(err);
  }
}

Deno.test({
  name: "kube runtime on a real control plane",
  sanitizeResources: false,
  sanitizeOps: false,
  async fn(t) {
    const cp = await startControlPlane();
    const { client, close } = await adminClient(cp);
    try {
      await t.step("API semantics match the fake", async (t) => {
        let i = 0;
        for (const c of semanticsCases) {
          const ns = `sem-${i++}`;
          await createNamespace(client, ns);
          await t.step(c.name, () => c.fn(client, ns));
        }
      });

      await t.step("watch from a compacted resourceVersion gets 410", async () => {
        await createNamespace(client, "gone");
        const v1 = await client.create(Widgets, {
          metadata: { name: "a", namespace: "gone" },
          spec: { agent: { image: "x" } },
        });
        // Two later writes, so the revision right after v1 is itself compacted away (compacting
        // at the revision that follows v1 would still let a watch start there).
        await client.patch(Widgets, "gone", "a", "merge", { metadata: { labels: { b: "c" } } });
        await client.patch(Widgets, "gone", "a", "merge", { metadata: { labels: { b: "d" } } });
        await cp.compactEtcd();
        await expectGoneWatch(client, "gone", v1.metadata.resourceVersion!);
      });

      await t.step("a For+Owns controller reconciles create, update and delete", async () => {
        await createNamespace(client, "ctl");
        const mgr = new Manager({
          client,
          metricsBindAddress: "0",
          healthProbeBindAddress: "0",
          leaderElection: false,
          leaderElectionId: "unused",
          cacheNamespace: "ctl",
        });
        setupDemoController(mgr, "in-process");
        const stop = new AbortController();
        const run = mgr.start(stop.signal);
        try {
          await client.create(DemoSets, demoSet("ctl", "a"));
          const pod = await waitFor("owned pod", () => client.get(Pods, "ctl", demoPodName("a")));
          assert.equal(pod.metadata.ownerReferences?.[0].kind, "CocoonSet");
          await client.patch(DemoSets, "ctl", "a", "merge", { spec: { agent: { replicas: 4 } } });
          await waitFor(
            "pod follows spec",
            async () =>
              (await client.get(Pods, "ctl", demoPodName("a"))).metadata.labels
                ?.[REPLICAS_LABEL] ===
                "4",
          );
          await waitFor(
            "status observedGeneration",
            async () => (await client.get(DemoSets, "ctl", "a")).status?.observedGeneration === 2,
          );
          await client.delete(DemoSets, "ctl", "a");
          await waitFor("set finalized", () => gone(client.get(DemoSets, "ctl", "a")));
          assert.ok(await gone(client.get(Pods, "ctl", demoPodName("a"))));
        } finally {
          stop.abort();
          assert.equal(await run, "stopped");
        }
      });

      await t.step("the cache survives an apiserver restart and an etcd compaction", async () => {
        await createNamespace(client, "cache");
        for (const n of ["keep", "change", "remove"]) {
          await client.create(Pods, {
            metadata: { name: n, namespace: "cache" },
            spec: { containers: [{ name: "c", image: "img" }] },
          });
        }
        const { informer: inf, gate, seen, stop } = startGatedPodInformer(client, "cache");
        try {
          await inf.waitForSync(AbortSignal.timeout(10_000));
          assert.deepEqual(seen.sort(), ["add:change", "add:keep", "add:remove"]);
          seen.length = 0;

          // 1. The apiserver goes down and comes back; an update made before the informer
          //    reconnects arrives exactly once, without a relist.
          gate.closed = true;
          await cp.restartApiServer();
          await client.patch(Pods, "cache", "change", "merge", {
            metadata: { labels: { v: "1" } },
          });
          gate.closed = false;
          await waitFor("update after restart", () => seen.includes("update:change:1"), 20_000);
          assert.equal(inf.stats.lists, 1, "resumed from its resourceVersion");
          assert.deepEqual(seen, ["update:change:1"]);
          seen.length = 0;

          // 2. The resourceVersion it holds is compacted away: it relists on 410 and reports
          //    every change in the gap once.
          gate.closed = true;
          await cp.restartApiServer();
          await client.patch(Pods, "cache", "change", "merge", {
            metadata: { labels: { v: "2" } },
          });
          await client.delete(Pods, "cache", "remove");
          await client.create(Pods, {
            metadata: { name: "new", namespace: "cache" },
            spec: { containers: [{ name: "c", image: "img" }] },
          });
          await cp.compactEtcd();
          gate.closed = false;
          await waitFor(
            "relist after 410",
            () => inf.stats.relistsAfterGone >= 1 && seen.length >= 3,
            20_000,
          );
          assert.deepEqual(seen.sort(), ["add:new", "delete:remove", "update:change:2"]);
          assert.deepEqual([...inf.listStored()].map((p) => p.metadata.name).sort(), [
            "change",
            "keep",
            "new",
          ]);
        } finally {
          await stop();
        }
      });

      await t.step("Events are aggregated into one object with a count", async () => {
        await createNamespace(client, "ev");
        const target = await client.create(DemoSets, demoSet("ev", "noisy"));
        const recorder = new Recorder({ client, component: "cocoon-operator" });
        for (let i = 0; i < 10; i++) {
          recorder.event(target, "Warning", "WakeNoCapacity", "no node has room");
        }
        await recorder.close();
        const events = (await client.list<CoreEvent>(Events, { namespace: "ev" })).items
          .filter((e) => e.involvedObject.name === "noisy");
        assert.equal(events.length, 1);
        assert.equal(events[0].count, 10);
        assert.equal(events[0].reason, "WakeNoCapacity");
        assert.equal(events[0].type, "Warning");
        assert.equal(events[0].source?.component, "cocoon-operator");
        assert.equal(events[0].involvedObject.uid, target.metadata.uid);
        assert.equal(events[0].involvedObject.kind, "CocoonSet");
      });

      await t.step(
        "leader election between operator processes under the operator's ClusterRole",
        async () => {
          await createNamespace(client, "cocoon-system");
          await createNamespace(client, "le");
          const kubeconfig = await operatorKubeconfig(cp);
          const procs: ProcessHandle[] = [];
          const start = async (id: string) => {
            const p = await runProcess(
              ["deno", "run", "-A", `${repoRoot}tests/harness/demo_operator.ts`],
              {
                kubeconfig,
                env: { DEMO_IDENTITY: id, LEASE_NAMESPACE: "cocoon-system", WATCH_NAMESPACE: "le" },
              },
            );
            procs.push(p);
            return p;
          };
          const holder = async () =>
            (await client.get(Leases, "cocoon-system", LEADER_ELECTION_ID)).spec
              ?.holderIdentity ?? "";
          const reconciledBy = async () =>
            (await client.get(Pods, "le", demoPodName("s"))).metadata.labels?.[RECONCILED_BY_LABEL];
          try {
            const a = await start("a");
            await waitFor("a holds the lease", async () => (await holder()) === "a", 30_000);
            const b = await start("b");
            await b.waitForOutput(/caches synced/, 30_000);
            await client.create(DemoSets, demoSet("le", "s"));
            await waitFor("a reconciles", async () => (await reconciledBy()) === "a", 20_000);
            await client.patch(DemoSets, "le", "s", "merge", { spec: { agent: { replicas: 2 } } });
            await waitFor(
              "a reconciles the update",
              async () =>
                (await client.get(Pods, "le", demoPodName("s"))).metadata.labels
                  ?.[REPLICAS_LABEL] ===
                  "2",
              20_000,
            );
            assert.equal(await reconciledBy(), "a", "the standby never wrote");

            // SIGKILL: no release; b must wait for the lease to expire.
            const killedAt = Date.now();
            a.kill("SIGKILL");
            await a.status;
            await client.patch(DemoSets, "le", "s", "merge", { spec: { agent: { replicas: 3 } } });
            await waitFor(
              "b reconciles after the lease expired",
              async () => (await reconciledBy()) === "b",
              20_000,
              100,
            );
            const killTakeoverMs = Date.now() - killedAt;

            // SIGTERM: b drains, releases the lease and exits 0; c takes over at once.
            const c = await start("c");
            await c.waitForOutput(/caches synced/, 30_000);
            const termAt = Date.now();
            const bStatus = await b.stop(10_000);
            assert.equal(bStatus.code, 0, b.output);
            await waitFor(
              "c holds the released lease",
              async () => (await holder()) === "c",
              3_000,
              50,
            );
            const termTakeoverMs = Date.now() - termAt;
            await client.patch(DemoSets, "le", "s", "merge", { spec: { agent: { replicas: 4 } } });
            await waitFor("c reconciles", async () => (await reconciledBy()) === "c", 20_000);
            console.log(
              JSON.stringify({
                leaderTakeover: { afterSigkillMs: killTakeoverMs, afterSigtermMs: termTakeoverMs },
              }),
            );
          } finally {
            for (const p of procs) {
              await p.stop(5_000).catch(() => {});
            }
          }
        },
      );
    } finally {
      close();
      await cp.stop();
    }
  },
});
