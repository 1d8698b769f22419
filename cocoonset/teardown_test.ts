/**
 * Teardown at scale and the snapshot ledger: one DELETE per pod whatever the cache shows, and
 * registry DELETEs only for tags that may exist (cocoonset/snapshot_ledger.ts). The Go operator
 * sent a second DELETE for every pod a stale pass saw again and deleted `:hibernate` (and, unless
 * kept, `:latest`) of every VM, pushed or not.
 */
import assert from "node:assert/strict";
import { Pods } from "../kube/mod.ts";
import type { Pod } from "../kube/mod.ts";
import type { CocoonSet } from "../common/apis/v1/cocoonset_types.ts";
import { CocoonHibernations, CocoonSets } from "../common/apis/v1/resources.ts";
import {
  ANNOTATION_HIBERNATE,
  ANNOTATION_LIFECYCLE_STATE,
  ANNOTATION_SNAPSHOT_POLICY,
} from "../common/meta/mod.ts";
import {
  actionsOf,
  editPod,
  findSet,
  getPod,
  getSet,
  laggingCache,
  livePod,
  newCocoonSet,
  newHibernation,
  newTestEnv,
  reconcilerWith,
  reconcileSet,
  seedDeletingSet,
  seedSet,
  TEST_NAMESPACE,
  type TestEnv,
  withFinalizer,
} from "./_test_support.ts";
import { ANNOTATION_DELETE_VM_NAMES } from "./teardown.ts";
import { buildAgentPod } from "./pods.ts";
import {
  ANNOTATION_SNAPSHOT_LEDGER,
  encodeLedger,
  EVERY_VM,
  readLedger,
  type SnapshotLedger,
} from "./snapshot_ledger.ts";
import { FINALIZER_NAME } from "./finalizer.ts";
import { HIBERNATE_SNAPSHOT_TAG } from "../snapshot/registry.ts";
import { DEFAULT_SNAPSHOT_TAG } from "../snapshot/registry.ts";

function tagDeletes(env: TestEnv): string[] {
  return env.registry.callsOf("deleteManifest").map((c) => `${c.name}:${c.reference}`);
}

/** A set at rest with a known ledger, finalizer and generation 1. */
function ledgered(ledger: SnapshotLedger, ...mods: ((cs: CocoonSet) => void)[]): CocoonSet {
  return newCocoonSet("demo", withFinalizer, (cs) => {
    cs.metadata.generation = 1;
    cs.metadata.annotations = { [ANNOTATION_SNAPSHOT_LEDGER]: encodeLedger(ledger) };
  }, ...mods);
}

/** Deletes the stored set (it has the finalizer, so it stays with a deletionTimestamp). */
async function deleteSet(env: TestEnv): Promise<void> {
  await env.fake.delete(CocoonSets, TEST_NAMESPACE, "demo");
}

/** Finishes every terminating pod, as vk-cocoon does once the VM is gone. */
async function finalizePods(env: TestEnv): Promise<void> {
  for (const pod of (await env.fake.list(Pods, { namespace: TEST_NAMESPACE })).items) {
    if (pod.metadata.deletionTimestamp) {
      await env.fake.delete(Pods, TEST_NAMESPACE, pod.metadata.name ?? "", {
        gracePeriodSeconds: 0,
      });
    }
  }
}

/** Index of the first recorded action matching pred, -1 when none. */
function firstAction(env: TestEnv, pred: (a: TestEnv["fake"]["actions"][number]) => boolean) {
  return env.fake.actions.findIndex(pred);
}

function ledgerPatch(a: TestEnv["fake"]["actions"][number]): boolean {
  const body = a.patch as { metadata?: { annotations?: Record<string, unknown> } } | undefined;
  return a.verb === "patch" && a.resource === CocoonSets &&
    body?.metadata?.annotations?.[ANNOTATION_SNAPSHOT_LEDGER] !== undefined;
}

Deno.test("a new set records its policy with the finalizer; torn down under never it deletes no tag", async () => {
  const env = newTestEnv();
  seedSet(env, newCocoonSet("demo", (cs) => cs.spec.snapshotPolicy = "never"));

  assert.deepEqual(await reconcileSet(env, "demo"), { requeue: true });
  const [finalizer] = actionsOf(env, "patch", CocoonSets);
  const body = finalizer.patch as { metadata: Record<string, unknown> };
  assert.ok(Array.isArray(body.metadata.finalizers));
  assert.deepEqual(
    (body.metadata.annotations as Record<string, string>)[ANNOTATION_SNAPSHOT_LEDGER],
    '{"policies":["never"],"hibernated":[]}',
    "the ledger travels in the finalizer patch, before any pod exists",
  );

  await reconcileSet(env, "demo"); // the main
  await editPod(env, "demo-0", (p) => livePod(p));
  assert.deepEqual(await reconcileSet(env, "demo"), {});
  assert.equal((await getSet(env.fake, "demo")).status?.phase, "Running");

  await deleteSet(env);
  env.fake.actions.length = 0;
  assert.deepEqual(await reconcileSet(env, "demo"), { requeueAfter: 5_000 });
  assert.deepEqual(actionsOf(env, "delete", Pods).map((a) => a.name), ["demo-0"]);
  await finalizePods(env);
  assert.deepEqual(await reconcileSet(env, "demo"), {});

  assert.deepEqual(tagDeletes(env), [], "no VM of a never-snapshotted, never-hibernated set");
  assert.equal(await findSet(env.fake, "demo"), undefined);
});

Deno.test("a policy change is recorded before any pod of the new spec goes, and its :latest is cleaned", async () => {
  const env = newTestEnv();
  const cs = seedSet(
    env,
    ledgered({ policies: ["always"], hibernated: [] }, (c) => {
      c.status = { agents: [{ slot: 0, role: "main", podName: "demo-0", vmName: "vk-ns-demo-0" }] };
    }),
  );
  const main = livePod(buildAgentPod(cs, 0));
  env.fake.seed(Pods, main);
  await env.fake.patch(CocoonSets, TEST_NAMESPACE, "demo", "merge", {
    spec: { snapshotPolicy: "never" },
  });
  env.fake.actions.length = 0;

  // The main drifted (its policy annotation): it is deleted, and vk-cocoon pushes its :latest.
  await reconcileSet(env, "demo");
  const ledgerAt = firstAction(env, ledgerPatch);
  const deleteAt = firstAction(env, (a) => a.verb === "delete" && a.resource === Pods);
  assert.ok(ledgerAt >= 0 && deleteAt > ledgerAt, "ledger written before the drifted main goes");
  assert.deepEqual(readLedger(await getSet(env.fake, "demo"))?.policies, ["always", "never"]);

  await finalizePods(env);
  await deleteSet(env);
  assert.deepEqual(await reconcileSet(env, "demo"), {});
  assert.deepEqual(tagDeletes(env), [`vk-ns-demo-0:${DEFAULT_SNAPSHOT_TAG}`]);
});

Deno.test("suspend records every VM before the first hibernate request", async () => {
  const env = newTestEnv();
  const cs = seedSet(
    env,
    ledgered({ policies: ["always"], hibernated: [] }, (c) => c.spec.suspend = true),
  );
  env.fake.seed(Pods, livePod(buildAgentPod(cs, 0)));
  env.fake.actions.length = 0;

  await reconcileSet(env, "demo");

  const ledgerAt = firstAction(env, ledgerPatch);
  const hibernateAt = firstAction(env, (a) =>
    a.verb === "patch" && a.resource === Pods &&
    JSON.stringify(a.patch).includes(ANNOTATION_HIBERNATE));
  assert.ok(ledgerAt >= 0 && hibernateAt > ledgerAt);
  assert.deepEqual(readLedger(await getSet(env.fake, "demo"))?.hibernated, [EVERY_VM]);
});

Deno.test("a migration records the main's VM before asking it to hibernate", async () => {
  const env = newTestEnv();
  const cs = seedSet(
    env,
    ledgered({ policies: ["never"], hibernated: [] }, (c) => c.spec.nodeName = "node-b"),
  );
  env.fake.seed(Pods, livePod(buildAgentPod(cs, 0), "node-a"));
  env.fake.actions.length = 0;

  await reconcileSet(env, "demo");

  const ledgerAt = firstAction(env, ledgerPatch);
  const hibernateAt = firstAction(env, (a) =>
    a.verb === "patch" && a.resource === Pods &&
    JSON.stringify(a.patch).includes(ANNOTATION_HIBERNATE));
  assert.ok(ledgerAt >= 0 && hibernateAt > ledgerAt);
  assert.deepEqual(readLedger(await getSet(env.fake, "demo"))?.hibernated, ["vk-ns-demo-0"]);

  // Torn down later: only the main's :hibernate may exist.
  await deleteSet(env);
  await reconcileSet(env, "demo");
  await finalizePods(env);
  await reconcileSet(env, "demo");
  assert.deepEqual(tagDeletes(env), [`vk-ns-demo-0:${HIBERNATE_SNAPSHOT_TAG}`]);
});

Deno.test("a hibernate request someone else made is recorded by the next pass", async () => {
  const env = newTestEnv([{ rt: CocoonHibernations, obj: newHibernation("demo-1", "Hibernate") }]);
  const cs = seedSet(
    env,
    ledgered({ policies: ["never"], hibernated: [] }, (c) => c.spec.agent.replicas = 1),
  );
  env.fake.seed(Pods, livePod(buildAgentPod(cs, 0)));
  const sub = livePod(buildAgentPod(cs, 1, "vk-ns-demo-0", "node-a"));
  sub.metadata.annotations![ANNOTATION_HIBERNATE] = "true";
  env.fake.seed(Pods, sub);

  await reconcileSet(env, "demo");

  assert.deepEqual(readLedger(await getSet(env.fake, "demo"))?.hibernated, ["vk-ns-demo-1"]);
});

Deno.test("teardown records what terminating pods and CocoonHibernations show before any DELETE", async () => {
  const env = newTestEnv([{ rt: CocoonHibernations, obj: newHibernation("demo-2", "Wake") }]);
  const cs = seedSet(
    env,
    ledgered({ policies: ["never"], hibernated: [] }, (c) => c.spec.agent.replicas = 2),
  );
  env.fake.seed(Pods, livePod(buildAgentPod(cs, 0)));
  const sub1 = livePod(buildAgentPod(cs, 1, "vk-ns-demo-0", "node-a"));
  sub1.metadata.annotations![ANNOTATION_LIFECYCLE_STATE] = "hibernated";
  env.fake.seed(Pods, sub1);
  env.fake.seed(Pods, livePod(buildAgentPod(cs, 2, "vk-ns-demo-0", "node-a")));
  // sub-agent 1 is already terminating: no DELETE of ours, but its evidence still counts.
  await env.fake.delete(Pods, TEST_NAMESPACE, "demo-1");
  await deleteSet(env);
  env.fake.actions.length = 0;

  assert.deepEqual(await reconcileSet(env, "demo"), { requeueAfter: 5_000 });
  const ledgerAt = firstAction(env, ledgerPatch);
  const deleteAt = firstAction(env, (a) => a.verb === "delete" && a.resource === Pods);
  assert.ok(ledgerAt >= 0 && deleteAt > ledgerAt, "the ledger is stashed before pods go");
  assert.deepEqual(actionsOf(env, "delete", Pods).map((a) => a.name), ["demo-0", "demo-2"]);

  await finalizePods(env);
  assert.deepEqual(await reconcileSet(env, "demo"), {});
  assert.deepEqual(tagDeletes(env), [
    `vk-ns-demo-1:${HIBERNATE_SNAPSHOT_TAG}`,
    `vk-ns-demo-2:${HIBERNATE_SNAPSHOT_TAG}`,
  ]);
});

Deno.test("teardown sends one DELETE per pod even while the cache still shows them undeleted", async () => {
  const env = newTestEnv();
  const cs = seedSet(
    env,
    ledgered({ policies: ["never"], hibernated: [] }, (c) => c.spec.agent.replicas = 3),
  );
  env.fake.seed(Pods, livePod(buildAgentPod(cs, 0)));
  for (const slot of [1, 2, 3]) {
    env.fake.seed(Pods, livePod(buildAgentPod(cs, slot, "vk-ns-demo-0", "node-a")));
  }
  await deleteSet(env);
  env.fake.actions.length = 0;
  // The pod cache keeps showing the pods as they were before any DELETE.
  const pods = (await env.fake.list(Pods, { namespace: TEST_NAMESPACE })).items;
  const reconciler = reconcilerWith(env, laggingCache(env.fake, { pods }));
  const pass = () =>
    reconciler.reconcile({ namespace: TEST_NAMESPACE, name: "demo" }, new AbortController().signal);

  for (let i = 0; i < 3; i++) assert.deepEqual(await pass(), { requeueAfter: 5_000 });

  assert.deepEqual(actionsOf(env, "delete", Pods).map((a) => a.name), [
    "demo-0",
    "demo-1",
    "demo-2",
    "demo-3",
  ]);
});

/** The main of cs, live, whose snapshot-policy annotation a person changed to policy. */
function mainWithEditedPolicy(cs: CocoonSet, policy: string): Pod {
  const main = livePod(buildAgentPod(cs, 0));
  main.metadata.annotations![ANNOTATION_SNAPSHOT_POLICY] = policy;
  return main;
}

Deno.test("a pod whose policy annotation was edited is recorded under that policy before its drift delete", async () => {
  const env = newTestEnv();
  const cs = seedSet(
    env,
    ledgered({ policies: ["never"], hibernated: [] }, (c) => {
      c.spec.snapshotPolicy = "never";
      c.status = { agents: [{ slot: 0, role: "main", podName: "demo-0", vmName: "vk-ns-demo-0" }] };
    }),
  );
  // vk-cocoon reads the pod's own annotation when it deletes it: this one pushes :latest.
  env.fake.seed(Pods, mainWithEditedPolicy(cs, "always"));
  env.fake.actions.length = 0;

  await reconcileSet(env, "demo");
  const ledgerAt = firstAction(env, ledgerPatch);
  const deleteAt = firstAction(env, (a) => a.verb === "delete" && a.resource === Pods);
  assert.ok(ledgerAt >= 0 && deleteAt > ledgerAt, "recorded before the drifted main goes");
  assert.deepEqual(readLedger(await getSet(env.fake, "demo"))?.policies, ["always", "never"]);

  env.registry.put("vk-ns-demo-0", DEFAULT_SNAPSHOT_TAG);
  await finalizePods(env);
  await deleteSet(env);
  assert.deepEqual(await reconcileSet(env, "demo"), {});
  assert.deepEqual(tagDeletes(env), [`vk-ns-demo-0:${DEFAULT_SNAPSHOT_TAG}`]);
});

Deno.test("teardown records the policy each pod carries before deleting it", async () => {
  const env = newTestEnv();
  const cs = seedSet(
    env,
    ledgered({ policies: ["never"], hibernated: [] }, (c) => c.spec.snapshotPolicy = "never"),
  );
  // Absent or unknown, vk-cocoon snapshots every VM.
  const main = mainWithEditedPolicy(cs, "");
  delete main.metadata.annotations![ANNOTATION_SNAPSHOT_POLICY];
  env.fake.seed(Pods, main);
  await deleteSet(env);
  env.fake.actions.length = 0;

  assert.deepEqual(await reconcileSet(env, "demo"), { requeueAfter: 5_000 });
  const ledgerAt = firstAction(env, ledgerPatch);
  const deleteAt = firstAction(env, (a) => a.verb === "delete" && a.resource === Pods);
  assert.ok(ledgerAt >= 0 && deleteAt > ledgerAt, "recorded before the pod goes");

  await finalizePods(env);
  assert.deepEqual(await reconcileSet(env, "demo"), {});
  assert.deepEqual(tagDeletes(env), [`vk-ns-demo-0:${DEFAULT_SNAPSHOT_TAG}`]);
});

Deno.test("a teardown pass from a copy older than its own stash cannot shrink the stashed VM names", async () => {
  const env = newTestEnv();
  const cs = seedSet(env, newCocoonSet("demo", withFinalizer, (c) => c.spec.agent.replicas = 1));
  env.fake.seed(Pods, livePod(buildAgentPod(cs, 0)));
  const sub = env.fake.seed(Pods, livePod(buildAgentPod(cs, 1, "vk-ns-demo-0", "node-a")));
  await deleteSet(env);
  const beforeStash = await getSet(env.fake, "demo");

  assert.deepEqual(await reconcileSet(env, "demo"), { requeueAfter: 5_000 });
  const stashed = "vk-ns-demo-0,vk-ns-demo-1";
  assert.equal(
    (await getSet(env.fake, "demo")).metadata.annotations?.[ANNOTATION_DELETE_VM_NAMES],
    stashed,
  );
  // vk-cocoon finishes the main first; a pass then works from a cache that shows the set as it
  // was before the stash, and only the sub-agent.
  await env.fake.delete(Pods, TEST_NAMESPACE, "demo-0", { gracePeriodSeconds: 0 });
  const lagging = laggingCache(env.fake, { set: beforeStash, pods: [sub] });
  const pass = await reconcilerWith(env, lagging)
    .reconcile({ namespace: TEST_NAMESPACE, name: "demo" }, new AbortController().signal);
  assert.deepEqual(pass, { requeue: true }, "refused as stale, looked at again from fresh data");

  assert.equal(
    (await getSet(env.fake, "demo")).metadata.annotations?.[ANNOTATION_DELETE_VM_NAMES],
    stashed,
    "the main's VM is still named, so its tags are still cleaned",
  );
});

Deno.test("a deleting set that no longer holds our finalizer is left alone (another finalizer keeps it)", async () => {
  const env = newTestEnv();
  const cs = newCocoonSet("demo", (c) => {
    c.metadata.finalizers = ["example.com/backup"];
    c.status = { agents: [{ slot: 0, role: "main", podName: "demo-0", vmName: "vk-ns-demo-0" }] };
  });
  seedSet(env, cs, [buildAgentPod(cs, 0)]);
  await env.fake.delete(CocoonSets, TEST_NAMESPACE, "demo");
  env.registry.put("vk-ns-demo-0", HIBERNATE_SNAPSHOT_TAG);
  env.fake.actions.length = 0;

  // The original ran its teardown again here: a second stash, pod deletes and registry DELETEs.
  assert.deepEqual(await reconcileSet(env, "demo"), {});

  assert.deepEqual(env.fake.actions.map((a) => a.verb), ["get"], "only the set was read");
  assert.equal(env.registry.calls.length, 0);
  assert.equal(
    (await findSet(env.fake, "demo"))?.metadata.annotations?.[ANNOTATION_DELETE_VM_NAMES],
    undefined,
  );
  assert.equal((await getPod(env.fake, "demo-0"))?.metadata.deletionTimestamp, undefined);
});

Deno.test("registry delete failures are logged and the finalizer is still removed", async () => {
  const env = newTestEnv();
  const cs = newCocoonSet("demo", (c) => {
    c.spec.snapshotPolicy = "never";
    c.status = { agents: [{ slot: 0, role: "main", podName: "demo-0", vmName: "vk-ns-demo-0" }] };
  });
  await seedDeletingSet(env, cs);
  env.registry.failNext("deleteManifest", new Error("registry says no"), { times: Infinity });

  assert.deepEqual(await reconcileSet(env, "demo"), {});

  assert.equal(env.registry.callsOf("deleteManifest").length, 2, "both tags were attempted");
  assert.equal(await findSet(env.fake, "demo"), undefined);
});

Deno.test("without a registry teardown still releases the finalizer", async () => {
  const env = newTestEnv([], undefined, { withoutRegistry: true });
  const cs = newCocoonSet("demo", (c) => {
    c.status = { agents: [{ slot: 0, role: "main", podName: "demo-0", vmName: "vk-ns-demo-0" }] };
  });
  await seedDeletingSet(env, cs);

  assert.deepEqual(await reconcileSet(env, "demo"), {});
  assert.equal(await findSet(env.fake, "demo"), undefined);
  assert.equal(env.registry.calls.length, 0);
});

Deno.test("registry cleanup is skipped when the live object no longer holds the finalizer", async (t) => {
  const status = {
    agents: [{ slot: 0, role: "main", podName: "demo-0", vmName: "vk-ns-demo-0" }],
  };
  const variants: [string, (live: ReturnType<typeof newTestEnv>["fake"]) => void][] = [
    ["the set is already gone", () => {}],
    ["the finalizer was already removed", (live) => {
      live.seed(
        CocoonSets,
        newCocoonSet("demo", (c) => {
          c.status = status;
        }),
      );
    }],
    ["a new set of the same name holds it", (live) => {
      live.seed(
        CocoonSets,
        newCocoonSet("demo", (c) => {
          withFinalizer(c);
          c.metadata.uid = "uid-demo-2";
        }),
      );
    }],
  ];
  for (const [name, seedLive] of variants) {
    await t.step(name, async () => {
      const live = newTestEnv().fake;
      seedLive(live);
      const env = newTestEnv([], undefined, { apiReader: live });
      await seedDeletingSet(
        env,
        newCocoonSet("demo", (c) => {
          c.status = status;
        }),
      );

      assert.deepEqual(await reconcileSet(env, "demo"), {});

      assert.equal(env.registry.calls.length, 0);
      assert.deepEqual(
        (await findSet(env.fake, "demo"))?.metadata.finalizers,
        [FINALIZER_NAME],
        "not patched",
      );
    });
  }
});
