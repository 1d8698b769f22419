/**
 * Input the API server accepts but the operator cannot carry out stays explained on the object,
 * on the real system: specs no pod can be built from (a negative storage quantity, requests
 * above limits) give Ready=False InvalidSpec with the API server's own message, a Warning, and no
 * pod; a toolbox whose pod name a foreign pod already has gives NameConflict while the foreign
 * pod is left untouched and the rest of the set runs; duplicate toolbox names give InvalidSpec
 * and no toolbox pod is created or deleted. A healthy set beside them converges, and the operator
 * never exits.
 */
import assert from "node:assert/strict";
import type { CocoonSet } from "../../common/apis/v1/cocoonset_types.ts";
import { LABEL_COCOON_SET } from "../../common/meta/keys.ts";
import { isPodReady } from "../../common/meta/pod.ts";
import { type Pod, Pods } from "../../kube/core.ts";
import { recordTimeline } from "../harness/timeline.ts";
import {
  conditionOf,
  createSet,
  eventsWith,
  inPhase,
  livePodsOf,
  patchSpec,
  waitEvent,
  waitPod,
  waitSet,
} from "../harness/stack_objects.ts";
import { e2eSuite } from "./_support.ts";

const NS = "e2e-invalid";
const TOOLS = "ghcr.io/cocoonstack/cocoon/toolbox:1";

/** Ready=False with this reason, for the current generation. */
function notReadyBecause(reason: string): (cs: CocoonSet) => boolean {
  return (cs) => {
    const ready = conditionOf(cs, "Ready");
    return ready?.status === "False" && ready.reason === reason &&
      cs.status?.observedGeneration === cs.metadata.generation;
  };
}

e2eSuite("invalid and conflicting input stays explained", {}, async (stack, step) => {
  await stack.namespace(NS);
  const pods = await recordTimeline(stack.admin, Pods, NS);
  /** Pods of a set that were ever created. */
  const everCreated = (set: string) =>
    new Set(
      pods.sightings.filter((s) => s.object.metadata.labels?.[LABEL_COCOON_SET] === set)
        .map((s) => s.object.metadata.name),
    );
  try {
    // A pod someone else made, named like a toolbox pod of the set "clash".
    const foreign: Pod = await stack.admin.create(Pods, {
      metadata: { name: "clash-tools", namespace: NS, labels: { app: "someone-else" } },
      spec: { containers: [{ name: "main", image: "registry.example/other:1" }] },
    });
    const neg = await createSet(stack, NS, "neg", { agent: { storage: "-1Gi" } });
    const greedy = await createSet(stack, NS, "greedy", {
      agent: { resources: { requests: { cpu: "4" }, limits: { cpu: "2" } } },
    });
    let clash = await createSet(stack, NS, "clash", {
      agent: { replicas: 1 },
      toolboxes: [{ name: "tools", image: TOOLS }, { name: "extra", image: TOOLS }],
    });
    let dup = await createSet(stack, NS, "dup", { toolboxes: [{ name: "a", image: TOOLS }] });
    let ok = await createSet(stack, NS, "ok", { agent: { replicas: 1 } });

    await step(
      "a negative storage quantity: InvalidSpec with the server's message, no pod",
      async () => {
        const cs = await waitSet(stack, neg, "InvalidSpec", notReadyBecause("InvalidSpec"));
        const message = conditionOf(cs, "Ready")?.message ?? "";
        assert.match(message, /^main agent: /);
        assert.match(message, /ephemeral-storage/);
        assert.match(message, /must be greater than or equal to 0/);
        const ev = await waitEvent(stack, cs, "InvalidSpec");
        assert.equal(ev.type, "Warning");
        assert.equal(ev.message, message);
        assert.equal(everCreated("neg").size, 0, "no pod was ever created");
      },
    );

    await step("requests above limits: InvalidSpec with the server's message, no pod", async () => {
      const cs = await waitSet(stack, greedy, "InvalidSpec", notReadyBecause("InvalidSpec"));
      const message = conditionOf(cs, "Ready")?.message ?? "";
      assert.match(message, /must be less than or equal to cpu limit/);
      assert.equal((await waitEvent(stack, cs, "InvalidSpec")).type, "Warning");
      assert.equal(everCreated("greedy").size, 0, "no pod was ever created");
    });

    await step(
      "a toolbox pod name taken by a foreign pod: NameConflict, the rest runs",
      async () => {
        clash = await waitSet(
          stack,
          clash,
          "NameConflict with the rest ready",
          (cs) =>
            notReadyBecause("NameConflict")(cs) && cs.status?.readyAgents === 2 &&
            cs.status.readyToolboxes === 1,
        );
        const message = conditionOf(clash, "Ready")?.message ?? "";
        assert.match(message, /clash-tools/);
        assert.match(message, /not controlled by any CocoonSet/);
        const ev = await waitEvent(stack, clash, "NameConflict");
        assert.equal(ev.type, "Warning");
        const live = await livePodsOf(stack, clash);
        for (const name of ["clash-0", "clash-1", "clash-extra"]) {
          assert.ok(live.get(name) && isPodReady(live.get(name)!), `${name} runs`);
        }
        assert.deepEqual(
          clash.status?.toolboxes?.map((t) => t.name),
          ["extra"],
        );
        // The foreign pod: never written to by anyone.
        const now = await stack.admin.get(Pods, NS, "clash-tools");
        assert.equal(now.metadata.uid, foreign.metadata.uid);
        assert.equal(now.metadata.resourceVersion, foreign.metadata.resourceVersion);
        assert.deepEqual(pods.of("clash-tools").map((s) => s.type), ["ADDED"]);
      },
    );

    await step(
      "duplicate toolbox names: InvalidSpec, no toolbox pod created or deleted",
      async () => {
        dup = await waitSet(stack, dup, "Running", inPhase("Running"));
        const before = (await livePodsOf(stack, dup)).get("dup-a")!;
        dup = await patchSpec(stack, dup, {
          toolboxes: [{ name: "a", image: TOOLS }, { name: "a", image: TOOLS }, {
            name: "b",
            image: TOOLS,
          }],
        });
        dup = await waitSet(stack, dup, "InvalidSpec", notReadyBecause("InvalidSpec"));
        assert.equal(conditionOf(dup, "Ready")?.message, 'duplicate toolbox names "a"');
        const ev = await waitEvent(stack, dup, "InvalidSpec");
        assert.equal(ev.type, "Warning");
        const after = await livePodsOf(stack, dup);
        assert.equal(after.get("dup-a")?.metadata.uid, before.metadata.uid, "dup-a kept");
        assert.ok(isPodReady(after.get("dup-a")!));
        assert.ok(!everCreated("dup").has("dup-b"), "no toolbox pod created");
        assert.ok(
          !pods.of("dup-a").some((s) =>
            s.type === "DELETED" || s.object.metadata.deletionTimestamp
          ),
          "no toolbox pod deleted",
        );
        assert.ok(isPodReady(after.get("dup-0")!), "the agents still run");
      },
    );

    await step("a healthy set beside them converges; the operator kept running", async () => {
      ok = await waitSet(
        stack,
        ok,
        "Running",
        (cs) => inPhase("Running")(cs) && cs.status?.readyAgents === 2,
      );
      assert.equal(conditionOf(ok, "Ready")?.status, "True");
      assert.deepEqual(
        (await stack.events(ok)).filter((e) => e.type === "Warning").map((e) => e.reason),
        [],
      );
      await waitPod(stack, NS, "ok-1", "Ready", isPodReady);
      assert.ok(stack.alive(0), "the operator did not exit");
      // Every refusal is still reported, not given up on.
      for (const cs of [neg, greedy]) {
        assert.ok((await eventsWith(stack, cs, "InvalidSpec")).length > 0);
      }
    });
  } finally {
    await pods.stop();
  }
});
