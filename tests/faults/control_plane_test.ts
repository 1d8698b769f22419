/**
 * The control plane under the operator's feet, in the middle of a 20-set scale-up: etcd is
 * compacted while the API server runs (watches resuming from older versions get 410 Gone), then
 * kube-apiserver is stopped, etcd compacted again, and the API server started on the same
 * etcd, port and certificates. The operator, the simulator and the test all lose their watches.
 * The scale-up still converges, and the test — watching pods the whole time — never observes
 * two live pods for one slot, nor the simulator two VMs for one name.
 *
 * Figure: pods created during the scale-up, when the faults hit (pods already created), how long
 * the API server was down, and how long the system took to converge after it came back.
 */
import assert from "node:assert/strict";
import type { CocoonSet } from "../../common/apis/v1/cocoonset_types.ts";
import { LABEL_ROLE } from "../../common/meta/keys.ts";
import { waitUntil } from "../harness/wait.ts";
import { createSet, inPhase, patchSpec, waitSet } from "../harness/stack_objects.ts";
import { faultSuite, operatorLog, watchSystem } from "./_support.ts";

const NS = "faults-cp";
const SETS = 20;
const BEFORE = 1;
const AFTER = 4;
const NEW_PODS = SETS * (AFTER - BEFORE);

/** Running for this generation with replicas+1 agents ready. */
function settled(agents: number): (cs: CocoonSet) => boolean {
  return (cs) => inPhase("Running")(cs) && cs.status?.readyAgents === agents;
}

/**
 * How long after the API server's start it may still refuse requests as Forbidden: a restarted
 * kube-apiserver serves before its RBAC authorizer has read the roles back ("clusterrole … not
 * found"), so a client's first requests can be refused; the test accepts those, and only those.
 */
const RBAC_WARMUP_MS = 15_000;

faultSuite("control plane restart and etcd compaction", {
  nodes: [{ name: "vk-a", seats: 64 }, { name: "vk-b", seats: 64 }],
}, async (stack, scenario, health) => {
  await scenario(
    "kube-apiserver restart and etcd compaction during a 20-set scale-up",
    async (fig) => {
      const watch = await watchSystem(stack);
      try {
        const names = Array.from({ length: SETS }, (_, i) => `s${String(i).padStart(2, "0")}`);
        const sets = await Promise.all(
          names.map((n) => createSet(stack, NS, n, { agent: { replicas: BEFORE } })),
        );
        await Promise.all(sets.map((cs) => waitSet(stack, cs, "Running", settled(BEFORE + 1))));

        // Live sub-agent pods above the old replica count: the scale-up's progress.
        const created = () =>
          [...watch.pods.current.values()].filter((p) =>
            p.metadata.namespace === NS && p.metadata.labels?.[LABEL_ROLE] === "sub-agent" &&
            Number(p.metadata.name?.split("-").pop()) > BEFORE
          ).length;
        const progress = (n: number, what: string) =>
          waitUntil(() => created() >= n, { what, timeoutMs: 60_000, intervalMs: 10 });

        const started = Date.now();
        await Promise.all(sets.map((cs) => patchSpec(stack, cs, { agent: { replicas: AFTER } })));
        await progress(Math.ceil(NEW_PODS / 6), "a sixth of the new pods");
        fig.podsAtCompaction = created();
        await stack.cp.compactEtcd();

        await progress(Math.ceil(NEW_PODS / 3), "a third of the new pods");
        fig.podsAtRestart = created();
        const down = Date.now();
        await stack.cp.stopApiServer();
        await stack.cp.compactEtcd();
        await stack.cp.startApiServer();
        const up = Date.now();
        fig.apiServerDownMs = up - down;

        await Promise.all(
          sets.map((cs) =>
            waitSet(stack, cs, "Running after the scale-up", settled(AFTER + 1), 180_000)
          ),
        );
        fig.convergeAfterRestartMs = Date.now() - up;
        fig.scaleUpMs = Date.now() - started;
        fig.sets = SETS;
        fig.newPods = NEW_PODS;
        assert.ok(
          (fig.podsAtRestart as number) < NEW_PODS,
          "the restart hit before the scale-up had created every pod",
        );
        assert.ok(watch.pods.relists >= 1, "the test's own watch went through the outage");
        await watch.judge(fig);

        const refused = operatorLog(stack, 0).filter((l) => l.message.includes("Forbidden"))
          .map((l) => l.at);
        fig.forbiddenAfterRestart = refused.length;
        const outside = refused.filter((t) => !(t >= down && t <= up + RBAC_WARMUP_MS));
        assert.deepEqual(
          outside.map((t) => new Date(t).toISOString()),
          [],
          "403s only while the restarted API server warms up its RBAC caches",
        );
        await health.tolerateForbiddenSoFar(
          "a restarted kube-apiserver refuses requests until its RBAC caches are filled",
        );
      } finally {
        await watch.stop();
      }
    },
  );
});
