/**
 * How a pass ends (issue 19, items 5 and 6): Progressing=False SubAgentDeadLetter only once
 * nothing else moves, the dead letter named on Ready meanwhile and gone once the pod recovers; a
 * NameConflict or a refused part never stretches a rebuild's backoff.
 */
import assert from "node:assert/strict";
import { Pods } from "../kube/mod.ts";
import { CONDITION_TYPE_PROGRESSING } from "../common/apis/v1/conditions.ts";
import { ANNOTATION_LIFECYCLE_STATE } from "../common/meta/mod.ts";
import {
  conditionOf,
  editPod,
  findSet,
  lifecycleFailed,
  newTestEnv,
  podSeed,
  readyPod,
  reconcileSet,
  setSeed,
  TEST_NAMESPACE,
} from "./_test_support.ts";
import { liveSet, refuseCreates } from "./_hardening_test_support.ts";
import { REASON_SUB_AGENT_DEAD_LETTER } from "./agents.ts";
import { REASON_NAME_CONFLICT } from "./name_clash.ts";
import {
  ANNOTATION_DEAD_LETTER,
  ANNOTATION_REBUILD_HISTORY,
  encodeRebuildHistory,
  MAX_REBUILD_ATTEMPTS,
} from "./rebuild.ts";
import { REASON_INVALID_SPEC } from "./validate.ts";

const pair = (c?: { status: string; reason: string }) => [c?.status, c?.reason];

Deno.test("a dead letter: Progressing stays True while another slot is not Ready, False once only it is left, clear once it recovers", async () => {
  const { cs, pods } = liveSet("dl", { replicas: 2, liveSlots: [1] }, (c) => {
    c.metadata.annotations = {
      [ANNOTATION_REBUILD_HISTORY]: encodeRebuildHistory(
        2,
        new Map([[1, { count: MAX_REBUILD_ATTEMPTS, lastDeleted: 0 }]]),
      ),
    };
  });
  const dead = lifecycleFailed(pods[1]);
  dead.metadata.annotations![ANNOTATION_DEAD_LETTER] = "true";
  const env = newTestEnv([setSeed(cs), ...pods.map(podSeed)]);

  // Slot 2 is still being created.
  assert.deepEqual(await reconcileSet(env, "dl"), { requeue: true });
  assert.deepEqual(await reconcileSet(env, "dl"), {});
  let stored = await findSet(env.fake, "dl");
  assert.deepEqual(pair(conditionOf(stored, CONDITION_TYPE_PROGRESSING)), ["True", "Reconciling"]);
  assert.deepEqual(pair(conditionOf(stored, "Ready")), ["False", REASON_SUB_AGENT_DEAD_LETTER]);
  assert.match(conditionOf(stored, "Ready")?.message ?? "", /slots 1 exhausted 4 rebuilds/);

  // Slot 2 is Ready: only the dead letter is left.
  await editPod(env, "dl-2", (p) => readyPod(p));
  assert.deepEqual(await reconcileSet(env, "dl"), {});
  stored = await findSet(env.fake, "dl");
  assert.deepEqual(pair(conditionOf(stored, CONDITION_TYPE_PROGRESSING)), [
    "False",
    REASON_SUB_AGENT_DEAD_LETTER,
  ]);

  // The dead-lettered VM recovers by itself.
  await editPod(env, "dl-1", (p) => {
    delete p.metadata.annotations![ANNOTATION_LIFECYCLE_STATE];
  });
  assert.deepEqual(await reconcileSet(env, "dl"), {});
  stored = await findSet(env.fake, "dl");
  assert.deepEqual(pair(conditionOf(stored, CONDITION_TYPE_PROGRESSING)), ["False", "Stable"]);
  assert.deepEqual(pair(conditionOf(stored, "Ready")), ["True", "AllAgentsReady"]);
  assert.equal(stored?.status?.phase, "Running");
});

Deno.test("a lasting NameConflict does not stretch a rebuild's backoff: the pass comes back when the backoff ends", async () => {
  const now = Date.UTC(2026, 4, 14, 12);
  const { cs, pods } = liveSet("nc", { replicas: 1, liveSlots: [1], toolboxes: ["tb"] }, (c) => {
    c.metadata.annotations = {
      // One rebuild so far: the next waits 1 s, 200 ms of which have passed.
      [ANNOTATION_REBUILD_HISTORY]: JSON.stringify({
        "1": { count: 1, lastDeleted: new Date(now - 200).toISOString() },
      }),
    };
  });
  lifecycleFailed(pods[1]);
  const foreign = {
    metadata: { name: "nc-tb", namespace: TEST_NAMESPACE },
    spec: { containers: [{ name: "c", image: "x" }] },
  };
  const env = newTestEnv([setSeed(cs), ...pods.map(podSeed), podSeed(foreign)], now);

  assert.deepEqual(await reconcileSet(env, "nc"), { requeueAfter: 800 });
  const stored = await findSet(env.fake, "nc");
  assert.equal(conditionOf(stored, "Ready")?.reason, REASON_NAME_CONFLICT, "still reported");
  assert.equal(env.recorder.withReason(REASON_NAME_CONFLICT).length, 1);
  assert.ok(await env.fake.get(Pods, TEST_NAMESPACE, "nc-1"), "not rebuilt before its time");
});

Deno.test("a refused toolbox does not stretch a rebuild's backoff either", async () => {
  const now = Date.UTC(2026, 4, 14, 12);
  const { cs, pods } = liveSet("is", { replicas: 1, liveSlots: [1], toolboxes: ["tb"] }, (c) => {
    c.metadata.annotations = {
      [ANNOTATION_REBUILD_HISTORY]: JSON.stringify({
        "1": { count: 2, lastDeleted: new Date(now - 1_000).toISOString() },
      }),
    };
  });
  lifecycleFailed(pods[1]);
  const env = newTestEnv([setSeed(cs), ...pods.map(podSeed)], now);
  refuseCreates(env, "is-tb", "invalid");

  assert.deepEqual(await reconcileSet(env, "is"), { requeueAfter: 4_000 });
  const ready = conditionOf(await findSet(env.fake, "is"), "Ready");
  assert.equal(ready?.reason, REASON_INVALID_SPEC);
  assert.match(ready?.message ?? "", /^toolbox tb: /);
});
