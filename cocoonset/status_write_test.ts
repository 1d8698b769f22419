/** The jobs of a status write, each on its own (status_write.ts). */
import assert from "node:assert/strict";
import { isConflict } from "../kube/mod.ts";
import type { FakeClient } from "../kube/testing/mod.ts";
import type { CocoonSetStatus } from "../common/apis/v1/cocoonset_types.ts";
import { CocoonSets } from "../common/apis/v1/resources.ts";
import type { Condition } from "../common/k8s/condition.ts";
import { getSet, newCocoonSet, newTestEnv, setSeed } from "./_test_support.ts";
import {
  confirmCopyCurrent,
  copyBehindOwnWrite,
  decisionInputs,
  MAX_STATUS_WRITE_RETRIES,
  mergeConditions,
  rememberWritten,
  sameDecisionInputs,
  writeStatus,
  type WrittenStatuses,
} from "./status_write.ts";
import { buildStatus } from "./status.ts";
import { classifyPods } from "./pods.ts";

const T0 = "2026-05-14T00:00:00Z";
const later = () => new Date(Date.UTC(2026, 4, 15));

function cond(type: string, status: string, lastTransitionTime = ""): Condition {
  return { type, status, reason: "R", message: "m", lastTransitionTime } as Condition;
}

Deno.test("mergeConditions keeps other types and the time of an unflipped condition, stamps a flip", () => {
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

Deno.test("copyBehindOwnWrite: only a remembered write that differs makes an equal copy suspect", () => {
  const written: WrittenStatuses = new Map();
  const running: CocoonSetStatus = { phase: "Running" };
  assert.equal(copyBehindOwnWrite(undefined, "u", running), false, "no cache");
  assert.equal(copyBehindOwnWrite(written, "u", running), false, "nothing written yet");
  rememberWritten(written, "u", running);
  running.phase = "Failed";
  assert.equal(written.get("u")?.phase, "Running", "remembered as a copy");
  assert.equal(copyBehindOwnWrite(written, "u", { phase: "Running" }), false, "the same write");
  assert.equal(copyBehindOwnWrite(written, "u", { phase: "Suspending" }), true, "another write");
  assert.equal(copyBehindOwnWrite(written, "other", { phase: "Suspending" }), false);
});

Deno.test("confirmCopyCurrent sends an empty locked status patch: a current copy passes, an older one conflicts", async () => {
  const { fake } = newTestEnv([setSeed(newCocoonSet("demo"))]);
  const old = await getSet(fake, "demo");
  await confirmCopyCurrent(fake, old);
  const sent = fake.actions.filter((a) => a.verb === "patch" && a.resource === CocoonSets);
  assert.equal(sent.length, 1);
  assert.equal(sent[0].subresource, "status");
  assert.deepEqual(
    (await getSet(fake, "demo")).status,
    old.status,
    "a current copy: nothing is written",
  );

  await fake.patch(CocoonSets, old.metadata.namespace ?? "", "demo", "merge", {
    metadata: { annotations: { moved: "on" } },
  });
  const err = await confirmCopyCurrent(fake, old).then(() => undefined, (e: unknown) => e);
  assert.ok(isConflict(err), `an older copy is refused with Conflict, got ${err}`);
});

/** The status patches and the CocoonSet reads fake received, in order. */
function statusWritesAndReads(fake: FakeClient): string[] {
  return fake.actions
    .filter((a) => a.resource === CocoonSets)
    .filter((a) => a.verb === "get" || (a.verb === "patch" && a.subresource === "status"))
    .map((a) => a.verb);
}

Deno.test("a status write refused because the copy fell behind a metadata change is redone on a re-read copy", async () => {
  const { fake, clock } = newTestEnv([setSeed(newCocoonSet("demo"))]);
  const now = () => new Date(clock.now());
  const behind = await getSet(fake, "demo");
  // Someone annotates the set: the stored copy moves on, its spec and status do not.
  await fake.patch(CocoonSets, behind.metadata.namespace ?? "", "demo", "merge", {
    metadata: { annotations: { moved: "on" } },
  });
  fake.actions.length = 0;

  const next = buildStatus(behind, classifyPods([]), "Pending");
  assert.equal(await writeStatus(fake, behind, next, now, undefined, new Map(), fake), true);

  assert.deepEqual(statusWritesAndReads(fake), ["patch", "get", "patch"], "one re-read, one retry");
  const stored = await getSet(fake, "demo");
  assert.equal(stored.status?.phase, "Pending");
  assert.equal(stored.metadata.annotations?.moved, "on", "the newer copy's metadata is kept");
  assert.equal(behind.metadata.resourceVersion, stored.metadata.resourceVersion, "cs refreshed");
});

Deno.test("a status write refused because the spec moved on is not redone: the Conflict goes to the pass", async () => {
  const { fake, clock } = newTestEnv([setSeed(newCocoonSet("demo"))]);
  const now = () => new Date(clock.now());
  const behind = await getSet(fake, "demo");
  await fake.patch(CocoonSets, behind.metadata.namespace ?? "", "demo", "merge", {
    spec: { agent: { replicas: 4 } },
  });
  fake.actions.length = 0;

  const next = buildStatus(behind, classifyPods([]), "Pending");
  const err = await writeStatus(fake, behind, next, now, undefined, new Map(), fake)
    .then(() => undefined, (e: unknown) => e);

  assert.ok(isConflict(err), `refused with Conflict, got ${err}`);
  assert.deepEqual(statusWritesAndReads(fake), ["patch", "get"], "re-read, no second write");
  assert.equal((await getSet(fake, "demo")).status?.phase, undefined, "nothing written");
});

Deno.test("a status write refused because the phase moved on is not redone: the pass decided from the old phase", async () => {
  const { fake, clock } = newTestEnv([setSeed(newCocoonSet("demo"))]);
  const now = () => new Date(clock.now());
  const behind = await getSet(fake, "demo");
  const other = await getSet(fake, "demo");
  await writeStatus(fake, other, buildStatus(other, classifyPods([]), "Migrating"), now);
  fake.actions.length = 0;

  const err = await writeStatus(
    fake,
    behind,
    buildStatus(behind, classifyPods([]), "Pending"),
    now,
    undefined,
    new Map(),
    fake,
  ).then(() => undefined, (e: unknown) => e);

  assert.ok(isConflict(err), `refused with Conflict, got ${err}`);
  assert.deepEqual(statusWritesAndReads(fake), ["patch", "get"]);
  assert.equal((await getSet(fake, "demo")).status?.phase, "Migrating");
});

Deno.test("a status write that keeps conflicting is redone a bounded number of times", async () => {
  const { fake, clock } = newTestEnv([setSeed(newCocoonSet("demo"))]);
  const now = () => new Date(clock.now());
  const behind = await getSet(fake, "demo");
  // Every status write first moves the stored copy's metadata on, so each one conflicts.
  let moved = 0;
  fake.addReactor(async (a) => {
    if (a.resource !== CocoonSets || a.subresource !== "status") return undefined;
    await fake.patch(CocoonSets, a.namespace, a.name, "merge", {
      metadata: { annotations: { moved: String(++moved) } },
    });
    return undefined;
  });

  const err = await writeStatus(
    fake,
    behind,
    buildStatus(behind, classifyPods([]), "Pending"),
    now,
    undefined,
    new Map(),
    fake,
  ).then(() => undefined, (e: unknown) => e);

  assert.ok(isConflict(err), `the last Conflict is thrown, got ${err}`);
  const writes = statusWritesAndReads(fake).filter((v) => v === "patch").length;
  assert.equal(writes, 1 + MAX_STATUS_WRITE_RETRIES);
});

Deno.test("sameDecisionInputs: only a newer copy that moved outside what the pass decided from", () => {
  const base = newCocoonSet("demo", (c) => {
    c.metadata.resourceVersion = "7";
    c.spec.agent.replicas = 1;
    c.status = {
      phase: "Scaling",
      readyAgents: 1,
      agents: [{ slot: 0, role: "main", vmName: "vm-0" }],
      toolboxes: [{ name: "tb", vmName: "vm-tb" }],
    } as CocoonSetStatus;
  });
  const seen = decisionInputs(base);
  const moved = (edit: (c: typeof base) => void) => {
    const c = structuredClone(base);
    c.metadata.resourceVersion = "8";
    edit(c);
    return sameDecisionInputs(seen, c);
  };
  assert.equal(sameDecisionInputs(seen, structuredClone(base)), false, "the very copy refused");
  assert.equal(moved((c) => c.metadata.annotations = { a: "b" }), true, "metadata only");
  assert.equal(moved((c) => c.status!.readyAgents = 2), true, "counts: the pass's own output");
  assert.equal(moved((c) => c.spec = { agent: { replicas: 1, image: c.spec.agent.image } }), true);
  assert.equal(moved((c) => c.metadata.generation = 2), false, "generation");
  assert.equal(moved((c) => c.spec.agent.replicas = 2), false, "spec");
  assert.equal(moved((c) => c.status!.phase = "Running"), false, "phase");
  assert.equal(moved((c) => c.status!.toolboxes![0].vmName = "other"), false, "VM names");
  assert.equal(moved((c) => c.metadata.deletionTimestamp = T0), false, "deleted since");
  assert.equal(moved((c) => c.metadata.uid = "another"), false, "another object");
});
