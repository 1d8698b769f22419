import assert from "node:assert/strict";
import { isConflict, updateStatusLocked } from "../kube/mod.ts";
import type { Pod } from "../kube/mod.ts";
import type { FakeClient } from "../kube/testing/mod.ts";
import type { CocoonSet, CocoonSetStatus } from "../common/apis/v1/cocoonset_types.ts";
import {
  CONDITION_TYPE_PROGRESSING,
  REASON_AGENTS_NOT_READY,
  REASON_ALL_AGENTS_READY,
  REASON_RECONCILING,
  REASON_STABLE,
} from "../common/apis/v1/conditions.ts";
import { type CocoonSetPhase, TOOLBOX_MODE_STATIC } from "../common/apis/v1/enums.ts";
import { CocoonSets } from "../common/apis/v1/resources.ts";
import { type Condition, CONDITION_TYPE_READY } from "../common/k8s/condition.ts";
import { applyVMRuntime, ROLE_MAIN } from "../common/meta/mod.ts";
import {
  getSet,
  newCocoonSet,
  newTestEnv,
  readyPod,
  setSeed,
  TEST_NAMESPACE,
  withReplicas,
} from "./_test_support.ts";
import { buildAgentPod, buildToolboxPod, classifyPods } from "./pods.ts";
import {
  agentStatusFromPod,
  buildConditions,
  buildStatus,
  mergeConditions,
  REASON_FAILED,
  statusEqual,
  toolboxStatusFromPod,
} from "./status.ts";

/** The status write of a pass that computed next from its copy cs (writeSetStatus's steps). */
function writeStatus(
  fake: FakeClient,
  cs: CocoonSet,
  next: CocoonSetStatus,
  now: () => Date,
): Promise<boolean> {
  return updateStatusLocked({
    client: fake,
    rt: CocoonSets,
    obj: cs,
    status: mergeConditions(cs.status, next, now),
    equal: statusEqual,
    written: new Map(),
    signal: undefined,
  });
}

const T0 = "2026-05-14T00:00:00Z";

Deno.test("mergeConditions keeps other types and the time of an unflipped condition, stamps a flip", () => {
  const cond = (type: string, status: string, lastTransitionTime = "") =>
    ({ type, status, reason: "R", message: "m", lastTransitionTime }) as Condition;
  const stored: CocoonSetStatus = {
    phase: "Running",
    conditions: [
      cond("Ready", "True", T0),
      cond("Progressing", "False", T0),
      cond("X", "True", T0),
    ],
  };
  const next: CocoonSetStatus = {
    phase: "Scaling",
    conditions: [cond("Ready", "True"), cond("Progressing", "True")],
  };
  const later = () => new Date(Date.UTC(2026, 4, 15));

  const got = mergeConditions(stored, next, later);

  assert.equal(got.phase, "Scaling");
  const byType = new Map(got.conditions?.map((c) => [c.type, c]));
  assert.equal(byType.get("Ready")?.lastTransitionTime, T0, "unflipped: stored time kept");
  assert.equal(byType.get("Progressing")?.status, "True");
  assert.notEqual(byType.get("Progressing")?.lastTransitionTime, T0, "flipped: stamped now");
  assert.equal(byType.get("X")?.lastTransitionTime, T0, "another type is kept");
  assert.equal(stored.conditions?.[1].status, "False", "the stored copy is not changed");
  assert.equal(mergeConditions(undefined, { phase: "Pending" }, later).conditions, undefined);
});

function condition(conds: readonly Condition[] | undefined, type: string): Condition {
  const c = conds?.find((c) => c.type === type);
  assert.ok(c, `condition ${type} present`);
  return c;
}

const counts = (ready: number, desired: number, tbReady = 0, tbDesired = 0) => ({
  ready,
  desired,
  tbReady,
  tbDesired,
});

// ---- phase derivation and counts ----

Deno.test("a set without a main is Pending", () => {
  const cs = newCocoonSet("demo", withReplicas(1));
  assert.equal(buildStatus(cs, classifyPods([])).phase, "Pending");
});

Deno.test("a set whose sub-agents are missing is Scaling", () => {
  const cs = newCocoonSet("demo", withReplicas(1));
  const main = readyPod(buildAgentPod(cs, 0));
  assert.equal(buildStatus(cs, classifyPods([main])).phase, "Scaling");
});

Deno.test("a set with every agent Ready is Running", () => {
  const cs = newCocoonSet("demo");
  const main = readyPod(buildAgentPod(cs, 0));
  assert.equal(buildStatus(cs, classifyPods([main])).phase, "Running");
});

Deno.test("the status lists each agent, counts the Ready ones and names the fork source", () => {
  const cs = newCocoonSet("demo", withReplicas(2));
  const main = readyPod(buildAgentPod(cs, 0));
  const sub1 = readyPod(buildAgentPod(cs, 1, "vk-ns-demo-0"));
  const status = buildStatus(cs, classifyPods([sub1, main]));
  assert.equal(status.desiredAgents, 3);
  assert.equal(status.readyAgents, 2);
  assert.equal(status.agents?.length, 2);
  assert.deepEqual(status.agents?.map((a) => a.slot), [0, 1]);
  assert.equal(status.agents?.[1].forkedFrom, "vk-ns-demo-0");
  assert.equal(status.agents?.[0].forkedFrom, undefined, "the main forks from nothing");
});

Deno.test("two builds of the same observation are equal; stored timestamps survive a write", async () => {
  const cs = newCocoonSet("demo");
  const a = buildStatus(cs, classifyPods([]), "Pending");
  const b = buildStatus(cs, classifyPods([]), "Pending");
  assert.ok(statusEqual(a, b));

  // The built conditions carry no timestamp; the stored ones keep theirs, so rewriting the same
  // observation later is no write at all.
  const { fake, clock } = newTestEnv([setSeed(cs)]);
  const stored = await getSet(fake, "demo");
  assert.ok(await writeStatus(fake, stored, a, () => new Date(clock.now())));
  const firstTimes = stored.status?.conditions?.map((c) => c.lastTransitionTime);
  assert.ok(firstTimes?.every((t) => t !== ""));
  clock.advance(60_000);
  const patchesBefore = fake.actions.filter((x) => x.verb === "patch").length;
  assert.equal(await writeStatus(fake, stored, b, () => new Date(clock.now())), false);
  assert.equal(fake.actions.filter((x) => x.verb === "patch").length, patchesBefore);
  assert.deepEqual(
    (await getSet(fake, "demo")).status?.conditions?.map((c) => c.lastTransitionTime),
    firstTimes,
  );
});

Deno.test("a phase change makes two statuses differ", () => {
  const cs = newCocoonSet("demo");
  const a = buildStatus(cs, classifyPods([]), "Pending");
  const b = buildStatus(cs, classifyPods([]), "Running");
  assert.equal(statusEqual(a, b), false);
});

Deno.test("a counter change alone makes two statuses differ; an absent counter reads as zero", () => {
  const cs = newCocoonSet("demo");
  const a = buildStatus(cs, classifyPods([]), "Pending");
  for (
    const key of ["readyAgents", "desiredAgents", "readyToolboxes", "desiredToolboxes"] as const
  ) {
    assert.equal(statusEqual(a, { ...a, [key]: (a[key] ?? 0) + 1 }), false, key);
  }
  const { readyAgents: _r, ...withoutReady } = a;
  assert.equal(a.readyAgents, 0);
  assert.ok(statusEqual(a, withoutReady));
});

Deno.test("an agent's status entry reads VM name, id, IP and phase from the pod", () => {
  const pod = buildAgentPod(newCocoonSet("demo"), 0);
  pod.status = { phase: "Running" };
  applyVMRuntime({ vmID: "qemu-1", ip: "10.0.0.1", vncPort: 0 }, pod);
  const st = agentStatusFromPod(pod, 0, ROLE_MAIN, "");
  assert.deepEqual(st, {
    slot: 0,
    role: ROLE_MAIN,
    podName: "demo-0",
    vmName: "vk-ns-demo-0",
    vmID: "qemu-1",
    ip: "10.0.0.1",
    phase: "Running",
  });
});

Deno.test("Ready is True when every agent is Ready and there are no toolboxes", () => {
  const ready = condition(buildConditions(1, counts(1, 1), "Running"), CONDITION_TYPE_READY);
  assert.equal(ready.status, "True");
  assert.equal(ready.reason, REASON_ALL_AGENTS_READY);
  assert.equal(ready.message, "1/1 agents ready, 0/0 toolboxes ready");
});

Deno.test("Ready is False while a toolbox is not Ready", () => {
  const ready = condition(buildConditions(1, counts(1, 1, 0, 1), "Scaling"), CONDITION_TYPE_READY);
  assert.equal(ready.status, "False");
  assert.equal(ready.reason, REASON_AGENTS_NOT_READY);
});

Deno.test("a set with a pending toolbox is Scaling and counts it desired but not ready", () => {
  const cs = newCocoonSet("demo", (c) => {
    c.spec.toolboxes = [{ name: "tb", image: "ghcr.io/cocoonstack/cocoon/toolbox:latest" }];
  });
  const main = readyPod(buildAgentPod(cs, 0));
  const tb = buildToolboxPod(cs, cs.spec.toolboxes![0]);
  tb.status = { phase: "Pending" };
  const status = buildStatus(cs, classifyPods([main, tb]));
  assert.equal(status.phase, "Scaling");
  assert.equal(status.desiredToolboxes, 1);
  assert.equal(status.readyToolboxes, 0);
  assert.deepEqual(status.toolboxes?.map((t) => t.name), ["tb"]);
});

// ---- our deliberate differences from Go ----

Deno.test("Progressing is True exactly while the set moves toward its spec", () => {
  const moving: CocoonSetPhase[] = ["Pending", "Scaling", "Suspending", "Waking", "Migrating"];
  for (const phase of moving) {
    const p = condition(buildConditions(1, counts(0, 1), phase), CONDITION_TYPE_PROGRESSING);
    assert.deepEqual([p.status, p.reason, p.message], ["True", REASON_RECONCILING, phase], phase);
  }
  for (const phase of ["Running", "Suspended"] as CocoonSetPhase[]) {
    const p = condition(buildConditions(1, counts(1, 1), phase), CONDITION_TYPE_PROGRESSING);
    assert.deepEqual([p.status, p.reason, p.message], ["False", REASON_STABLE, phase], phase);
  }
});

Deno.test("a Failed set has Progressing False/Failed, and the failure's problem turns Ready False", () => {
  const problem = {
    condition: CONDITION_TYPE_READY,
    reason: "PodLifecycleFailed",
    message: "main pod ns/demo-0: hibernate push failed",
  } as const;
  const conds = buildConditions(3, counts(1, 1), "Failed", [problem]);
  const ready = condition(conds, CONDITION_TYPE_READY);
  assert.deepEqual([ready.status, ready.reason, ready.message], [
    "False",
    problem.reason,
    problem.message,
  ]);
  assert.equal(ready.observedGeneration, 3);
  const p = condition(conds, CONDITION_TYPE_PROGRESSING);
  assert.deepEqual([p.status, p.reason], ["False", REASON_FAILED]);
});

Deno.test("a Progressing problem (dead-lettered sub-agents) turns a Scaling set's Progressing False", () => {
  const problem = {
    condition: CONDITION_TYPE_PROGRESSING,
    reason: "SubAgentDeadLetter",
    message: "sub-agent slots 1 exhausted 4 rebuilds; edit the agent spec to retry them",
  } as const;
  const conds = buildConditions(1, counts(1, 2), "Scaling", [problem]);
  const p = condition(conds, CONDITION_TYPE_PROGRESSING);
  assert.deepEqual([p.status, p.reason, p.message], ["False", problem.reason, problem.message]);
  // Ready still reports the counts.
  assert.equal(condition(conds, CONDITION_TYPE_READY).reason, REASON_AGENTS_NOT_READY);
});

Deno.test("the status write carries the four counters even when they are zero", async () => {
  const cs = newCocoonSet("demo");
  const { fake, clock } = newTestEnv([setSeed(cs)]);
  const stored = await getSet(fake, "demo");
  const status = buildStatus(stored, classifyPods([]), "Pending");
  assert.ok(await writeStatus(fake, stored, status, () => new Date(clock.now())));
  const patch = fake.actions.find((a) => a.verb === "patch" && a.subresource === "status");
  assert.ok(patch, "a status patch was sent");
  assert.equal(patch.resource, CocoonSets);
  assert.equal(patch.namespace, TEST_NAMESPACE);
  const body = patch.patch as { status: Record<string, unknown> };
  assert.equal(body.status.readyAgents, 0);
  assert.equal(body.status.readyToolboxes, 0);
  assert.equal(body.status.desiredToolboxes, 0);
  assert.equal(body.status.desiredAgents, 1);
  const got = await getSet(fake, "demo");
  assert.equal(got.status?.readyAgents, 0);
  assert.equal(got.status?.phase, "Pending");
  assert.equal(got.metadata.generation, 1, "a status write leaves the generation alone");
});

Deno.test("a status computed from a stale copy is refused, never merged into a torn status", async () => {
  // Seen on the real API server: a pass read the set while it was Suspended at generation 2; an
  // earlier pass of generation 3 had already written Suspending. A merge patch computed against
  // the stale copy leaves out the phase (unchanged in that copy) and writes the conditions, so
  // the stored status read "phase Suspending, Progressing False: Suspended" for good.
  const cs = newCocoonSet("demo");
  cs.metadata.generation = 3;
  cs.status = buildStatus(
    { ...cs, metadata: { ...cs.metadata, generation: 2 } },
    classifyPods([]),
    "Suspended",
  );
  const { fake, clock } = newTestEnv([setSeed(cs)]);
  const now = () => new Date(clock.now());
  const stale = await getSet(fake, "demo");
  const fresh = await getSet(fake, "demo");
  assert.ok(
    await writeStatus(fake, fresh, buildStatus(fresh, classifyPods([]), "Suspending"), now),
  );

  const err = await writeStatus(fake, stale, buildStatus(stale, classifyPods([]), "Suspended"), now)
    .then(() => undefined, (e: unknown) => e);
  assert.ok(isConflict(err), `the stale write is refused with Conflict, got ${err}`);
  const got = await getSet(fake, "demo");
  const progressing = got.status?.conditions?.find((c) => c.type === CONDITION_TYPE_PROGRESSING);
  assert.deepEqual([got.status?.phase, progressing?.message, progressing?.status], [
    "Suspending",
    "Suspending",
    "True",
  ], "phase and conditions come from one pass");
});

Deno.test("a status that equals the stored one up to empty fields is not written", async () => {
  const cs = newCocoonSet("demo");
  cs.status = {
    observedGeneration: 1,
    phase: "Pending",
    desiredAgents: 1,
    agents: [],
    conditions: buildConditions(1, counts(0, 1), "Pending").map((c) => ({
      ...c,
      lastTransitionTime: "2026-05-14T00:00:00Z",
    })),
  };
  const { fake, clock } = newTestEnv([setSeed(cs)]);
  const stored = await getSet(fake, "demo");
  const next = buildStatus(stored, classifyPods([]), "Pending");
  assert.equal(await writeStatus(fake, stored, next, () => new Date(clock.now())), false);
  assert.equal(fake.actions.filter((a) => a.verb === "patch").length, 0);
});

Deno.test("a flipped condition gets a new transition time; the unflipped one keeps its own", async () => {
  const cs = newCocoonSet("demo");
  const { fake, clock } = newTestEnv([setSeed(cs)]);
  const stored = await getSet(fake, "demo");
  const now = () => new Date(clock.now());
  await writeStatus(fake, stored, buildStatus(stored, classifyPods([]), "Pending"), now);
  const t0 = condition(stored.status?.conditions, CONDITION_TYPE_READY).lastTransitionTime;
  const p0 = condition(stored.status?.conditions, CONDITION_TYPE_PROGRESSING).lastTransitionTime;

  clock.advance(5 * 60_000);
  const main = readyPod(buildAgentPod(stored, 0));
  await writeStatus(fake, stored, buildStatus(stored, classifyPods([main])), now);
  const got = (await getSet(fake, "demo")).status;
  assert.equal(got?.phase, "Running");
  const ready = condition(got?.conditions, CONDITION_TYPE_READY);
  assert.equal(ready.status, "True");
  assert.notEqual(ready.lastTransitionTime, t0);
  assert.equal(Date.parse(ready.lastTransitionTime), clock.now());
  const progressing = condition(got?.conditions, CONDITION_TYPE_PROGRESSING);
  assert.equal(progressing.status, "False", "Running is settled");
  assert.notEqual(progressing.lastTransitionTime, p0);

  // The same observation a minute later keeps both timestamps.
  clock.advance(60_000);
  const before = got?.conditions?.map((c) => c.lastTransitionTime);
  await writeStatus(fake, stored, buildStatus(stored, classifyPods([main])), now);
  assert.deepEqual(
    (await getSet(fake, "demo")).status?.conditions?.map((c) => c.lastTransitionTime),
    before,
  );
});

Deno.test("a static toolbox's status entry infers VNC from its port", () => {
  const cs = newCocoonSet("demo");
  const pod: Pod = buildToolboxPod(cs, {
    name: "tb",
    mode: TOOLBOX_MODE_STATIC,
    staticVMID: "qemu-1",
    staticIP: "10.0.0.1",
    vncPort: 5901,
  });
  pod.status = { phase: "Running" };
  assert.deepEqual(toolboxStatusFromPod(pod, "tb"), {
    name: "tb",
    podName: "demo-tb",
    vmName: "vk-ns-demo-tb",
    vmID: "qemu-1",
    ip: "10.0.0.1",
    phase: "Running",
    connType: "vnc",
    vncPort: 5901,
  });
});
