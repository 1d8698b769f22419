/**
 * The VM simulator on a real kube-apiserver and a real registry (distribution): a pod built like
 * the operator builds it is bound through pods/binding, booted, hibernated (its `:hibernate`
 * manifest visible in the registry), woken and deleted (`:latest` pushed, pod finalized); a pod
 * that fits nowhere gets the scheduler's Unschedulable condition. The simulator process
 * (`deno task sim`) registers its nodes and exits cleanly on SIGTERM.
 */
import assert from "node:assert/strict";
import { taskPermissionFlags } from "../harness/tasks.ts";
import { ApiClient } from "../../kube/api_client.ts";
import { Namespaces, type Node, Nodes, type Pod, Pods } from "../../kube/core.ts";
import { isNotFound } from "../../kube/errors.ts";
import { loadRestConfig, Transport } from "../../kube/transport.ts";
import {
  ANNOTATION_COCOON_SET_GENERATION,
  ANNOTATION_HIBERNATE,
  ANNOTATION_IP,
  ANNOTATION_LIFECYCLE_OBSERVED_GENERATION,
  ANNOTATION_LIFECYCLE_STATE,
  ANNOTATION_VMID,
} from "../../common/meta/keys.ts";
import { isContainerRunning, isPodReady } from "../../common/meta/pod.ts";
import { startSimulator } from "../../sim/simulator.ts";
import { operatorPod, vmNameOf } from "../../sim/testing/pods.ts";
import { startControlPlane } from "../harness/control_plane.ts";
import { runProcess } from "../harness/process.ts";
import { registryAvailable, startRegistry } from "../harness/registry.ts";
import { waitFor } from "../harness/wait.ts";

const repoRoot = new URL("../../", import.meta.url).pathname;
const NS = "sim-e2e";
const PREFIX = "cocoon";

function ann(pod: Pod, key: string): string | undefined {
  return pod.metadata.annotations?.[key];
}

Deno.test({
  name: "VM simulator on a real control plane and registry",
  ignore: !registryAvailable(),
  sanitizeResources: false,
  sanitizeOps: false,
  async fn(t) {
    const cp = await startControlPlane({ crdDir: "" });
    const reg = await startRegistry({ auth: "none" });
    const transport = new Transport(await loadRestConfig(cp.kubeconfigPath));
    const client = new ApiClient(transport);
    const sim = await startSimulator({
      client,
      registry: { url: `${reg.host}/${PREFIX}` },
      nodes: [{ name: "vk-a", seats: 4 }, { name: "vk-b", pool: "other", seats: 1 }],
      latencies: { bootMs: 50, wakeMs: 50, hibernateMs: 50, deleteMs: 50 },
    });
    const get = (name: string) => client.get(Pods, NS, name);
    const when = (name: string, what: string, ok: (p: Pod) => boolean) =>
      waitFor(
        `${name}: ${what}`,
        async () => {
          const p = await get(name);
          return ok(p) ? p : undefined;
        },
        30_000,
        50,
      );
    try {
      await client.create(Namespaces, { metadata: { name: NS } });

      await t.step(
        "nodes carry the vk-cocoon labels, only its taint, and their seats",
        async () => {
          const node: Node = await client.get(Nodes, "", "vk-a");
          assert.equal(node.metadata.labels?.["cocoonstack.io/pool"], "default");
          assert.equal(node.metadata.labels?.["kubernetes.io/hostname"], "vk-a");
          assert.equal(node.metadata.labels?.["type"], "virtual-kubelet");
          assert.deepEqual(node.spec?.taints, [
            { key: "virtual-kubelet.io/provider", value: "cocoon", effect: "NoSchedule" },
          ], "the API server's not-ready taint is lifted");
          assert.equal(node.status?.capacity?.pods, "4");
          assert.equal(node.status?.conditions?.find((c) => c.type === "Ready")?.status, "True");
        },
      );

      const vm = vmNameOf(NS, "demo", 0);
      let firstId = "";
      await t.step("an operator-built main pod is bound, booted and Ready", async () => {
        await client.create(
          Pods,
          operatorPod({ namespace: NS, cocoonSet: "demo", slot: 0, generation: 1 }),
        );
        const pod = await when("demo-0", "ready", isPodReady);
        assert.equal(pod.spec?.nodeName, "vk-a");
        assert.equal(pod.status?.phase, "Running");
        assert.ok(isContainerRunning(pod));
        assert.equal(ann(pod, ANNOTATION_LIFECYCLE_STATE), "ready");
        assert.equal(ann(pod, ANNOTATION_LIFECYCLE_OBSERVED_GENERATION), "1");
        firstId = ann(pod, ANNOTATION_VMID) ?? "";
        assert.ok(firstId);
        assert.equal(pod.status?.podIP, ann(pod, ANNOTATION_IP));
      });

      await t.step("a sub-agent created on the main's node forks from it", async () => {
        await client.create(
          Pods,
          operatorPod({
            namespace: NS,
            cocoonSet: "demo",
            slot: 1,
            generation: 1,
            nodeName: "vk-a",
          }),
        );
        const sub = await when("demo-1", "ready", isPodReady);
        assert.notEqual(ann(sub, ANNOTATION_VMID), firstId);
      });

      await t.step(
        "a pod that fits nowhere is Unschedulable with the scheduler's message",
        async () => {
          await client.create(
            Pods,
            operatorPod({ namespace: NS, cocoonSet: "gpu", slot: 0, pool: "gpu" }),
          );
          const pod = await when(
            "gpu-0",
            "unschedulable",
            (p) =>
              p.status?.conditions?.some((c) =>
                c.type === "PodScheduled" && c.reason === "Unschedulable"
              ) ?? false,
          );
          const cond = pod.status!.conditions!.find((c) => c.type === "PodScheduled")!;
          assert.equal(cond.status, "False");
          assert.match(
            cond.message ?? "",
            /^0\/2 nodes are available: 2 node\(s\) didn't match Pod's node affinity\/selector\./,
          );
          await client.delete(Pods, NS, "gpu-0");
        },
      );

      await t.step(
        "hibernate: :hibernate pushed, id cleared, hibernated at the new stamp",
        async () => {
          await client.patch(Pods, NS, "demo-0", "merge", {
            metadata: {
              annotations: {
                [ANNOTATION_COCOON_SET_GENERATION]: "2",
                [ANNOTATION_HIBERNATE]: "true",
              },
            },
          });
          const pod = await when(
            "demo-0",
            "hibernated and stopped",
            (p) => ann(p, ANNOTATION_LIFECYCLE_STATE) === "hibernated" && !isContainerRunning(p),
          );
          assert.equal(ann(pod, ANNOTATION_LIFECYCLE_OBSERVED_GENERATION), "2");
          assert.equal(ann(pod, ANNOTATION_VMID), undefined);
          assert.equal(ann(pod, ANNOTATION_IP), undefined);
          assert.equal(pod.status?.phase, "Pending");
          assert.equal(pod.status?.podIP, undefined);
          assert.ok(!isPodReady(pod));
          assert.deepEqual(await reg.tagsOf(`${PREFIX}/${vm}`), ["hibernate"]);
        },
      );

      await t.step("wake: a fresh VM id, ready again", async () => {
        await client.patch(Pods, NS, "demo-0", "merge", {
          metadata: { annotations: { [ANNOTATION_HIBERNATE]: null } },
        });
        const pod = await when(
          "demo-0",
          "woken",
          (p) => isPodReady(p) && isContainerRunning(p) && !!ann(p, ANNOTATION_VMID),
        );
        assert.notEqual(ann(pod, ANNOTATION_VMID), firstId);
        assert.equal(ann(pod, ANNOTATION_LIFECYCLE_STATE), "ready");
        assert.equal(ann(pod, ANNOTATION_LIFECYCLE_OBSERVED_GENERATION), "2");
      });

      await t.step("delete: :latest pushed, the Terminating pod finalized", async () => {
        const terminating = await client.delete(Pods, NS, "demo-0");
        assert.ok(terminating?.metadata.deletionTimestamp, "a bound pod waits for its kubelet");
        await waitFor(
          "demo-0 gone",
          async () => {
            try {
              await get("demo-0");
              return false;
            } catch (err) {
              return isNotFound(err);
            }
          },
          30_000,
          50,
        );
        assert.deepEqual(await reg.tagsOf(`${PREFIX}/${vm}`), ["hibernate", "latest"]);
        assert.ok(sim.counters.finalized >= 1);
      });
    } finally {
      await sim.stop();
      transport.close();
      await reg.stop();
      await cp.stop();
    }
  },
});

Deno.test({
  name: "VM simulator process: registers its nodes, exits 0 on SIGTERM",
  sanitizeResources: false,
  sanitizeOps: false,
  async fn() {
    const cp = await startControlPlane({ crdDir: "" });
    const transport = new Transport(await loadRestConfig(cp.kubeconfigPath));
    const client = new ApiClient(transport);
    const proc = await runProcess([
      "deno",
      "run",
      ...(await taskPermissionFlags("sim")),
      `${repoRoot}sim/main.ts`,
      "--registry=127.0.0.1:5000/cocoon",
      "--node=proc-a:default:2",
      "--node=proc-b:gpu:1:zen4",
      "--log-format=text",
    ], { kubeconfig: cp.kubeconfigPath, cwd: repoRoot });
    try {
      await proc.waitForOutput(/ready: nodes=/, 60_000);
      const b = await client.get(Nodes, "", "proc-b");
      assert.equal(b.metadata.labels?.["cocoonstack.io/pool"], "gpu");
      assert.equal(b.metadata.labels?.["cocoonstack.io/snapshot-cpu-class"], "zen4");
      assert.equal(b.status?.capacity?.pods, "1");
      const status = await proc.stop(10_000);
      assert.equal(status.code, 0, proc.output);
      assert.match(proc.output, /stopped/);
    } finally {
      await proc.stop(1_000).catch(() => {});
      transport.close();
      await cp.stop();
    }
  },
});
