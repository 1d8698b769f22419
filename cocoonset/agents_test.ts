/**
 * Sub-agent behaviour the Go reconciler tests leave open: the whole rebuild sequence with its
 * backoff, the dead letter and how a spec edit lifts it, scale-down, the bounded create fan-out
 * and a create that finds the old pod still there. Each test drives the reconciler on the fake
 * API and reads the outcome off the stored objects, the recorded requests, Events and metrics.
 */

import assert from "node:assert/strict";
import { isConflict, newApiError, type Pod, Pods, rfc3339Nano } from "../kube/mod.ts";
import { type FakeAction, flushMicrotasks, waitFor } from "../kube/testing/mod.ts";
import type { CocoonSet } from "../common/apis/v1/cocoonset_types.ts";
import { CONDITION_TYPE_PROGRESSING } from "../common/apis/v1/conditions.ts";
import { CocoonSets } from "../common/apis/v1/resources.ts";
import {
  ANNOTATION_FORK_FROM,
  ANNOTATION_LIFECYCLE_STATE,
  LIFECYCLE_STATE_FAILED,
} from "../common/meta/mod.ts";
import {
  conditionOf,
  counterValue,
  editPod,
  findSet,
  getPod,
  getSet,
  laggingCache,
  lifecycleFailed,
  livePod,
  newCocoonSet,
  newTestEnv,
  newTestPass,
  podSeed,
  readyPod,
  reconcilerWith,
  reconcileSet,
  setSeed,
  TEST_NAMESPACE,
  type TestEnv,
} from "./_test_support.ts";
import {
  ensureSubAgents,
  REASON_SUB_AGENT_DEAD_LETTER,
  REASON_SUB_AGENT_REBUILDING,
  SUB_AGENT_CREATE_CONCURRENCY,
} from "./agents.ts";
import { buildAgentPod } from "./pods.ts";
import { writeSetStatus } from "./status.ts";
import {
  ANNOTATION_DEAD_LETTER,
  ANNOTATION_REBUILD_HISTORY,
  encodeRebuildHistory,
  MAX_REBUILD_ATTEMPTS,
} from "./rebuild.ts";
import { InvalidSpecError, REASON_INVALID_SPEC } from "./validate.ts";
import { liveSet, refuseCreates } from "./_hardening_test_support.ts";
import { REASON_NAME_CONFLICT } from "./create.ts";

const NODE = "node-a";

/** A set at generation 1 with its main live on node-a and the given sub-agent slots live too. */
function runningSet(
  name: string,
  replicas: number,
  liveSlots: number[],
  ...mods: ((cs: CocoonSet) => void)[]
): { cs: CocoonSet; pods: Pod[] } {
  const cs = newCocoonSet(name, (c) => {
    c.metadata.generation = 1;
    c.spec.agent.replicas = replicas;
  }, ...mods);
  const pods = [livePod(buildAgentPod(cs, 0), NODE)];
  for (const slot of liveSlots) {
    pods.push(livePod(buildAgentPod(cs, slot, `vk-ns-${name}-0`, NODE), NODE));
  }
  return { cs, pods };
}

function envFor(cs: CocoonSet, pods: Pod[]): TestEnv {
  return newTestEnv([setSeed(cs), ...pods.map(podSeed)]);
}

/** vk-cocoon reports the VM failed: by its lifecycle annotation or by the pod phase. */
async function failPod(env: TestEnv, name: string, how: "lifecycle" | "phase"): Promise<void> {
  if (how === "lifecycle") {
    await env.fake.patch(Pods, TEST_NAMESPACE, name, "merge", {
      metadata: { annotations: { [ANNOTATION_LIFECYCLE_STATE]: LIFECYCLE_STATE_FAILED } },
    });
  } else {
    await env.fake.patch(Pods, TEST_NAMESPACE, name, "merge", { status: { phase: "Failed" } }, {
      subresource: "status",
    });
  }
}

/** The kubelet confirms every pending graceful delete. */
async function confirmDeletes(env: TestEnv): Promise<void> {
  for (const pod of (await env.fake.list(Pods, { namespace: TEST_NAMESPACE })).items) {
    if (!pod.metadata.deletionTimestamp) continue;
    await env.fake.delete(Pods, TEST_NAMESPACE, pod.metadata.name!, { gracePeriodSeconds: 0 });
  }
}

/** The requests a step made: the actions recorded after mark. */
function since(env: TestEnv, mark: number): FakeAction[] {
  return env.fake.actions.slice(mark);
}

function isHistoryWrite(a: FakeAction): boolean {
  return a.verb === "patch" && a.resource === CocoonSets && a.subresource === undefined;
}

function isPodDelete(a: FakeAction, name?: string): boolean {
  return a.verb === "delete" && a.resource === Pods && (name === undefined || a.name === name);
}

async function history(env: TestEnv, name: string): Promise<unknown> {
  const raw = (await getSet(env.fake, name)).metadata.annotations?.[ANNOTATION_REBUILD_HISTORY];
  return raw === undefined ? undefined : JSON.parse(raw);
}

/** The labels of a set's sub-agent counters. */
function setLabels(cocoonset: string): Record<string, string> {
  return { namespace: TEST_NAMESPACE, cocoonset };
}

const REBUILD_TOTAL = "cocoon_operator_subagent_rebuild_total";
const DEAD_LETTER_TOTAL = "cocoon_operator_subagent_dead_letter_total";

Deno.test("a failing sub-agent is rebuilt after 0, 1, 5 and 30 s, history first, then dead-lettered", async () => {
  const name = "rebuild-seq";
  const { cs, pods } = runningSet(name, 1, [1]);
  const env = envFor(cs, pods);
  const pod = `${name}-1`;
  const iso = rfc3339Nano;
  const t0 = env.clock.now();

  // Attempt 1: no backoff. The lifecycle signal alone counts, with the pod still Running.
  await failPod(env, pod, "lifecycle");
  let mark = env.fake.actions.length;
  assert.deepEqual(await reconcileSet(env, name), { requeue: true });
  const step = since(env, mark);
  const historyAt = step.findIndex(isHistoryWrite);
  const deleteAt = step.findIndex((a) => isPodDelete(a, pod));
  assert.ok(historyAt >= 0 && deleteAt >= 0, "history written and pod deleted");
  assert.ok(historyAt < deleteAt, "the history is persisted before the delete");
  assert.deepEqual(await history(env, name), { "1": { count: 1, lastDeleted: iso(t0) } });
  assert.equal(await counterValue(REBUILD_TOTAL, setLabels(name)), 1);
  assert.deepEqual(
    env.recorder.withReason(REASON_SUB_AGENT_REBUILDING).map((e) => [e.type, e.message]),
    [["Normal", "slot 1 attempt 1/4"]],
  );
  assert.equal(env.recorder.events[0].object.metadata.name, name, "Events are on the CocoonSet");

  // The old pod terminates; its slot is recreated under the same name, forked and bound.
  assert.ok((await getPod(env.fake, pod))?.metadata.deletionTimestamp);
  await confirmDeletes(env);
  assert.deepEqual(await reconcileSet(env, name), { requeue: true });
  const recreated = await getPod(env.fake, pod);
  assert.equal(recreated?.metadata.annotations?.[ANNOTATION_FORK_FROM], `vk-ns-${name}-0`);
  assert.equal(recreated?.spec?.nodeName, NODE);

  // Attempts 2..4, each failing as soon as the pod exists, wait 1 s, 5 s, 30 s after the
  // previous delete; meanwhile the pass requeues after what remains of the backoff.
  let lastDeleted = t0;
  for (const [attempt, backoff] of [[2, 1_000], [3, 5_000], [4, 30_000]]) {
    await failPod(env, pod, attempt % 2 === 0 ? "phase" : "lifecycle");
    const waited = env.clock.now() - lastDeleted;
    assert.deepEqual(await reconcileSet(env, name), { requeueAfter: backoff - waited });
    env.clock.advance(backoff - waited - 1);
    mark = env.fake.actions.length;
    assert.deepEqual(await reconcileSet(env, name), { requeueAfter: 1 }, `attempt ${attempt}`);
    assert.ok(!since(env, mark).some((a) => isPodDelete(a) || isHistoryWrite(a)));
    assert.equal((await getSet(env.fake, name)).status?.phase, "Scaling", "status is written");

    env.clock.advance(1);
    lastDeleted = env.clock.now();
    mark = env.fake.actions.length;
    assert.deepEqual(await reconcileSet(env, name), { requeue: true });
    const s = since(env, mark);
    assert.ok(s.findIndex(isHistoryWrite) < s.findIndex((a) => isPodDelete(a, pod)));
    assert.deepEqual(await history(env, name), {
      "1": { count: attempt, lastDeleted: iso(lastDeleted) },
    });
    assert.equal(await counterValue(REBUILD_TOTAL, setLabels(name)), attempt);
    await confirmDeletes(env);
    assert.deepEqual(await reconcileSet(env, name), { requeue: true }, "recreated");
  }
  assert.deepEqual(
    env.recorder.withReason(REASON_SUB_AGENT_REBUILDING).map((e) => e.message),
    ["slot 1 attempt 1/4", "slot 1 attempt 2/4", "slot 1 attempt 3/4", "slot 1 attempt 4/4"],
  );

  // The fifth failure: no wait, no delete; the pod is marked and left for a person.
  await failPod(env, pod, "phase");
  mark = env.fake.actions.length;
  assert.deepEqual(await reconcileSet(env, name), {});
  assert.ok(!since(env, mark).some((a) => isPodDelete(a) || isHistoryWrite(a)));
  const dead = await getPod(env.fake, pod);
  assert.equal(dead?.metadata.annotations?.[ANNOTATION_DEAD_LETTER], "true");
  assert.equal(dead?.metadata.deletionTimestamp, undefined);
  assert.deepEqual(
    env.recorder.withReason(REASON_SUB_AGENT_DEAD_LETTER).map((e) => [e.type, e.message]),
    [["Warning", `slot 1 exhausted 4 rebuilds; pod ${pod} left in dead-letter`]],
  );
  assert.equal(await counterValue(DEAD_LETTER_TOTAL, setLabels(name)), 1);
  assert.equal(await counterValue(REBUILD_TOTAL, setLabels(name)), 4);

  // While the spec is unchanged, later passes leave the pod alone and say nothing more.
  const eventsSoFar = env.recorder.events.length;
  for (let i = 0; i < 3; i++) {
    env.clock.advance(60_000);
    mark = env.fake.actions.length;
    assert.deepEqual(await reconcileSet(env, name), {});
    assert.ok(
      !since(env, mark).some((a) =>
        a.resource === Pods && a.name === pod && (a.verb === "patch" || a.verb === "delete")
      ),
    );
  }
  assert.equal(env.recorder.events.length, eventsSoFar);
  assert.equal(await counterValue(DEAD_LETTER_TOTAL, setLabels(name)), 1);
  const stored = await getSet(env.fake, name);
  assert.equal(stored.status?.phase, "Scaling");
  const progressing = stored.status?.conditions?.find((c) => c.type === CONDITION_TYPE_PROGRESSING);
  assert.equal(progressing?.status, "False");
  assert.equal(progressing?.reason, REASON_SUB_AGENT_DEAD_LETTER);
  assert.deepEqual(await history(env, name), {
    "1": { count: 4, lastDeleted: iso(lastDeleted) },
  });
});

Deno.test("the pass requeues after the shortest remaining backoff across slots", async () => {
  const name = "shortest";
  const now = Date.UTC(2026, 4, 14, 12);
  const { cs, pods } = runningSet(name, 3, [1, 2, 3], (c) => {
    c.metadata.annotations = {
      [ANNOTATION_REBUILD_HISTORY]: JSON.stringify({
        // count 1 → 1 s backoff, 200 ms spent; count 2 → 5 s backoff, 1 s spent.
        "1": { count: 1, lastDeleted: new Date(now - 200).toISOString() },
        "2": { count: 2, lastDeleted: new Date(now - 1_000).toISOString() },
      }),
    };
  });
  const env = newTestEnv([setSeed(cs), ...pods.map(podSeed)], now);
  await failPod(env, `${name}-1`, "phase");
  await failPod(env, `${name}-2`, "lifecycle");
  assert.deepEqual(await reconcileSet(env, name), { requeueAfter: 800 });
  assert.equal(env.recorder.events.length, 0);
  env.clock.advance(800);
  assert.deepEqual(await reconcileSet(env, name), { requeue: true });
  assert.deepEqual(
    env.recorder.events.map((e) => e.message),
    ["slot 1 attempt 2/4"],
    "slot 2 is still waiting",
  );
  await confirmDeletes(env);
  assert.deepEqual(await reconcileSet(env, name), { requeue: true }, "slot 1 recreated");
  assert.deepEqual(await reconcileSet(env, name), { requeueAfter: 3_200 });
});

/**
 * A set whose agent spec was edited after slot 1 was dead-lettered: the main already runs the
 * new spec (it is recreated first), slot 1 still runs the old one.
 */
function deadLetteredAfterEdit(name: string, replicas: number, historyJSON: string) {
  const old = newCocoonSet(name, (c) => {
    c.metadata.generation = 1;
    c.spec.agent.replicas = replicas;
  });
  const cs = newCocoonSet(name, (c) => {
    c.metadata.generation = 2;
    c.spec.agent.replicas = replicas;
    c.spec.agent.image = "ghcr.io/cocoonstack/cocoon/ubuntu:26.04";
    c.metadata.annotations = { [ANNOTATION_REBUILD_HISTORY]: historyJSON };
  });
  const dead = livePod(buildAgentPod(old, 1, `vk-ns-${name}-0`, NODE), NODE);
  dead.metadata.annotations![ANNOTATION_DEAD_LETTER] = "true";
  dead.metadata.annotations![ANNOTATION_LIFECYCLE_STATE] = LIFECYCLE_STATE_FAILED;
  const pods = [livePod(buildAgentPod(cs, 0), NODE), dead];
  for (let slot = 2; slot <= replicas; slot++) {
    pods.push(livePod(buildAgentPod(cs, slot, `vk-ns-${name}-0`, NODE), NODE));
  }
  return { cs, pods };
}

Deno.test("a spec edit lifts the dead letter and gives the slot a fresh budget", async () => {
  const name = "lifted";
  const stamp = "2026-05-13T00:00:00Z";
  const { cs, pods } = deadLetteredAfterEdit(
    name,
    2,
    JSON.stringify({
      "1": { count: 4, lastDeleted: stamp },
      "2": { count: 1, lastDeleted: stamp },
    }),
  );
  const env = envFor(cs, pods);
  const pod = `${name}-1`;
  const mark = env.fake.actions.length;
  assert.deepEqual(await reconcileSet(env, name), { requeue: true });
  const step = since(env, mark);
  assert.ok(step.findIndex(isHistoryWrite) < step.findIndex((a) => isPodDelete(a, pod)));
  assert.deepEqual(await history(env, name), { "2": { count: 1, lastDeleted: stamp } });
  assert.equal(env.recorder.events.length, 0, "lifting the dead letter is not announced");
  assert.equal(await counterValue(REBUILD_TOTAL, setLabels(name)), 0);

  await confirmDeletes(env);
  assert.deepEqual(await reconcileSet(env, name), { requeue: true });
  const fresh = await getPod(env.fake, pod);
  assert.equal(fresh?.metadata.annotations?.[ANNOTATION_DEAD_LETTER], undefined);
  assert.equal(
    fresh?.metadata.annotations?.["cocoonset.cocoonstack.io/image"],
    cs.spec.agent.image,
  );

  // The next failure is the first of a new budget: rebuilt at once.
  await failPod(env, pod, "phase");
  assert.deepEqual(await reconcileSet(env, name), { requeue: true });
  assert.deepEqual(env.recorder.events.map((e) => e.message), ["slot 1 attempt 1/4"]);
  assert.equal((await history(env, name) as Record<string, { count: number }>)["1"].count, 1);
});

Deno.test("lifting the only dead letter removes the history annotation instead of writing {}", async () => {
  const name = "lifted-only";
  const { cs, pods } = deadLetteredAfterEdit(
    name,
    1,
    JSON.stringify({ "1": { count: 4, lastDeleted: "2026-05-13T00:00:00Z" } }),
  );
  const env = envFor(cs, pods);
  const mark = env.fake.actions.length;
  assert.deepEqual(await reconcileSet(env, name), { requeue: true });
  const write = since(env, mark).find(isHistoryWrite);
  assert.deepEqual(write?.patch, {
    metadata: { annotations: { [ANNOTATION_REBUILD_HISTORY]: null } },
  });
  const stored = await getSet(env.fake, name);
  assert.equal(ANNOTATION_REBUILD_HISTORY in (stored.metadata.annotations ?? {}), false);
  assert.ok((await getPod(env.fake, `${name}-1`))?.metadata.deletionTimestamp);
});

Deno.test("a dead-lettered pod whose spec still matches is left alone even without history", async () => {
  const name = "still-dead";
  const { cs, pods } = runningSet(name, 1, [1]);
  pods[1].metadata.annotations![ANNOTATION_DEAD_LETTER] = "true";
  pods[1].status = { phase: "Failed" };
  const env = envFor(cs, pods);
  assert.deepEqual(await reconcileSet(env, name), {});
  assert.ok(!env.fake.actions.some((a) => isPodDelete(a) || isHistoryWrite(a)));
  assert.equal(env.recorder.events.length, 0);
});

Deno.test("scale-down deletes extra slots in ascending order and prunes history on the next write", async () => {
  const name = "scale-down";
  const t = Date.UTC(2026, 4, 14);
  const old = new Date(t - 60_000).toISOString();
  const extra = [2, 3, 4, 5, 6, 7, 8, 9, 10, 11];
  const { cs, pods } = runningSet(name, 1, [1, ...extra], (c) => {
    c.metadata.annotations = {
      [ANNOTATION_REBUILD_HISTORY]: JSON.stringify({
        "1": { count: 1, lastDeleted: old },
        "3": { count: 4, lastDeleted: old },
      }),
    };
  });
  // Slot 3 is dead-lettered: it goes like any other extra slot.
  const three = pods.find((p) => p.metadata.name === `${name}-3`)!;
  three.metadata.annotations![ANNOTATION_DEAD_LETTER] = "true";
  three.status = { ...three.status, phase: "Failed" };
  const env = newTestEnv([setSeed(cs), ...pods.map(podSeed)], t);
  const before = (await getSet(env.fake, name)).metadata.annotations?.[ANNOTATION_REBUILD_HISTORY];

  const mark = env.fake.actions.length;
  assert.deepEqual(await reconcileSet(env, name), { requeue: true });
  const step = since(env, mark);
  // By slot number: the names alone would sort 10 and 11 before 2.
  assert.deepEqual(
    step.filter((a) => isPodDelete(a)).map((a) => a.name),
    extra.map((slot) => `${name}-${slot}`),
  );
  assert.ok(!step.some(isHistoryWrite), "scaling down alone does not rewrite the history");
  assert.equal(
    (await getSet(env.fake, name)).metadata.annotations?.[ANNOTATION_REBUILD_HISTORY],
    before,
  );
  assert.equal(env.recorder.events.length, 0);
  await confirmDeletes(env);
  assert.deepEqual(
    (await env.fake.list(Pods, { namespace: TEST_NAMESPACE })).items.map((p) => p.metadata.name),
    [`${name}-0`, `${name}-1`],
  );

  // The next history write drops slot 3.
  await failPod(env, `${name}-1`, "phase");
  assert.deepEqual(await reconcileSet(env, name), { requeue: true });
  assert.deepEqual(await history(env, name), {
    "1": { count: 2, lastDeleted: rfc3339Nano(t) },
  });
});

Deno.test("missing sub-agents are created at most eight at a time", async () => {
  const name = "fan-out";
  const replicas = 20;
  const { cs, pods } = runningSet(name, replicas, []);
  const env = envFor(cs, pods);
  let inFlight = 0;
  let maxInFlight = 0;
  let started = 0;
  let hold = true;
  const held: (() => void)[] = [];
  env.fake.addReactor(async (a) => {
    // Real creates only: the spec's dry run before the first create is not a sub-agent.
    if (a.verb !== "create" || a.resource !== Pods || a.dryRun) return undefined;
    started++;
    inFlight++;
    maxInFlight = Math.max(maxInFlight, inFlight);
    if (hold) await new Promise<void>((resolve) => held.push(resolve));
    inFlight--;
    return undefined;
  });

  const pass = reconcileSet(env, name);
  await waitFor("the first creates to be held", () => started >= SUB_AGENT_CREATE_CONCURRENCY);
  await flushMicrotasks(100);
  assert.equal(started, SUB_AGENT_CREATE_CONCURRENCY, "no create starts while eight are in flight");
  held.shift()!();
  await waitFor(
    "a create to take the freed place",
    () => started >= SUB_AGENT_CREATE_CONCURRENCY + 1,
  );
  await flushMicrotasks(100);
  assert.equal(started, SUB_AGENT_CREATE_CONCURRENCY + 1);
  hold = false;
  for (const release of held.splice(0)) release();
  assert.deepEqual(await pass, { requeue: true });

  assert.equal(started, replicas);
  assert.equal(maxInFlight, SUB_AGENT_CREATE_CONCURRENCY);
  const names = (await env.fake.list(Pods, { namespace: TEST_NAMESPACE })).items
    .map((p) => p.metadata.name);
  assert.equal(names.length, replicas + 1);
  for (let slot = 1; slot <= replicas; slot++) assert.ok(names.includes(`${name}-${slot}`));
});

Deno.test("a sub-agent create that meets the old, still terminating pod is skipped silently", async () => {
  const name = "exists";
  const { cs, pods } = runningSet(name, 2, [1]);
  // Slot 1's old pod is on its way out (a finalizer holds it), so it is not counted as the slot.
  pods[1].metadata.finalizers = ["example.com/hold"];
  pods[1].metadata.deletionTimestamp = "2026-05-14T00:00:00Z";
  const env = envFor(cs, pods);
  const oldUid = (await getPod(env.fake, `${name}-1`))?.metadata.uid;

  assert.deepEqual(await reconcileSet(env, name), { requeue: true }, "slot 2 was created");
  const creates = env.fake.actions.filter((a) =>
    a.verb === "create" && a.resource === Pods && !a.dryRun
  );
  assert.deepEqual(creates.map((a) => a.name).sort(), [`${name}-1`, `${name}-2`]);
  assert.equal((await getPod(env.fake, `${name}-1`))?.metadata.uid, oldUid, "old pod untouched");
  assert.ok(await getPod(env.fake, `${name}-2`));
  assert.equal(env.recorder.events.length, 0);
});

Deno.test("when the only missing slot's create meets its old pod, the pass settles without error", async () => {
  const name = "exists-only";
  const { cs, pods } = runningSet(name, 1, [1]);
  pods[1].metadata.finalizers = ["example.com/hold"];
  pods[1].metadata.deletionTimestamp = "2026-05-14T00:00:00Z";
  const env = envFor(cs, pods);
  // Its delete event brings the set back; nothing to requeue for.
  assert.deepEqual(await reconcileSet(env, name), {});
  assert.equal(env.recorder.events.length, 0);
  assert.equal((await getSet(env.fake, name)).status?.phase, "Scaling");
});

Deno.test("a failed sub-agent create fails the pass before extra slots, toolboxes and the status", async () => {
  const name = "create-fails";
  const { cs, pods } = runningSet(name, 3, [1, 5], (c) => {
    c.spec.toolboxes = [{ name: "tb", image: "img" }];
  });
  const env = envFor(cs, pods);
  env.fake.addReactor((a) =>
    a.verb === "create" && a.resource === Pods && a.name === `${name}-2` && !a.dryRun
      ? newApiError(500, "InternalError", { resource: "pods", name: a.name }, "etcd timeout")
      : undefined
  );

  await assert.rejects(reconcileSet(env, name), /create sub-agent slot 2.*etcd timeout/);

  assert.ok(!env.fake.actions.some((a) => isPodDelete(a)), "the extra slot 5 is kept");
  assert.equal(await getPod(env.fake, `${name}-tb`), undefined, "toolboxes are not reached");
  assert.ok(!env.fake.actions.some((a) => a.subresource === "status"), "no status write");
});

Deno.test("a sub-agent rebuilt while a toolbox is refused: the next pass's status names the refused toolbox", async () => {
  const { cs, pods } = runningSet("rv", 1, [1], (c) => {
    c.spec.toolboxes = [{ name: "bad", image: "img" }];
  });
  const env = envFor(cs, pods);
  refuseCreates(env, "rv-bad", "invalid");
  await failPod(env, "rv-1", "phase");

  assert.deepEqual(await reconcileSet(env, "rv"), { requeue: true }, "deleted for its rebuild");
  assert.ok((await getSet(env.fake, "rv")).metadata.annotations?.[ANNOTATION_REBUILD_HISTORY]);
  await confirmDeletes(env);
  assert.deepEqual(await reconcileSet(env, "rv"), { requeue: true }, "recreated");
  await env.fake.seed(Pods, livePod((await getPod(env.fake, "rv-1"))!, NODE));

  await assert.rejects(reconcileSet(env, "rv"), InvalidSpecError);
  const ready = conditionOf(await getSet(env.fake, "rv"), "Ready");
  assert.equal(ready?.reason, REASON_INVALID_SPEC);
  assert.match(ready?.message ?? "", /^toolbox bad: /);
});

Deno.test("a rebuild-history write does not paper over a status another writer changed: that status write is still refused", async () => {
  const { cs, pods } = runningSet("rv2", 1, [1]);
  const env = envFor(cs, pods);
  await failPod(env, "rv2-1", "phase");
  const stored = await getSet(env.fake, "rv2");
  const live = (await env.fake.list(Pods, { namespace: TEST_NAMESPACE })).items;
  const pass = newTestPass(env.reconciler.deps, stored, live);
  // Another pass (or process) wrote a status after this pass read the set.
  await env.fake.patch(CocoonSets, TEST_NAMESPACE, "rv2", "merge", {
    status: { phase: "Suspending" },
  }, { subresource: "status" });

  await ensureSubAgents(pass, "vk-ns-rv2-0", NODE);
  await assert.rejects(writeSetStatus(pass, ""), (err) => isConflict(err));
});

Deno.test("a pass whose cache still shows the pod before its dead-letter mark does not dead-letter it again", async () => {
  const name = "dead-once";
  const { cs, pods } = runningSet(name, 1, [1], (c) => {
    c.metadata.annotations = {
      [ANNOTATION_REBUILD_HISTORY]: JSON.stringify({
        "1": { count: 4, lastDeleted: "2026-05-13T00:00:00Z" },
      }),
    };
  });
  const env = envFor(cs, pods);
  const pod = `${name}-1`;
  await failPod(env, pod, "phase");
  // What the cache keeps showing after the first pass: the failed pod, not yet marked.
  const beforeMark = (await env.fake.list(Pods, { namespace: TEST_NAMESPACE })).items;
  assert.deepEqual(await reconcileSet(env, name), {});
  assert.equal(
    (await getPod(env.fake, pod))?.metadata.annotations?.[ANNOTATION_DEAD_LETTER],
    "true",
  );

  const lagging = reconcilerWith(env, laggingCache(env.fake, { pods: beforeMark }));
  const mark = env.fake.actions.length;
  assert.deepEqual(
    await lagging.reconcile({ namespace: TEST_NAMESPACE, name }, new AbortController().signal),
    {},
  );
  const step = since(env, mark);
  assert.ok(!step.some((a) => a.resource === Pods && (a.verb === "patch" || a.verb === "delete")));
  assert.deepEqual(
    env.recorder.withReason(REASON_SUB_AGENT_DEAD_LETTER).map((e) => e.message),
    [`slot 1 exhausted 4 rebuilds; pod ${pod} left in dead-letter`],
  );
  assert.equal(await counterValue(DEAD_LETTER_TOTAL, setLabels(name)), 1);
  const progressing = conditionOf(await getSet(env.fake, name), CONDITION_TYPE_PROGRESSING);
  assert.equal(progressing?.reason, REASON_SUB_AGENT_DEAD_LETTER, "the status still reports it");
  assert.ok(
    step.some((a) => a.verb === "get" && a.resource === Pods && a.name === pod),
    "the pod is read past the cache before it is marked",
  );
});

Deno.test("a pass whose cache still shows a failed pod the slot has since replaced marks nothing", async () => {
  const name = "dead-replaced";
  const { cs, pods } = runningSet(name, 1, [1], (c) => {
    c.metadata.annotations = {
      [ANNOTATION_REBUILD_HISTORY]: JSON.stringify({
        "1": { count: 4, lastDeleted: "2026-05-13T00:00:00Z" },
      }),
    };
  });
  const env = envFor(cs, pods);
  const pod = `${name}-1`;
  await failPod(env, pod, "phase");
  // What the cache still shows: the failed pod. Stored: a new pod of the slot, running.
  const failed = (await env.fake.list(Pods, { namespace: TEST_NAMESPACE })).items;
  await env.fake.delete(Pods, TEST_NAMESPACE, pod, { gracePeriodSeconds: 0 });
  env.fake.seed(Pods, livePod(buildAgentPod(cs, 1, `vk-ns-${name}-0`, NODE), NODE));

  const lagging = reconcilerWith(env, laggingCache(env.fake, { pods: failed }));
  const mark = env.fake.actions.length;
  await lagging.reconcile({ namespace: TEST_NAMESPACE, name }, new AbortController().signal);
  assert.ok(!since(env, mark).some((a) => a.resource === Pods && a.verb === "patch"));
  assert.equal(
    (await getPod(env.fake, pod))?.metadata.annotations?.[ANNOTATION_DEAD_LETTER],
    undefined,
  );
  assert.deepEqual(env.recorder.withReason(REASON_SUB_AGENT_DEAD_LETTER), []);
  assert.equal(await counterValue(DEAD_LETTER_TOTAL, setLabels(name)), 0);
});

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
