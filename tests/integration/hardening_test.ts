/**
 * The CocoonSet hardening cases end to end: main.ts as a process under exactly config/rbac's
 * ClusterRole (tests/harness/sandboxed_operator.ts), a real kube-apiserver + etcd, a real registry
 * behind the counting proxy, and the VM simulator playing the scheduler and vk-cocoon. Each case
 * would fail on the Go operator's behaviour:
 *
 * - migration toward a node that does not exist, or is outside the set's pool: the running main
 *   is neither quiesced nor deleted, the set says MigrationTargetUnknown (Warning, Progressing
 *   False) and stays Running; when the node registers, the node watch alone starts the migration;
 * - a main that cannot schedule because its pool has no node gets a NoNodesInPool Warning;
 * - deleting a set sends one DELETE per pod and no registry DELETE for tags that cannot exist
 *   (snapshot policy `never`, nothing hibernated), while a set whose pods pushed `:latest` and
 *   `:hibernate` under an earlier policy and a suspend leaves nothing behind.
 *
 * A healthy CocoonSet created first must stay Running through every case, and the operator must
 * never exit; at the end it must not have been refused a single request (the nodes rule).
 */
import assert from "node:assert/strict";
import { ApiClient } from "../../kube/api_client.ts";
import { Events, Namespaces, Pods } from "../../kube/core.ts";
import { isNotFound } from "../../kube/errors.ts";
import type { KubeObject } from "../../kube/object.ts";
import { resourceType } from "../../kube/resource.ts";
import { loadRestConfig, Transport } from "../../kube/transport.ts";
import type { CocoonSet, CocoonSetSpec } from "../../common/apis/v1/cocoonset_types.ts";
import { CocoonSets } from "../../common/apis/v1/resources.ts";
import { ANNOTATION_HIBERNATE, LABEL_COCOON_SET } from "../../common/meta/keys.ts";
import { startSimulator } from "../../sim/simulator.ts";
import { startControlPlane } from "../harness/control_plane.ts";
import { countDelta, reconcilesOf, requestsByMethod } from "../harness/operator_metrics.ts";
import { registryAvailable, startRegistry } from "../harness/registry.ts";
import { startRegistryProxy } from "../harness/registry_proxy.ts";
import { startSandboxedOperator } from "../harness/sandboxed_operator.ts";
import { waitUntil } from "../harness/wait.ts";

const NS = "harden";
const PREFIX = "cocoon";
const IMAGE = "ghcr.io/cocoonstack/cocoon/ubuntu:24.04";

/** The core LimitRange kind, for the one case that needs a namespace default. */
const LimitRanges = resourceType<KubeObject>({
  group: "",
  version: "v1",
  kind: "LimitRange",
  plural: "limitranges",
  namespaced: true,
  statusSubresource: false,
});

function vmOf(set: string, slot: number | string): string {
  return `vk-${NS}-${set}-${slot}`;
}

Deno.test({
  name: "CocoonSet hardening on a real control plane, registry and simulator",
  ignore: !registryAvailable(),
  sanitizeResources: false,
  sanitizeOps: false,
  async fn(t) {
    const cp = await startControlPlane();
    const registry = await startRegistry({ auth: "none" });
    const proxy = startRegistryProxy(registry.url);
    const transport = new Transport(await loadRestConfig(cp.kubeconfigPath));
    const client = new ApiClient(transport);
    const stops: (() => Promise<unknown>)[] = [];
    try {
      await client.create(Namespaces, { metadata: { name: "cocoon-system" } });
      await client.create(Namespaces, { metadata: { name: NS } });
      const sim = await startSimulator({
        client,
        registry: { url: `${registry.host}/${PREFIX}` },
        nodes: [{ name: "vk-a", seats: 64 }, { name: "gpu-1", pool: "gpu", seats: 4 }],
        namespace: NS,
        latencies: { bootMs: 20, wakeMs: 20, hibernateMs: 50, deleteMs: 20 },
      });
      stops.push(() => sim.stop());
      const op = await startSandboxedOperator({
        cp,
        ociRegistry: `${proxy.host}/${PREFIX}`,
        args: ["--leader-elect=false"],
      });
      stops.push(() => op.stop(10_000));
      let exited = false;
      op.proc.status.then(() => exited = true);

      const get = (name: string) => client.get(CocoonSets, NS, name);
      const create = (name: string, spec: Partial<CocoonSetSpec>) =>
        client.create(CocoonSets, {
          apiVersion: "cocoonset.cocoonstack.io/v1",
          kind: "CocoonSet",
          metadata: { name, namespace: NS },
          spec: { agent: { image: IMAGE }, ...spec } as CocoonSetSpec,
        });
      const editSpec = (name: string, spec: Record<string, unknown>) =>
        client.patch(CocoonSets, NS, name, "merge", { spec });
      const waitSet = (name: string, what: string, ok: (cs: CocoonSet) => boolean) =>
        waitUntil(async () => {
          const cs = await get(name);
          return ok(cs) ? cs : undefined;
        }, { what: `${name}: ${what}`, timeoutMs: 60_000, intervalMs: 100 });
      const running = (name: string, agents = 1) =>
        waitSet(
          name,
          `Running with ${agents} agents`,
          (cs) => cs.status?.phase === "Running" && cs.status.readyAgents === agents,
        );
      const main = (name: string) => client.get(Pods, NS, `${name}-0`);
      const eventsOf = async (name: string, reason: string) =>
        (await client.list(Events, { namespace: NS })).items.filter((e) =>
          e.involvedObject.kind === "CocoonSet" && e.involvedObject.name === name &&
          e.reason === reason
        );
      const gone = (name: string) =>
        waitUntil(async () => {
          try {
            await get(name);
            return false;
          } catch (err) {
            if (!isNotFound(err)) throw err;
          }
          const pods = await client.list(Pods, {
            namespace: NS,
            labelSelector: { [LABEL_COCOON_SET]: name },
          });
          return pods.items.length === 0;
        }, { what: `${name} and its pods gone`, timeoutMs: 60_000, intervalMs: 100 });
      const operatorRequests = async () => requestsByMethod(await op.metrics());
      const registryDeletes = (repos: string[]) =>
        proxy.requests.filter((r) =>
          r.method === "DELETE" && repos.some((repo) => r.repo === `${PREFIX}/${repo}`)
        );
      /** The healthy set beside every case: still Running, and the operator still up. */
      const stillHealthy = async () => {
        await running("healthy", 2);
        assert.equal(exited, false, `the operator exited:\n${op.proc.output.slice(-3000)}`);
      };

      await create("healthy", { agent: { image: IMAGE, replicas: 1 } });
      await running("healthy", 2);

      await t.step(
        "a target node that does not exist: the main stays, MigrationTargetUnknown",
        async () => {
          await create("mig", {});
          await running("mig");
          const before = await main("mig");
          await editSpec("mig", { nodeName: "ghost" });
          const cs = await waitSet(
            "mig",
            "Progressing=False MigrationTargetUnknown",
            (c) =>
              c.status?.conditions?.some((x) =>
                x.type === "Progressing" && x.status === "False" &&
                x.reason === "MigrationTargetUnknown"
              ) ?? false,
          );
          assert.equal(cs.status?.phase, "Running");
          assert.equal((await eventsOf("mig", "MigrationTargetUnknown"))[0]?.type, "Warning");
          const after = await main("mig");
          assert.equal(after.metadata.uid, before.metadata.uid, "the main was not recreated");
          assert.equal(after.spec?.nodeName, "vk-a");
          assert.equal(after.metadata.annotations?.[ANNOTATION_HIBERNATE], undefined);
          assert.deepEqual(await registry.tagsOf(`${PREFIX}/${vmOf("mig", 0)}`), []);
          await stillHealthy();
        },
      );

      await t.step("a target node in another pool is no target either", async () => {
        const before = await main("mig");
        await editSpec("mig", { nodeName: "gpu-1" });
        await waitUntil(
          async () =>
            (await eventsOf("mig", "MigrationTargetUnknown")).some((e) =>
              /in pool gpu/.test(e.message ?? "")
            ),
          { what: "the pool Warning", timeoutMs: 30_000, intervalMs: 100 },
        );
        const after = await main("mig");
        assert.equal(after.metadata.uid, before.metadata.uid);
        assert.equal(after.metadata.annotations?.[ANNOTATION_HIBERNATE], undefined);
        await stillHealthy();
      });

      await t.step(
        "the target node registers: the node watch alone starts the migration",
        async () => {
          await editSpec("mig", { nodeName: "ghost" });
          await waitUntil(
            async () =>
              (await eventsOf("mig", "MigrationTargetUnknown")).some((e) =>
                /node ghost/.test(e.message ?? "")
              ),
            { what: "the ghost Warning again", timeoutMs: 30_000, intervalMs: 100 },
          );
          const before = await main("mig");
          await sim.addNode({ name: "ghost", seats: 4 });
          await waitUntil(async () => {
            const pod = await main("mig").catch(() => undefined);
            return pod?.spec?.nodeName === "ghost" && pod.metadata.uid !== before.metadata.uid;
          }, { what: "the main on ghost", timeoutMs: 60_000, intervalMs: 100 });
          await waitSet("mig", "Running and settled", (c) =>
            c.status?.phase === "Running" &&
            c.status.conditions?.some((x) => x.type === "Progressing" && x.reason === "Stable") ===
              true);
          await waitUntil(
            async () => (await registry.tagsOf(`${PREFIX}/${vmOf("mig", 0)}`)).length === 0,
            { what: "the migration snapshot dropped", timeoutMs: 30_000, intervalMs: 100 },
          );
          await stillHealthy();
        },
      );

      await t.step("a main whose pool has no node: NoNodesInPool", async () => {
        await create("nowhere", { nodePool: "nowhere" });
        await waitUntil(async () => (await eventsOf("nowhere", "NoNodesInPool")).length > 0, {
          what: "the NoNodesInPool Warning",
          timeoutMs: 30_000,
          intervalMs: 100,
        });
        const [e] = await eventsOf("nowhere", "NoNodesInPool");
        assert.equal(e.type, "Warning");
        assert.match(e.message ?? "", /cocoonstack\.io\/pool=nowhere/);
        // A pool that has nodes but no free seat says nothing of the kind.
        assert.deepEqual(await eventsOf("healthy", "NoNodesInPool"), []);
        await client.delete(CocoonSets, NS, "nowhere");
        await gone("nowhere");
        await stillHealthy();
      });

      await t.step("delete under never: one DELETE per pod, no registry DELETE", async () => {
        await create("big", { agent: { image: IMAGE, replicas: 20 }, snapshotPolicy: "never" });
        await running("big", 21);
        const before = await operatorRequests();
        await client.delete(CocoonSets, NS, "big");
        await gone("big");
        const spent = countDelta(await operatorRequests(), before);
        assert.equal(spent.DELETE, 21, JSON.stringify(spent));
        const vms = Array.from({ length: 21 }, (_, slot) => vmOf("big", slot));
        assert.deepEqual(registryDeletes(vms), [], "no tag of these VMs can exist");
        for (const vm of vms) assert.deepEqual(await registry.tagsOf(`${PREFIX}/${vm}`), []);
        await stillHealthy();
      });

      await t.step(
        "tags pushed under an earlier policy and by a suspend are all cleaned",
        async () => {
          await create("past", { agent: { image: IMAGE, replicas: 1 } }); // policy always
          await running("past", 2);
          // The pods drift and are recreated: vk-cocoon pushes :latest of both VMs under `always`.
          await editSpec("past", { snapshotPolicy: "never" });
          await waitUntil(
            async () => (await registry.tagsOf(`${PREFIX}/${vmOf("past", 1)}`)).includes("latest"),
            { what: ":latest of the old sub-agent", timeoutMs: 60_000, intervalMs: 100 },
          );
          await running("past", 2);
          // A retain suspend and unsuspend leave :hibernate of both VMs behind.
          await editSpec("past", { suspend: true });
          await waitSet("past", "Suspended", (c) => c.status?.phase === "Suspended");
          await editSpec("past", { suspend: false });
          await running("past", 2);
          const vms = [vmOf("past", 0), vmOf("past", 1)];
          for (const vm of vms) {
            assert.deepEqual(await registry.tagsOf(`${PREFIX}/${vm}`), ["hibernate", "latest"]);
          }
          await client.delete(CocoonSets, NS, "past");
          await gone("past");
          for (const vm of vms) assert.deepEqual(await registry.tagsOf(`${PREFIX}/${vm}`), []);
          await stillHealthy();
        },
      );

      await t.step(
        "values a namespace LimitRange fills in are not drift: the pods are made once",
        async () => {
          await client.create(LimitRanges, {
            apiVersion: "v1",
            kind: "LimitRange",
            metadata: { name: "defaults", namespace: NS },
            spec: {
              limits: [{
                type: "Container",
                default: { cpu: "1", memory: "512Mi" },
                defaultRequest: { cpu: "500m", memory: "256Mi" },
              }],
            },
          } as KubeObject);
          try {
            await create("ranged", { agent: { image: IMAGE, replicas: 1 } });
            await running("ranged", 2);
            const before = await main("ranged");
            const resources = before.spec?.containers[0].resources;
            assert.equal(resources?.limits?.memory, "512Mi", "the LimitRange applied");
            assert.equal(resources?.requests?.cpu, "500m", "the LimitRange applied");
            const uids = async () =>
              (await client.list(Pods, {
                namespace: NS,
                labelSelector: { [LABEL_COCOON_SET]: "ranged" },
              }))
                .items.map((p) => `${p.metadata.name}/${p.metadata.uid}`).sort();
            const made = await uids();
            // Two more passes over the set (a pod label change wakes it), then look again.
            const passes = reconcilesOf(await op.metrics(), "cocoonset");
            for (const i of [1, 2]) {
              await client.patch(Pods, NS, "ranged-0", "merge", {
                metadata: { labels: { "test.cocoonstack.io/nudge": String(i) } },
              });
            }
            await waitUntil(
              async () => reconcilesOf(await op.metrics(), "cocoonset") >= passes + 2,
              { what: "two more passes", timeoutMs: 30_000, intervalMs: 100 },
            );
            assert.deepEqual(await uids(), made, "no pod replaced");
            assert.equal((await main("ranged")).metadata.deletionTimestamp, undefined);
            await client.delete(CocoonSets, NS, "ranged");
            await gone("ranged");
          } finally {
            await client.delete(LimitRanges, NS, "defaults");
          }
          await stillHealthy();
        },
      );

      await op.assertNoForbidden();
      assert.equal(exited, false);
    } finally {
      for (const stop of stops.reverse()) await stop().catch(() => {});
      transport.close();
      await proxy.close();
      await registry.stop();
      await cp.stop();
    }
  },
});
