/**
 * A sub-agent whose VM keeps failing, on the real system: each failure is rebuilt after the
 * backoff (0, 1, 5, 30 s since the previous rebuild), counted in the set's rebuild history
 * (written before the delete it accounts for), announced (SubAgentRebuilding) and counted
 * (subagent_rebuild_total); the fifth failure dead-letters the pod (annotation, Warning,
 * subagent_dead_letter_total, Progressing False) and leaves it in place; an edit of the agent
 * spec lifts the dead letter: the pod is rebuilt with a fresh budget.
 *
 * Failures come from the simulator's per-pod knob `sim.cocoonstack.io/fail=lifecycle`; a failed
 * VM stays failed until its pod is deleted, and each rebuilt pod starts without the knob, so the
 * test sets it on every new pod.
 */
import assert from "node:assert/strict";
import type { CocoonSet } from "../../common/apis/v1/cocoonset_types.ts";
import { CocoonSets } from "../../common/apis/v1/resources.ts";
import { ANNOTATION_IMAGE } from "../../common/meta/keys.ts";
import { type Pod, Pods } from "../../kube/core.ts";
import { parseRfc3339 } from "../../kube/time.ts";
import { ANNOTATION_SIM_FAIL } from "../../sim/knobs.ts";
import type { Stack } from "../harness/stack.ts";
import { recordTimeline, type Timeline } from "../harness/timeline.ts";
import { waitUntil } from "../harness/wait.ts";
import {
  conditionOf,
  createSet,
  eventCount,
  eventsWith,
  inPhase,
  patchSpec,
  waitEvent,
  waitMetric,
  waitPod,
  waitSet,
} from "../harness/stack_objects.ts";
import { e2eSuite } from "./_support.ts";

const NS = "e2e-rebuild";
const HISTORY = "cocoonset.cocoonstack.io/rebuild-history";
const DEAD_LETTER = "cocoonset.cocoonstack.io/dead-letter";
const LABELS = { namespace: NS, cocoonset: "rb" };

/** The rebuild history of slot 1, as the set's annotation records it. */
function slot1(cs: CocoonSet): { count: number; lastDeleted: number } | undefined {
  const raw = cs.metadata.annotations?.[HISTORY];
  if (!raw) return undefined;
  const entry = (JSON.parse(raw) as Record<string, { count: number; lastDeleted: string }>)["1"];
  return entry && { count: entry.count, lastDeleted: parseRfc3339(entry.lastDeleted) ?? 0 };
}

/** The live rb-1 pod other than `previousUid`. */
async function nextSub(stack: Stack, previousUid: string): Promise<Pod> {
  return await waitPod(
    stack,
    NS,
    "rb-1",
    "recreated",
    (p) => p.metadata.uid !== previousUid && !p.metadata.deletionTimestamp,
  );
}

/** Makes the pod's VM fail (the simulator reports lifecycle-state=failed). */
async function failVm(stack: Stack, pod: Pod): Promise<void> {
  await stack.admin.patch(Pods, NS, pod.metadata.name!, "merge", {
    metadata: { uid: pod.metadata.uid, annotations: { [ANNOTATION_SIM_FAIL]: "lifecycle" } },
  });
}

/**
 * The rebuild of a pod: the history write that counts it comes before the delete (by the API
 * server's order of writes).
 */
function assertHistoryBeforeDelete(
  sets: Timeline<CocoonSet>,
  pods: Timeline<Pod>,
  uid: string,
  attempt: number,
): void {
  const counted = sets.first((s) => (slot1(s.object)?.count ?? 0) >= attempt);
  const deleted = pods.first((s) =>
    s.object.metadata.uid === uid && (s.type === "DELETED" || !!s.object.metadata.deletionTimestamp)
  );
  assert.ok(counted, `rebuild ${attempt} is in the history`);
  assert.ok(deleted, `the pod of rebuild ${attempt} was deleted`);
  assert.ok(
    counted.rv < deleted.rv,
    `rebuild ${attempt}: history (rv ${counted.rv}) written before the delete (rv ${deleted.rv})`,
  );
}

e2eSuite("sub-agent failures: rebuild with backoff, dead letter, lifted by a spec edit", {}, async (
  stack,
  step,
) => {
  await stack.namespace(NS);
  const sets = await recordTimeline(stack.admin, CocoonSets, NS);
  const pods = await recordTimeline(stack.admin, Pods, NS);
  let cs = await createSet(stack, NS, "rb", { agent: { replicas: 1 } });
  let pod: Pod | undefined;
  try {
    await step("a running set with one sub-agent", async () => {
      cs = await waitSet(stack, cs, "Running", inPhase("Running"));
      assert.equal(cs.status?.readyAgents, 2);
      pod = await waitPod(stack, NS, "rb-1", "exists", () => true);
    });

    await step("four failures: four rebuilds after 0, 1, 5 and 30 s of backoff", async () => {
      let previous: { count: number; lastDeleted: number } | undefined;
      for (let attempt = 1; attempt <= 4; attempt++) {
        await failVm(stack, pod!);
        await waitEvent(
          stack,
          cs,
          "SubAgentRebuilding",
          new RegExp(`^slot 1 attempt ${attempt}/4$`),
        );
        const failedUid = pod!.metadata.uid!;
        pod = await nextSub(stack, failedUid);
        cs = await waitSet(
          stack,
          cs,
          `history count ${attempt}`,
          (c) => slot1(c)?.count === attempt,
        );
        assertHistoryBeforeDelete(sets, pods, failedUid, attempt);
        const entry = slot1(cs)!;
        if (previous) {
          const backoff = [0, 0, 1_000, 5_000, 30_000][attempt];
          assert.ok(
            entry.lastDeleted - previous.lastDeleted >= backoff,
            `rebuild ${attempt} came ${entry.lastDeleted - previous.lastDeleted} ms after the ` +
              `previous one, before its ${backoff} ms backoff`,
          );
        }
        previous = entry;
        assert.equal(await stack.metric("cocoon_operator_subagent_rebuild_total", LABELS), attempt);
      }
      assert.equal(pod!.metadata.annotations?.[ANNOTATION_SIM_FAIL], undefined, "a fresh pod");
      // One announcement per rebuild.
      const announced = (await eventsWith(stack, cs, "SubAgentRebuilding"))
        .map((e) => [e.message, e.count ?? 1, e.type]);
      assert.deepEqual(
        announced.sort(),
        [1, 2, 3, 4].map((k) => [`slot 1 attempt ${k}/4`, 1, "Normal"]),
      );
    });

    await step("the fifth failure dead-letters the pod and leaves it in place", async () => {
      const uid = pod!.metadata.uid;
      await failVm(stack, pod!);
      const ev = await waitEvent(stack, cs, "SubAgentDeadLetter");
      assert.equal(ev.type, "Warning");
      assert.equal(ev.message, "slot 1 exhausted 4 rebuilds; pod rb-1 left in dead-letter");
      assert.equal(
        await waitMetric(stack, "cocoon_operator_subagent_dead_letter_total", LABELS, (v) => v > 0),
        1,
      );
      const marked = await waitPod(
        stack,
        NS,
        "rb-1",
        "dead-lettered",
        (p) => p.metadata.annotations?.[DEAD_LETTER] === "true",
      );
      assert.equal(marked.metadata.uid, uid, "the dead-lettered pod is not deleted");
      assert.equal(marked.metadata.deletionTimestamp, undefined);
      cs = await waitSet(
        stack,
        cs,
        "Progressing False SubAgentDeadLetter",
        (c) => conditionOf(c, "Progressing")?.reason === "SubAgentDeadLetter",
      );
      const progressing = conditionOf(cs, "Progressing")!;
      assert.equal(progressing.status, "False");
      assert.match(progressing.message ?? "", /slots 1 exhausted 4 rebuilds/);

      // Later passes leave it alone: no rebuild, no second dead letter.
      const passes = await stack.metric("controller_runtime_reconcile_total", {
        controller: "cocoonset",
      });
      for (let i = 0; i < 3; i++) {
        await stack.admin.patch(Pods, NS, "rb-1", "merge", {
          metadata: { annotations: { "e2e.cocoonstack.io/touch": String(i) } },
        });
      }
      await waitMetric(
        stack,
        "controller_runtime_reconcile_total",
        { controller: "cocoonset" },
        (v) => v >= passes + 2,
      );
      assert.equal((await stack.admin.get(Pods, NS, "rb-1")).metadata.uid, uid);
      assert.equal(await eventCount(stack, cs, "SubAgentDeadLetter"), 1);
      assert.equal(await stack.metric("cocoon_operator_subagent_dead_letter_total", LABELS), 1);
      assert.equal(await stack.metric("cocoon_operator_subagent_rebuild_total", LABELS), 4);
    });

    await step("a spec edit lifts the dead letter: rebuilt with a fresh budget", async () => {
      const uid = pod!.metadata.uid!;
      const image = "ghcr.io/cocoonstack/cocoon/ubuntu:24.10";
      cs = await patchSpec(stack, cs, { agent: { image } });
      pod = await nextSub(stack, uid);
      assert.equal(pod.metadata.annotations?.[ANNOTATION_IMAGE], image);
      assert.equal(pod.metadata.annotations?.[DEAD_LETTER], undefined);
      cs = await waitSet(stack, cs, "Running on the new spec", inPhase("Running"));
      assert.equal(cs.metadata.annotations?.[HISTORY], undefined, "the slot's history is reset");
      assert.equal(conditionOf(cs, "Progressing")?.reason, "Stable");

      // A fresh budget: the next failure is attempt 1 again, rebuilt without waiting.
      await failVm(stack, pod);
      const failedUid = pod.metadata.uid!;
      await waitUntil(
        async () =>
          (await eventsWith(stack, cs, "SubAgentRebuilding"))
            .some((e) => e.message === "slot 1 attempt 1/4" && (e.count ?? 1) >= 2),
        { what: "a second 'attempt 1/4'", timeoutMs: 30_000, intervalMs: 100 },
      );
      pod = await nextSub(stack, failedUid);
      cs = await waitSet(stack, cs, "Running again", (c) => inPhase("Running")(c) && !!slot1(c));
      assert.equal(slot1(cs)?.count, 1);
      assert.equal(await stack.metric("cocoon_operator_subagent_rebuild_total", LABELS), 5);
      assert.equal(await stack.metric("cocoon_operator_subagent_dead_letter_total", LABELS), 1);
    });
  } finally {
    await sets.stop();
    await pods.stop();
  }
});
