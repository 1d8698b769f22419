import assert from "node:assert/strict";
import { Manager, newApiError, type Pod, Pods, setControllerReference } from "../kube/mod.ts";
import type { CocoonSet } from "../common/apis/v1/cocoonset_types.ts";
import { CocoonHibernations, CocoonSets } from "../common/apis/v1/resources.ts";
import {
  ANNOTATION_COCOON_SET_GENERATION,
  ANNOTATION_FORK_FROM,
  ANNOTATION_HIBERNATE,
  ANNOTATION_IP,
  ANNOTATION_VM_NAME,
  ANNOTATION_VMID,
  LABEL_COCOON_SET,
  LABEL_ROLE,
  LABEL_SLOT,
  readHibernateState,
} from "../common/meta/mod.ts";
import {
  actionsOf,
  conditionOf,
  counterValue,
  depsOf,
  editPod,
  findSet,
  getPod,
  hibernationLists,
  lifecycleFailed,
  lifecycleHibernated,
  livePod,
  newCocoonSet,
  newHibernation,
  newTestEnv,
  newTestPass,
  podSeed,
  readyPod,
  reconcileSet,
  seedDeletingSet,
  seedSet,
  TEST_NAMESPACE,
  withFinalizer,
} from "./_test_support.ts";
import { ensureSubAgents, REASON_SUB_AGENT_REBUILDING } from "./agents.ts";
import { ANNOTATION_DELETE_VM_NAMES } from "./teardown.ts";
import { FINALIZER_NAME } from "./finalizer.ts";
import { buildAgentPod, buildToolboxPod } from "./pods.ts";
import {
  ANNOTATION_DEAD_LETTER,
  ANNOTATION_REBUILD_HISTORY,
  encodeRebuildHistory,
  MAX_REBUILD_ATTEMPTS,
  readRebuildHistory,
} from "./rebuild.ts";
import { setupCocoonSetController, syncCocoonSetGeneration } from "./reconciler.ts";
import { allOwnedPodsHibernated, applyUnsuspend } from "./suspend.ts";
import { ensureToolboxes, toolboxNameProblem } from "./toolboxes.ts";
import { REASON_NAME_CONFLICT } from "./create.ts";
import { REASON_INVALID_SPEC } from "./validate.ts";
import { DEFAULT_SNAPSHOT_TAG, HIBERNATE_SNAPSHOT_TAG } from "../snapshot/registry.ts";

const REBUILD_METRIC = "cocoon_operator_subagent_rebuild_total";

/** A pod carrying the hibernate request, as suspend leaves it. */
function hibernating(pod: Pod): Pod {
  pod.metadata.annotations = { ...pod.metadata.annotations, [ANNOTATION_HIBERNATE]: "true" };
  return pod;
}

const TOOLBOX_IMAGE = "ghcr.io/cocoonstack/cocoon/toolbox:latest";

// ---------------------------------------------------------------------------------------------
// Ports of the Go original's cocoonset/reconciler_test.go, one test per Go test.
// ---------------------------------------------------------------------------------------------

Deno.test("unsuspend clears the hibernate request from agents and leaves pods without one alone", async () => {
  const env = newTestEnv();
  const cs = newCocoonSet("demo", (c) => {
    c.spec.agent.replicas = 1;
    c.spec.toolboxes = [{ name: "tb", image: TOOLBOX_IMAGE }];
  });
  const main = hibernating(buildAgentPod(cs, 0));
  const sub = hibernating(buildAgentPod(cs, 1, "vk-ns-demo-0"));
  const tb = buildToolboxPod(cs, cs.spec.toolboxes![0]);
  const stored = seedSet(env, cs, [main, sub, tb]);
  const pods = (await env.fake.list(Pods, { namespace: TEST_NAMESPACE })).items;

  await applyUnsuspend(newTestPass(env.reconciler.deps, stored, pods));

  assert.equal(readHibernateState((await getPod(env.fake, "demo-0"))!), false);
  assert.equal(readHibernateState((await getPod(env.fake, "demo-1"))!), false);
  assert.equal(readHibernateState((await getPod(env.fake, "demo-tb"))!), false);
  assert.equal(actionsOf(env, "patch", Pods, "demo-tb").length, 0, "never-suspended pod patched");
});

Deno.test("unsuspend of a set with no hibernate requests writes nothing and lists no CRs", async () => {
  const env = newTestEnv();
  const cs = newCocoonSet("demo");
  const stored = seedSet(env, cs, [buildAgentPod(cs, 0), buildAgentPod(cs, 1, "vk-ns-demo-0")]);
  const pods = (await env.fake.list(Pods, { namespace: TEST_NAMESPACE })).items;
  env.fake.actions.length = 0;

  await applyUnsuspend(newTestPass(env.reconciler.deps, stored, pods));

  assert.equal(actionsOf(env, "patch", Pods).length, 0);
  assert.equal(hibernationLists(env), 0);
});

Deno.test("a toolbox whose pod name is taken by an agent pod is a name conflict, not a create", async () => {
  const env = newTestEnv();
  const cs = newCocoonSet("demo", (c) => {
    c.spec.toolboxes = [{ name: "0", image: TOOLBOX_IMAGE }];
  });
  const main = buildAgentPod(cs, 0);
  const stored = seedSet(env, cs, [main]);

  const pass = newTestPass(env.reconciler.deps, stored, [main]);
  const out = await ensureToolboxes(pass);

  assert.equal(out, false);
  assert.equal(pass.problems.length, 1);
  assert.equal(pass.problems[0].reason, REASON_NAME_CONFLICT);
  assert.match(pass.problems[0].message, /demo-0/);
  assert.equal(actionsOf(env, "create", Pods).length, 0);
  assert.equal(actionsOf(env, "delete", Pods).length, 0);
});

Deno.test("a toolbox name taken by a foreign pod: NameConflict, Warning, the other toolbox still made, the pass fails", async () => {
  const env = newTestEnv();
  const cs = newCocoonSet("demo", (c) => {
    withFinalizer(c);
    c.spec.toolboxes = [{ name: "tb", image: TOOLBOX_IMAGE }, {
      name: "tb2",
      image: TOOLBOX_IMAGE,
    }];
  });
  const foreign: Pod = {
    metadata: { name: "demo-tb", namespace: TEST_NAMESPACE, labels: { app: "someone-else" } },
    spec: { containers: [{ name: "c", image: "x" }] },
  };
  seedSet(env, cs, [readyPod(buildAgentPod(cs, 0)), foreign]);

  // Pass 1 creates the toolbox it can and looks again at once.
  assert.deepEqual(await reconcileSet(env, "demo"), { requeue: true });
  assert.ok(await getPod(env.fake, "demo-tb2"));

  await assert.rejects(reconcileSet(env, "demo"), /demo-tb/);
  const ready = conditionOf(await findSet(env.fake, "demo"), "Ready");
  assert.deepEqual([ready?.status, ready?.reason], ["False", REASON_NAME_CONFLICT]);
  assert.equal(env.recorder.withReason(REASON_NAME_CONFLICT)[0]?.type, "Warning");
  const untouched = (a: { name: string }) => a.name === "demo-tb";
  assert.equal(actionsOf(env, "patch", Pods).filter(untouched).length, 0);
  assert.equal(actionsOf(env, "delete", Pods).filter(untouched).length, 0);
  assert.deepEqual((await getPod(env.fake, "demo-tb"))?.metadata.labels, { app: "someone-else" });
});

Deno.test("an integer toolbox name is InvalidSpec: Warning, Ready=False, no toolbox pod, sub-agents still reconcile", async () => {
  assert.match(toolboxNameProblem([{ name: "1" }]) ?? "", /"1"/);
  assert.match(toolboxNameProblem([{ name: "007" }]) ?? "", /"007"/);
  assert.equal(toolboxNameProblem([{ name: "tb-1" }]), undefined);

  const env = newTestEnv();
  const cs = newCocoonSet("demo", (c) => {
    withFinalizer(c);
    c.spec.agent.replicas = 1;
    c.spec.toolboxes = [{ name: "1", image: TOOLBOX_IMAGE }];
  });
  const main = readyPod(buildAgentPod(cs, 0));
  main.spec!.nodeName = "node-a";
  seedSet(env, cs, [main]);

  assert.deepEqual(await reconcileSet(env, "demo"), { requeue: true });
  const created = actionsOf(env, "create", Pods).map((a) =>
    a.object?.metadata.labels?.[LABEL_ROLE]
  );
  assert.deepEqual(created, ["sub-agent"], "only the sub-agent is created");
  assert.equal((await getPod(env.fake, "demo-1"))?.metadata.labels?.[LABEL_ROLE], "sub-agent");
  assert.equal(env.recorder.withReason(REASON_INVALID_SPEC)[0]?.type, "Warning");

  await editPod(env, "demo-1", readyPod);
  await reconcileSet(env, "demo");
  const ready = conditionOf(await findSet(env.fake, "demo"), "Ready");
  assert.equal(ready?.status, "False");
  assert.equal(ready?.reason, REASON_INVALID_SPEC);
  assert.equal(
    actionsOf(env, "create", Pods).filter((a) =>
      a.object?.metadata.labels?.[LABEL_ROLE] === "toolbox"
    )
      .length,
    0,
  );
});

Deno.test("duplicate toolbox names are InvalidSpec: Warning, Ready=False, no toolbox created", async () => {
  const env = newTestEnv();
  const cs = newCocoonSet("demo", (c) => {
    withFinalizer(c);
    c.spec.toolboxes = [
      { name: "tb", image: TOOLBOX_IMAGE },
      { name: "tb", image: "ghcr.io/cocoonstack/cocoon/toolbox:other" },
    ];
  });
  seedSet(env, cs, [readyPod(buildAgentPod(cs, 0))]);

  assert.deepEqual(await reconcileSet(env, "demo"), {});

  assert.equal(await getPod(env.fake, "demo-tb"), undefined);
  assert.equal(actionsOf(env, "create", Pods).length, 0);
  const ready = conditionOf(await findSet(env.fake, "demo"), "Ready");
  assert.equal(ready?.status, "False");
  assert.equal(ready?.reason, REASON_INVALID_SPEC);
  assert.match(ready?.message ?? "", /duplicate/);
  const warnings = env.recorder.withReason(REASON_INVALID_SPEC);
  assert.equal(warnings.length, 1);
  assert.equal(warnings[0].type, "Warning");
  assert.equal(warnings[0].object.metadata.name, "demo");
});

Deno.test("creating a toolbox that already exists as this set's toolbox is not a change", async () => {
  const env = newTestEnv();
  const cs = newCocoonSet("demo", (c) => {
    c.spec.toolboxes = [{ name: "tb", image: TOOLBOX_IMAGE }];
  });
  const stored = seedSet(env, cs, [buildToolboxPod(cs, cs.spec.toolboxes![0])]);
  const before = await getPod(env.fake, "demo-tb");

  // The pass has not seen the pod (a cache that lags the create).
  const pass = newTestPass(env.reconciler.deps, stored, []);
  const out = await ensureToolboxes(pass);

  assert.equal(out, false);
  assert.deepEqual(pass.problems, []);
  assert.equal(actionsOf(env, "create", Pods, "demo-tb").length, 1);
  assert.equal(actionsOf(env, "delete", Pods).length, 0);
  assert.equal(
    (await getPod(env.fake, "demo-tb"))?.metadata.resourceVersion,
    before?.metadata.resourceVersion,
  );
});

Deno.test("suspend waits until every managed pod has its snapshot", async () => {
  const env = newTestEnv();
  const cs = newCocoonSet("demo", (c) => {
    c.spec.agent.replicas = 1;
  });
  const pass = newTestPass(env.reconciler.deps, cs, [
    lifecycleHibernated(buildAgentPod(cs, 0)),
    lifecycleHibernated(buildAgentPod(cs, 1, "vk-ns-demo-0")),
  ]);
  env.registry.put("vk-ns-demo-0", HIBERNATE_SNAPSHOT_TAG);

  assert.equal(await allOwnedPodsHibernated(pass), false, "sub-agent snapshot missing");

  env.registry.put("vk-ns-demo-1", HIBERNATE_SNAPSHOT_TAG);
  assert.equal(await allOwnedPodsHibernated(pass), true);
});

/** A pod vk-cocoon without lifecycle annotations hibernated: asked, bound, its VM id cleared. */
function silentlyHibernated(pod: Pod): Pod {
  pod.spec = { ...pod.spec!, nodeName: "node-a" };
  pod.metadata.annotations = { ...pod.metadata.annotations, [ANNOTATION_HIBERNATE]: "true" };
  return pod;
}

Deno.test("a suspend poll that the cache shows unfinished reads no stored pod and probes no tag", async () => {
  const env = newTestEnv();
  const cs = newCocoonSet("demo", (c) => {
    c.spec.agent.replicas = 2;
  });
  const main = env.fake.seed(Pods, silentlyHibernated(buildAgentPod(cs, 0)));
  const first = env.fake.seed(Pods, silentlyHibernated(buildAgentPod(cs, 1, "vk-ns-demo-0")));
  const second = env.fake.seed(Pods, livePod(buildAgentPod(cs, 2, "vk-ns-demo-0")));
  for (const slot of [0, 1, 2]) env.registry.put(`vk-ns-demo-${slot}`, HIBERNATE_SNAPSHOT_TAG);

  const waiting = newTestPass(env.reconciler.deps, cs, [main, first, second]);
  assert.equal(await allOwnedPodsHibernated(waiting), false);
  assert.equal(actionsOf(env, "get", Pods).length, 0);
  assert.equal(env.registry.callsOf("hasManifest").length, 0);

  const last = await editPod(env, "demo-2", (p) => {
    delete p.metadata.annotations![ANNOTATION_VMID];
    silentlyHibernated(p);
  });
  const readsBefore = actionsOf(env, "get", Pods).length;
  const done = newTestPass(env.reconciler.deps, cs, [main, first, last]);
  assert.equal(await allOwnedPodsHibernated(done), true);
  assert.equal(actionsOf(env, "get", Pods).length - readsBefore, 3, "one stored read per pod");
  assert.equal(env.registry.callsOf("hasManifest").length, 3, "one probe per VM");
});

Deno.test("a static toolbox does not hold up suspend completion", async () => {
  const env = newTestEnv();
  const cs = newCocoonSet("demo", (c) => {
    c.spec.toolboxes = [{ name: "tb", mode: "static", staticVMID: "qemu-1", staticIP: "10.0.0.1" }];
  });
  const pass = newTestPass(env.reconciler.deps, cs, [
    lifecycleHibernated(buildAgentPod(cs, 0)),
    buildToolboxPod(cs, cs.spec.toolboxes![0]),
  ]);
  env.registry.put("vk-ns-demo-0", HIBERNATE_SNAPSHOT_TAG);

  assert.equal(await allOwnedPodsHibernated(pass), true);
  assert.equal(env.registry.callsOf("hasManifest", "vk-ns-demo-tb").length, 0);
});

Deno.test("a registry probe error during the suspend poll is thrown, not read as absent", async () => {
  const env = newTestEnv();
  const cs = newCocoonSet("demo");
  const pass = newTestPass(env.reconciler.deps, cs, [lifecycleHibernated(buildAgentPod(cs, 0))]);
  env.registry.failNext("hasManifest", new Error("transport boom"));

  await assert.rejects(allOwnedPodsHibernated(pass), /transport boom/);
});

Deno.test("a snapshot tag from an earlier round does not complete suspend before vk reports this generation", async () => {
  const env = newTestEnv();
  const cs = newCocoonSet("demo");
  const main = buildAgentPod(cs, 0);
  const pass = newTestPass(env.reconciler.deps, cs, [main]);
  env.registry.put("vk-ns-demo-0", HIBERNATE_SNAPSHOT_TAG); // left by an earlier cycle

  assert.equal(await allOwnedPodsHibernated(pass), false, "no lifecycle report yet");

  lifecycleHibernated(main);
  assert.equal(await allOwnedPodsHibernated(pass), true);

  // A new spec round outdates a report made for generation 1.
  pass.cs.metadata.generation = 5;
  assert.equal(await allOwnedPodsHibernated(pass), false);
});

Deno.test("a terminal sub-agent is skipped by the suspend poll", async () => {
  const env = newTestEnv();
  const cs = newCocoonSet("demo", (c) => {
    c.spec.agent.replicas = 1;
  });
  const sub = buildAgentPod(cs, 1, "vk-ns-demo-0");
  sub.status = { phase: "Failed" };
  const pass = newTestPass(env.reconciler.deps, cs, [
    lifecycleHibernated(buildAgentPod(cs, 0)),
    sub,
  ]);
  env.registry.put("vk-ns-demo-0", HIBERNATE_SNAPSHOT_TAG);

  assert.equal(await allOwnedPodsHibernated(pass), true);
});

Deno.test("a failed sub-agent is deleted for a rebuild with its history, Event and metric", async () => {
  const env = newTestEnv();
  const cs = newCocoonSet("demo", (c) => {
    c.spec.agent.replicas = 1;
  });
  const sub = buildAgentPod(cs, 1, "vk-ns-demo-0");
  sub.status = { phase: "Failed" };
  const stored = seedSet(env, cs, [sub]);
  const labels = { namespace: TEST_NAMESPACE, cocoonset: "demo" };
  const rebuildsBefore = await counterValue(REBUILD_METRIC, labels);

  const out = await ensureSubAgents(
    newTestPass(env.reconciler.deps, stored, [sub]),
    "vk-ns-demo-0",
    "",
  );

  assert.equal(out.changed, true);
  assert.equal(await getPod(env.fake, "demo-1"), undefined);
  assert.equal(readRebuildHistory((await findSet(env.fake, "demo"))!).get(1)?.count, 1);
  assert.deepEqual(
    env.recorder.withReason(REASON_SUB_AGENT_REBUILDING).map((e) => e.message),
    [`slot 1 attempt 1/${MAX_REBUILD_ATTEMPTS}`],
  );
  assert.equal(await counterValue(REBUILD_METRIC, labels), rebuildsBefore + 1);
});

Deno.test("a dead-lettered sub-agent stays until the spec changes, then is rebuilt with a fresh budget", async () => {
  const env = newTestEnv();
  const cs = newCocoonSet("demo", (c) => {
    c.spec.agent.replicas = 1;
  });
  const sub = buildAgentPod(cs, 1, "vk-ns-demo-0");
  sub.metadata.annotations![ANNOTATION_DEAD_LETTER] = "true";
  cs.metadata.annotations = {
    [ANNOTATION_REBUILD_HISTORY]: encodeRebuildHistory(
      1,
      new Map([[1, { count: MAX_REBUILD_ATTEMPTS, lastDeleted: 0 }]]),
    ),
  };
  const stored = seedSet(env, cs, [sub]);
  const pass = newTestPass(env.reconciler.deps, stored, [sub]);

  const held = await ensureSubAgents(pass, "vk-ns-demo-0", "");
  assert.equal(held.changed, false);
  assert.deepEqual(held.deadLettered, [1]);
  assert.ok(await getPod(env.fake, "demo-1"), "dead-lettered pod with a matching spec is kept");

  pass.cs.spec.agent.image = "ghcr.io/cocoonstack/cocoon/ubuntu:26.04";
  const fixed = await ensureSubAgents(pass, "vk-ns-demo-0", "");
  assert.equal(fixed.changed, true);
  assert.equal(await getPod(env.fake, "demo-1"), undefined);
  const after = (await findSet(env.fake, "demo"))!;
  assert.equal(readRebuildHistory(after).has(1), false);
  // Our difference: the emptied history removes the annotation instead of leaving "{}".
  assert.equal(after.metadata.annotations?.[ANNOTATION_REBUILD_HISTORY], undefined);
  assert.equal(env.recorder.events.length, 0, "a drift rebuild records no Event");
});

Deno.test("a sub-agent with lifecycle failed is rebuilt even while its pod phase is Running", async () => {
  const env = newTestEnv();
  const cs = newCocoonSet("demo", (c) => {
    c.spec.agent.replicas = 1;
  });
  const sub = lifecycleFailed(buildAgentPod(cs, 1, "vk-ns-demo-0"));
  sub.status = { phase: "Running" };
  const stored = seedSet(env, cs, [sub]);

  const out = await ensureSubAgents(
    newTestPass(env.reconciler.deps, stored, [sub]),
    "vk-ns-demo-0",
    "",
  );

  assert.equal(out.changed, true);
  assert.equal(await getPod(env.fake, "demo-1"), undefined);
});

Deno.test("a failed toolbox is deleted for recreate without backoff or Event", async () => {
  const env = newTestEnv();
  const cs = newCocoonSet("demo", (c) => {
    c.spec.toolboxes = [{ name: "tb", image: TOOLBOX_IMAGE }];
  });
  const tb = buildToolboxPod(cs, cs.spec.toolboxes![0]);
  tb.status = { phase: "Failed" };
  const stored = seedSet(env, cs, [tb]);

  const pass = newTestPass(env.reconciler.deps, stored, [tb]);
  const out = await ensureToolboxes(pass);

  assert.equal(out, true);
  assert.equal(await getPod(env.fake, "demo-tb"), undefined);
  assert.equal(env.recorder.events.length, 0);
  assert.equal(
    (await findSet(env.fake, "demo"))?.metadata.annotations?.[ANNOTATION_REBUILD_HISTORY],
    undefined,
  );
});

Deno.test("teardown neither deletes nor waits for a pod that only carries the set's label", async () => {
  const env = newTestEnv();
  const cs = newCocoonSet("demo");
  const stale: Pod = {
    metadata: {
      name: "demo-stale",
      namespace: TEST_NAMESPACE,
      labels: { [LABEL_COCOON_SET]: "demo" },
    },
    spec: { containers: [{ name: "agent", image: "x" }] },
  };
  await seedDeletingSet(env, cs, [buildAgentPod(cs, 0), stale]);

  await reconcileSet(env, "demo");
  assert.equal(await getPod(env.fake, "demo-0"), undefined);
  assert.deepEqual(actionsOf(env, "delete", Pods).map((a) => a.name), ["demo-0"]);

  // The next pass sees no owned pod left: it cleans up and lets the set go.
  await reconcileSet(env, "demo");
  assert.equal(await findSet(env.fake, "demo"), undefined);
  assert.ok(await getPod(env.fake, "demo-stale"), "the unowned pod survives teardown");
  assert.equal(actionsOf(env, "patch", Pods, "demo-stale").length, 0);
});

Deno.test("teardown drops :hibernate always and :latest as the snapshot policy says", async (t) => {
  const cases: {
    name: string;
    policy: "never" | "always" | "main-only";
    agents: string[];
    toolboxes: [string, string][];
    want: string[];
  }[] = [
    {
      name: "never drops both tags",
      policy: "never",
      agents: ["vk-ns-demo-0"],
      toolboxes: [],
      want: [`vk-ns-demo-0:${HIBERNATE_SNAPSHOT_TAG}`, `vk-ns-demo-0:${DEFAULT_SNAPSHOT_TAG}`],
    },
    {
      name: "always keeps :latest",
      policy: "always",
      agents: ["vk-ns-demo-0"],
      toolboxes: [],
      want: [`vk-ns-demo-0:${HIBERNATE_SNAPSHOT_TAG}`],
    },
    {
      name: "main-only keeps only slot 0's :latest",
      policy: "main-only",
      agents: ["vk-ns-demo-0", "vk-ns-demo-1"],
      toolboxes: [["tb", "vk-ns-demo-tb"]],
      want: [
        "vk-ns-demo-0:hibernate",
        "vk-ns-demo-1:hibernate",
        "vk-ns-demo-1:latest",
        "vk-ns-demo-tb:hibernate",
        "vk-ns-demo-tb:latest",
      ],
    },
    {
      name: "main-only treats a toolbox ending in -0 as a toolbox",
      policy: "main-only",
      agents: ["vk-ns-demo-0"],
      toolboxes: [["db-0", "vk-ns-demo-db-0"]],
      want: ["vk-ns-demo-0:hibernate", "vk-ns-demo-db-0:hibernate", "vk-ns-demo-db-0:latest"],
    },
  ];
  for (const c of cases) {
    await t.step(c.name, async () => {
      const env = newTestEnv();
      const cs = newCocoonSet("demo", (s) => {
        s.spec.snapshotPolicy = c.policy;
        s.status = {
          agents: c.agents.map((vmName, slot) => ({
            slot,
            role: slot === 0 ? "main" : "sub-agent",
            podName: `demo-${slot}`,
            vmName,
          })),
          toolboxes: c.toolboxes.map(([name, vmName]) => ({
            name,
            podName: `demo-${name}`,
            vmName,
          })),
        };
      });
      await seedDeletingSet(env, cs);

      assert.deepEqual(await reconcileSet(env, "demo"), {});

      assert.deepEqual(
        env.registry.callsOf("deleteManifest").map((c) => `${c.name}:${c.reference}`),
        c.want,
      );
      assert.equal(await findSet(env.fake, "demo"), undefined, "finalizer released");
    });
  }
});

Deno.test("teardown stashes the VM names of live pods when the status has none, and cleans them once the pods are gone", async () => {
  const env = newTestEnv();
  const cs = newCocoonSet("demo");
  await seedDeletingSet(env, cs, [buildAgentPod(cs, 0)]);

  // The pod has no node, so the API server removes it at once; the second look of the same pass
  // finds no pod left and cleans the registry (as the Go pass, which re-lists after deleting).
  assert.deepEqual(await reconcileSet(env, "demo"), {});
  assert.deepEqual(
    env.registry.callsOf("deleteManifest").map((c) => `${c.name}:${c.reference}`),
    ["vk-ns-demo-0:hibernate"],
  );
  assert.equal(await findSet(env.fake, "demo"), undefined);
});

Deno.test("teardown takes VM names from the status when the pods are already gone", async () => {
  const env = newTestEnv();
  const cs = newCocoonSet("demo", (s) => {
    s.status = {
      agents: [
        { slot: 0, role: "main", podName: "demo-0", vmName: "vk-ns-demo-0" },
        { slot: 1, role: "sub-agent", podName: "demo-1", vmName: "vk-ns-demo-1" },
      ],
      toolboxes: [{ name: "tb", podName: "demo-tb", vmName: "vk-ns-demo-tb" }],
    };
  });
  await seedDeletingSet(env, cs);

  assert.deepEqual(await reconcileSet(env, "demo"), {});

  assert.deepEqual(
    env.registry.callsOf("deleteManifest").map((c) => `${c.name}:${c.reference}`),
    ["vk-ns-demo-0:hibernate", "vk-ns-demo-1:hibernate", "vk-ns-demo-tb:hibernate"],
  );
  assert.equal(await findSet(env.fake, "demo"), undefined);
});

Deno.test("unsuspend leaves the hibernate request on a pod a Hibernate CR names", async () => {
  const env = newTestEnv();
  const cs = newCocoonSet("demo", (c) => {
    c.spec.agent.replicas = 1;
  });
  const stored = seedSet(env, cs, [
    hibernating(buildAgentPod(cs, 0)),
    hibernating(buildAgentPod(cs, 1, "vk-ns-demo-0")),
  ]);
  env.fake.seed(CocoonHibernations, newHibernation("demo-0", "Hibernate"));
  const pods = (await env.fake.list(Pods, { namespace: TEST_NAMESPACE })).items;

  await applyUnsuspend(newTestPass(env.reconciler.deps, stored, pods));

  assert.equal(readHibernateState((await getPod(env.fake, "demo-0"))!), true, "the CR owns demo-0");
  assert.equal(
    readHibernateState((await getPod(env.fake, "demo-1"))!),
    false,
    "no CR names demo-1",
  );
});

Deno.test("unsuspend leaves a pod alone while its CR is still Hibernating under a Wake desire", async () => {
  const env = newTestEnv();
  const cs = newCocoonSet("demo");
  const stored = seedSet(env, cs, [hibernating(buildAgentPod(cs, 0))]);
  env.fake.seed(CocoonHibernations, newHibernation("demo-0", "Wake", "Hibernating"));
  const pods = (await env.fake.list(Pods, { namespace: TEST_NAMESPACE })).items;

  await applyUnsuspend(newTestPass(env.reconciler.deps, stored, pods));

  assert.equal(readHibernateState((await getPod(env.fake, "demo-0"))!), true);
  assert.equal(actionsOf(env, "patch", Pods).length, 0);
});

Deno.test("setting up the controller rejects a concurrency below 1 or not an integer", () => {
  for (const concurrency of [0, -1, 1.5]) {
    const mgr = new Manager({
      client: newTestEnv().fake,
      metricsBindAddress: "0",
      healthProbeBindAddress: "0",
      leaderElection: false,
      leaderElectionId: "x",
    });
    assert.throws(
      () => setupCocoonSetController(mgr, { concurrency }),
      /concurrency must be at least 1/,
      `concurrency ${concurrency}`,
    );
  }
});

// ---------------------------------------------------------------------------------------------
// Reconcile-order behaviours the Go tests above do not pin (tests/PARITY.md maps them to the
// original's behaviour), including where this port deliberately differs.
// ---------------------------------------------------------------------------------------------

Deno.test("a status write refused with Conflict retries the pass at once, then writes from fresh data", async () => {
  const env = newTestEnv();
  const cs = withFinalizerSet(env);
  env.fake.seed(Pods, buildAgentPod(cs, 0));
  let refused = 0;
  env.fake.addReactor((a) => {
    if (a.resource !== CocoonSets || a.subresource !== "status" || refused > 0) return undefined;
    refused++;
    return newApiError(409, "Conflict", { resource: "cocoonsets", name: a.name }, "stale");
  });
  assert.deepEqual(await reconcileSet(env, "demo"), { requeue: true });
  assert.equal(refused, 1);
  assert.equal((await findSet(env.fake, "demo"))?.status, undefined, "nothing half-written");
  assert.deepEqual(await reconcileSet(env, "demo"), { requeueAfter: 5_000 });
  assert.equal((await findSet(env.fake, "demo"))?.status?.phase, "Pending");
});

Deno.test("the status write carries the resourceVersion it was computed from", async () => {
  const env = newTestEnv();
  const cs = withFinalizerSet(env);
  env.fake.seed(Pods, buildAgentPod(cs, 0));
  await reconcileSet(env, "demo");
  const write = actionsOf(env, "patch", CocoonSets).find((a) => a.subresource === "status");
  const body = write?.patch as { metadata?: { resourceVersion?: unknown } } | undefined;
  assert.equal(typeof body?.metadata?.resourceVersion, "string", JSON.stringify(write?.patch));
});

/** Seeds demo with the finalizer (the passes go straight to the pods) and returns it. */
function withFinalizerSet(env: ReturnType<typeof newTestEnv>): CocoonSet {
  return seedSet(env, newCocoonSet("demo", withFinalizer));
}

Deno.test("a new set gets its finalizer, then its main, then Pending until the main is Ready, then Running", async () => {
  const env = newTestEnv();
  seedSet(env, newCocoonSet("demo"));
  const statusWrites = () =>
    actionsOf(env, "patch", CocoonSets).filter((a) => a.subresource).length;

  // Pass 1: the finalizer alone, by an optimistic-lock merge patch that leaves the spec alone.
  assert.deepEqual(await reconcileSet(env, "demo"), { requeue: true });
  const finalizerPatch = actionsOf(env, "patch", CocoonSets);
  assert.equal(finalizerPatch.length, 1);
  const body = finalizerPatch[0].patch as { metadata?: Record<string, unknown>; spec?: unknown };
  assert.deepEqual(body.metadata?.finalizers, [FINALIZER_NAME]);
  assert.equal(typeof body.metadata?.resourceVersion, "string");
  assert.equal(body.spec, undefined);
  let cs = await findSet(env.fake, "demo");
  assert.deepEqual(cs?.metadata.finalizers, [FINALIZER_NAME]);
  assert.equal(cs?.metadata.generation, 1);
  assert.equal(actionsOf(env, "create", Pods).length, 0);

  // Pass 2: the main, and still no status.
  assert.deepEqual(await reconcileSet(env, "demo"), { requeue: true });
  const main = await getPod(env.fake, "demo-0");
  assert.equal(main?.metadata.labels?.[LABEL_ROLE], "main");
  assert.equal(main?.metadata.labels?.[LABEL_SLOT], "0");
  assert.equal(main?.metadata.annotations?.[ANNOTATION_VM_NAME], "vk-ns-demo-0");
  assert.equal(statusWrites(), 0);

  // Pass 3: Pending while the main is not Ready, looked at again in 5 s.
  assert.deepEqual(await reconcileSet(env, "demo"), { requeueAfter: 5_000 });
  cs = await findSet(env.fake, "demo");
  assert.equal(cs?.status?.phase, "Pending");
  assert.equal(cs?.status?.observedGeneration, 1);
  assert.equal(cs?.status?.desiredAgents, 1);
  assert.equal(cs?.status?.readyAgents, 0);
  assert.deepEqual(
    [conditionOf(cs, "Ready")?.status, conditionOf(cs, "Ready")?.reason],
    ["False", "AgentsNotReady"],
  );
  assert.deepEqual(
    [conditionOf(cs, "Progressing")?.status, conditionOf(cs, "Progressing")?.reason],
    ["True", "Reconciling"],
  );
  assert.equal(cs?.status?.agents?.[0]?.podName, "demo-0");
  assert.equal(cs?.status?.agents?.[0]?.vmName, "vk-ns-demo-0");

  // vk-cocoon boots the VM.
  await editPod(env, "demo-0", (p) => {
    livePod(p);
    p.metadata.annotations![ANNOTATION_IP] = "10.0.0.7";
  });
  assert.deepEqual(await reconcileSet(env, "demo"), {});
  cs = await findSet(env.fake, "demo");
  assert.equal(cs?.status?.phase, "Running");
  assert.equal(cs?.status?.readyAgents, 1);
  assert.deepEqual(
    [
      conditionOf(cs, "Ready")?.status,
      conditionOf(cs, "Ready")?.reason,
      conditionOf(cs, "Ready")?.message,
    ],
    ["True", "AllAgentsReady", "1/1 agents ready, 0/0 toolboxes ready"],
  );
  assert.deepEqual(
    [
      conditionOf(cs, "Progressing")?.status,
      conditionOf(cs, "Progressing")?.reason,
      conditionOf(cs, "Progressing")?.message,
    ],
    ["False", "Stable", "Running"],
  );
  assert.equal(cs?.status?.agents?.[0]?.vmID, "id-demo-0");
  assert.equal(cs?.status?.agents?.[0]?.ip, "10.0.0.7");

  // Steady state: nothing changed, nothing written.
  const writes = statusWrites();
  const rv = cs?.metadata.resourceVersion;
  assert.deepEqual(await reconcileSet(env, "demo"), {});
  assert.equal(statusWrites(), writes);
  assert.equal((await findSet(env.fake, "demo"))?.metadata.resourceVersion, rv);
});

Deno.test("scale-up forks bound sub-agents from the main; scale-down deletes extra slots in ascending order", async () => {
  const env = newTestEnv();
  const cs = newCocoonSet("demo", (c) => {
    withFinalizer(c);
    c.spec.agent.replicas = 3;
  });
  const main = readyPod(buildAgentPod(cs, 0));
  main.spec!.nodeName = "node-a";
  seedSet(env, cs, [main]);

  assert.deepEqual(await reconcileSet(env, "demo"), { requeue: true });
  assert.equal(actionsOf(env, "patch", CocoonSets).length, 0, "a create pass writes no status");
  for (const slot of [1, 2, 3]) {
    const sub = await getPod(env.fake, `demo-${slot}`);
    assert.equal(sub?.metadata.labels?.[LABEL_ROLE], "sub-agent");
    assert.equal(sub?.metadata.labels?.[LABEL_SLOT], String(slot));
    assert.equal(sub?.metadata.annotations?.[ANNOTATION_VM_NAME], `vk-ns-demo-${slot}`);
    assert.equal(sub?.metadata.annotations?.[ANNOTATION_FORK_FROM], "vk-ns-demo-0");
    assert.equal(sub?.spec?.nodeName, "node-a");
    assert.equal(sub?.spec?.affinity, undefined);
  }

  await reconcileSet(env, "demo");
  let out = await findSet(env.fake, "demo");
  assert.equal(out?.status?.phase, "Scaling");
  assert.equal(conditionOf(out, "Progressing")?.status, "True");
  assert.equal(out?.status?.desiredAgents, 4);
  assert.deepEqual(out?.status?.agents?.slice(1).map((a) => a.forkedFrom), [
    "vk-ns-demo-0",
    "vk-ns-demo-0",
    "vk-ns-demo-0",
  ]);

  for (const slot of [1, 2, 3]) await editPod(env, `demo-${slot}`, readyPod);
  await reconcileSet(env, "demo");
  out = await findSet(env.fake, "demo");
  assert.equal(out?.status?.phase, "Running");
  assert.equal(out?.status?.readyAgents, 4);

  await env.fake.patch(CocoonSets, TEST_NAMESPACE, "demo", "merge", {
    spec: { agent: { replicas: 1 } },
  });
  env.fake.actions.length = 0;
  assert.deepEqual(await reconcileSet(env, "demo"), { requeue: true });
  assert.deepEqual(actionsOf(env, "delete", Pods).map((a) => a.name), ["demo-2", "demo-3"]);
  assert.equal((await getPod(env.fake, "demo-1"))?.metadata.deletionTimestamp, undefined);

  // vk-cocoon finishes the deletes (the sub-agents were bound to a node).
  for (const name of ["demo-2", "demo-3"]) {
    await env.fake.delete(Pods, TEST_NAMESPACE, name, { gracePeriodSeconds: 0 });
  }
  await reconcileSet(env, "demo");
  out = await findSet(env.fake, "demo");
  assert.equal(out?.status?.phase, "Running");
  assert.equal(out?.status?.desiredAgents, 2);
  assert.equal(out?.status?.readyAgents, 2);
});

Deno.test("while the main is not Ready, sub-agents are neither created nor triaged", async () => {
  const env = newTestEnv();
  const cs = newCocoonSet("demo", (c) => {
    withFinalizer(c);
    c.spec.agent.replicas = 2;
  });
  const failedSub = buildAgentPod(cs, 1, "vk-ns-demo-0");
  failedSub.status = { phase: "Failed" };
  seedSet(env, cs, [buildAgentPod(cs, 0), failedSub]);

  assert.deepEqual(await reconcileSet(env, "demo"), { requeueAfter: 5_000 });

  assert.equal(actionsOf(env, "create", Pods).length, 0);
  assert.equal(actionsOf(env, "delete", Pods).length, 0);
  assert.equal((await findSet(env.fake, "demo"))?.status?.phase, "Pending");
  assert.equal(env.recorder.events.length, 0);
});

Deno.test("a spec edit re-stamps every owned pod before anything else, and only pods that need it", async () => {
  const env = newTestEnv();
  const old = newCocoonSet("demo", (c) => {
    c.spec.agent.replicas = 1;
  });
  const main = readyPod(buildAgentPod(old, 0));
  main.spec!.nodeName = "node-a";
  const cs = newCocoonSet("demo", (c) => {
    withFinalizer(c);
    c.metadata.generation = 2;
    c.spec.agent.replicas = 2;
  });
  const current = readyPod(buildAgentPod(cs, 1, "vk-ns-demo-0", "node-a"));
  seedSet(env, cs, [main, current]);

  assert.deepEqual(await reconcileSet(env, "demo"), { requeue: true });

  const writes = env.fake.actions.filter((a) => a.verb !== "get" && a.verb !== "list" && !a.dryRun);
  assert.equal(writes[0].verb, "patch");
  assert.equal(writes[0].name, "demo-0");
  assert.deepEqual(writes[0].patch, {
    metadata: { annotations: { [ANNOTATION_COCOON_SET_GENERATION]: "2" } },
  });
  assert.equal(actionsOf(env, "patch", Pods, "demo-1").length, 0, "already current");
  assert.deepEqual(writes.slice(1).map((a) => `${a.verb} ${a.name}`), ["create demo-2"]);
  assert.equal(
    (await getPod(env.fake, "demo-2"))?.metadata.annotations?.[ANNOTATION_COCOON_SET_GENERATION],
    "2",
  );
});

Deno.test("pods are re-stamped while the main is failed and while suspended, never during teardown", async () => {
  const old = newCocoonSet("demo", (c) => {
    c.metadata.generation = 1;
  });
  for (const mode of ["failed", "suspended"] as const) {
    const env = newTestEnv();
    const cs = newCocoonSet("demo", (c) => {
      withFinalizer(c);
      c.metadata.generation = 4;
      c.spec.suspend = mode === "suspended";
    });
    const main = buildAgentPod(old, 0);
    if (mode === "failed") lifecycleFailed(main);
    seedSet(env, cs, [main]);
    await reconcileSet(env, "demo");
    assert.equal(
      (await getPod(env.fake, "demo-0"))?.metadata.annotations?.[ANNOTATION_COCOON_SET_GENERATION],
      "4",
      mode,
    );
  }

  const env = newTestEnv();
  const cs = newCocoonSet("demo", (c) => {
    c.metadata.generation = 4;
  });
  const main = buildAgentPod(old, 0);
  main.spec!.nodeName = "node-a"; // stays Terminating after the DELETE
  await seedDeletingSet(env, cs, [main]);
  await reconcileSet(env, "demo");
  await reconcileSet(env, "demo");
  assert.equal(actionsOf(env, "patch", Pods).length, 0);
  assert.equal(
    (await getPod(env.fake, "demo-0"))?.metadata.annotations?.[ANNOTATION_COCOON_SET_GENERATION],
    "1",
  );
});

Deno.test("a retain unsuspend clears every hibernate request and never deletes the snapshot tags", async () => {
  const env = newTestEnv();
  const cs = newCocoonSet("demo", (c) => {
    withFinalizer(c);
    c.spec.agent.replicas = 1;
    c.status = { phase: "Suspended" };
  });
  const main = lifecycleHibernated(hibernating(buildAgentPod(cs, 0)));
  main.spec!.nodeName = "node-a";
  const sub = lifecycleHibernated(hibernating(buildAgentPod(cs, 1, "vk-ns-demo-0", "node-a")));
  seedSet(env, cs, [main, sub]);
  env.registry.put("vk-ns-demo-0", HIBERNATE_SNAPSHOT_TAG);
  env.registry.put("vk-ns-demo-1", HIBERNATE_SNAPSHOT_TAG);

  assert.deepEqual(await reconcileSet(env, "demo"), { requeueAfter: 5_000 });

  assert.equal(readHibernateState((await getPod(env.fake, "demo-0"))!), false);
  assert.equal(readHibernateState((await getPod(env.fake, "demo-1"))!), false);
  assert.equal(env.registry.callsOf("deleteManifest").length, 0);
  assert.ok(env.registry.contains("vk-ns-demo-0", HIBERNATE_SNAPSHOT_TAG));
  assert.ok(env.registry.contains("vk-ns-demo-1", HIBERNATE_SNAPSHOT_TAG));
  assert.equal((await findSet(env.fake, "demo"))?.status?.phase, "Pending");
});

Deno.test("a stray hibernate request on a running set is cleared unless a Hibernate CR owns the pod", async () => {
  const env = newTestEnv();
  const cs = newCocoonSet("demo", (c) => {
    withFinalizer(c);
    c.spec.agent.replicas = 1;
    c.status = { phase: "Running" };
  });
  const main = hibernating(readyPod(buildAgentPod(cs, 0)));
  main.spec!.nodeName = "node-a";
  const sub = hibernating(readyPod(buildAgentPod(cs, 1, "vk-ns-demo-0", "node-a")));
  seedSet(env, cs, [main, sub]);
  env.fake.seed(CocoonHibernations, newHibernation("demo-1", "Hibernate", "Hibernating"));

  await reconcileSet(env, "demo");

  assert.equal(readHibernateState((await getPod(env.fake, "demo-0"))!), false);
  assert.equal(readHibernateState((await getPod(env.fake, "demo-1"))!), true);
});

Deno.test("teardown stashes the sorted union of status, previous and live VM names and waits for every pod", async () => {
  const env = newTestEnv();
  const cs = newCocoonSet("demo", (c) => {
    c.spec.agent.replicas = 1;
    c.spec.toolboxes = [{ name: "tb", image: TOOLBOX_IMAGE }];
    c.metadata.annotations = { [ANNOTATION_DELETE_VM_NAMES]: "vk-ns-old-9" };
    c.status = { agents: [{ slot: 0, role: "main", podName: "demo-0", vmName: "vk-ns-demo-0" }] };
  });
  const main = buildAgentPod(cs, 0);
  main.spec!.nodeName = "node-a";
  const sub = buildAgentPod(cs, 1, "vk-ns-demo-0", "node-a");
  const tb = buildToolboxPod(cs, cs.spec.toolboxes![0]);
  tb.spec!.nodeName = "node-a";
  await seedDeletingSet(env, cs, [main, sub, tb]);

  assert.deepEqual(await reconcileSet(env, "demo"), { requeueAfter: 5_000 });
  let out = await findSet(env.fake, "demo");
  assert.equal(
    out?.metadata.annotations?.[ANNOTATION_DELETE_VM_NAMES],
    "vk-ns-demo-0,vk-ns-demo-1,vk-ns-demo-tb,vk-ns-old-9",
  );
  assert.deepEqual(actionsOf(env, "delete", Pods).map((a) => a.name), [
    "demo-0",
    "demo-1",
    "demo-tb",
  ]);

  // The pods terminate slowly: no second DELETE, no registry call, the finalizer stays.
  env.fake.actions.length = 0;
  assert.deepEqual(await reconcileSet(env, "demo"), { requeueAfter: 5_000 });
  assert.equal(actionsOf(env, "delete", Pods).length, 0);
  assert.equal(env.registry.calls.length, 0);
  out = await findSet(env.fake, "demo");
  assert.deepEqual(out?.metadata.finalizers, [FINALIZER_NAME]);

  for (const name of ["demo-0", "demo-1", "demo-tb"]) {
    await env.fake.delete(Pods, TEST_NAMESPACE, name, { gracePeriodSeconds: 0 });
  }
  assert.deepEqual(await reconcileSet(env, "demo"), {});
  // vk-ns-old-9 is only in the editable annotation and is not a name this set derives, so the
  // snapshot gate refuses it (Go deleted it).
  assert.deepEqual(
    env.registry.callsOf("deleteManifest").map((c) => c.name),
    ["vk-ns-demo-0", "vk-ns-demo-1", "vk-ns-demo-tb"],
  );
  assert.equal(await findSet(env.fake, "demo"), undefined);
});

Deno.test("a pod already terminating gets no DELETE from teardown but is still waited for", async () => {
  const env = newTestEnv();
  const cs = newCocoonSet("demo");
  const main = buildAgentPod(cs, 0);
  main.spec!.nodeName = "node-a";
  await seedDeletingSet(env, cs, [main]);
  await env.fake.delete(Pods, TEST_NAMESPACE, "demo-0");
  env.fake.actions.length = 0;

  assert.deepEqual(await reconcileSet(env, "demo"), { requeueAfter: 5_000 });

  assert.equal(actionsOf(env, "delete", Pods).length, 0);
  assert.equal(env.registry.calls.length, 0);
});

Deno.test("a pod only labelled for the set is never stamped, counted, suspended or deleted", async () => {
  const env = newTestEnv();
  const cs = newCocoonSet("demo", (c) => {
    withFinalizer(c);
    c.metadata.generation = 2;
    c.spec.suspend = true;
  });
  const other = newCocoonSet("other", (c) => {
    c.metadata.uid = "uid-other";
  });
  const foreign = buildAgentPod(other, 1, "vk-ns-other-0");
  foreign.metadata.name = "demo-1";
  foreign.metadata.labels![LABEL_COCOON_SET] = "demo";
  seedSet(env, cs, [readyPod(buildAgentPod(cs, 0)), foreign]);

  await reconcileSet(env, "demo");

  assert.equal(actionsOf(env, "patch", Pods, "demo-1").length, 0);
  assert.ok(readHibernateState((await getPod(env.fake, "demo-0"))!), "the owned main is suspended");
  assert.deepEqual((await findSet(env.fake, "demo"))?.status?.agents?.map((a) => a.podName), [
    "demo-0",
  ]);
});

Deno.test("an owned pod with an unknown role is stamped, suspended and torn down, but never in the status", async () => {
  const env = newTestEnv();
  const cs = newCocoonSet("demo", (c) => {
    withFinalizer(c);
    c.metadata.generation = 2;
    c.spec.suspend = true;
  });
  const extra: Pod = {
    metadata: {
      name: "demo-extra",
      namespace: TEST_NAMESPACE,
      labels: { [LABEL_COCOON_SET]: "demo", [LABEL_ROLE]: "sidecar" },
      annotations: { [ANNOTATION_COCOON_SET_GENERATION]: "1" },
    },
    spec: { containers: [{ name: "agent", image: "x" }] },
  };
  setControllerReference(cs, extra, CocoonSets);
  seedSet(env, cs, [readyPod(buildAgentPod(cs, 0)), extra]);

  await reconcileSet(env, "demo");

  const pod = await getPod(env.fake, "demo-extra");
  assert.equal(pod?.metadata.annotations?.[ANNOTATION_COCOON_SET_GENERATION], "2");
  assert.equal(readHibernateState(pod!), true);
  const out = await findSet(env.fake, "demo");
  assert.deepEqual(out?.status?.agents?.map((a) => a.podName), ["demo-0"]);
  assert.equal(out?.status?.toolboxes, undefined);

  await env.fake.delete(CocoonSets, TEST_NAMESPACE, "demo");
  await reconcileSet(env, "demo");
  assert.equal(await getPod(env.fake, "demo-extra"), undefined);
});

Deno.test("a terminating owned pod is not stamped, counted or deleted again", async () => {
  const env = newTestEnv();
  const cs = newCocoonSet("demo", (c) => {
    withFinalizer(c);
    c.metadata.generation = 2;
  });
  const main = readyPod(buildAgentPod(cs, 0));
  main.spec!.nodeName = "node-a";
  const leaving = readyPod(buildAgentPod(newCocoonSet("demo"), 2, "vk-ns-demo-0", "node-a"));
  seedSet(env, cs, [main, leaving]);
  await env.fake.delete(Pods, TEST_NAMESPACE, "demo-2");
  env.fake.actions.length = 0;

  assert.deepEqual(await reconcileSet(env, "demo"), {});

  assert.equal(actionsOf(env, "patch", Pods, "demo-2").length, 0);
  assert.equal(actionsOf(env, "delete", Pods).length, 0);
  const out = await findSet(env.fake, "demo");
  assert.deepEqual(out?.status?.agents?.map((a) => a.podName), ["demo-0"]);
  assert.equal(out?.status?.readyAgents, 1);
});

function bare(name: string, generation?: string): Pod {
  return {
    metadata: {
      name,
      namespace: TEST_NAMESPACE,
      ...(generation ? { annotations: { [ANNOTATION_COCOON_SET_GENERATION]: generation } } : {}),
    },
  };
}

Deno.test("the generation is stamped on every owned pod that lacks it or carries an older one", async () => {
  const cs = newCocoonSet("demo", (c) => {
    c.metadata.generation = 7;
  });
  const env = newTestEnv([podSeed(bare("demo-0")), podSeed(bare("demo-1", "5"))]);
  const pods = (await env.fake.list(Pods, { namespace: TEST_NAMESPACE })).items;
  await syncCocoonSetGeneration(newTestPass(depsOf(env), cs, pods));
  for (const name of ["demo-0", "demo-1"]) {
    const pod = await getPod(env.fake, name);
    assert.equal(pod?.metadata.annotations?.[ANNOTATION_COCOON_SET_GENERATION], "7", name);
  }
  const patches = env.fake.actions.filter((a) => a.verb === "patch");
  assert.deepEqual(patches.map((a) => a.name), ["demo-0", "demo-1"], "one patch per pod, by name");
  assert.deepEqual(patches[0].patch, {
    metadata: { annotations: { [ANNOTATION_COCOON_SET_GENERATION]: "7" } },
  });
});

Deno.test("a pod already stamped with the current generation is not patched", async () => {
  const cs = newCocoonSet("demo", (c) => {
    c.metadata.generation = 3;
  });
  const env = newTestEnv([podSeed(bare("demo-0", "3"))]);
  const pods = (await env.fake.list(Pods, { namespace: TEST_NAMESPACE })).items;
  await syncCocoonSetGeneration(newTestPass(depsOf(env), cs, pods));
  assert.equal(env.fake.actions.filter((a) => a.verb === "patch").length, 0);
  const pod = await getPod(env.fake, "demo-0");
  assert.equal(pod?.metadata.annotations?.[ANNOTATION_COCOON_SET_GENERATION], "3");
});

Deno.test("a terminating pod is not stamped", async () => {
  const cs = newCocoonSet("demo", (c) => {
    c.metadata.generation = 2;
  });
  const going = bare("demo-1", "1");
  going.metadata.finalizers = ["test/hold"];
  const env = newTestEnv([podSeed(bare("demo-0", "1")), podSeed(going)]);
  await env.fake.delete(Pods, TEST_NAMESPACE, "demo-1");
  const pods = (await env.fake.list(Pods, { namespace: TEST_NAMESPACE })).items;
  assert.ok(pods.find((p) => p.metadata.name === "demo-1")?.metadata.deletionTimestamp);
  await syncCocoonSetGeneration(newTestPass(depsOf(env), cs, pods));
  assert.deepEqual(
    env.fake.actions.filter((a) => a.verb === "patch").map((a) => a.name),
    ["demo-0"],
  );
  const stale = await getPod(env.fake, "demo-1");
  assert.equal(stale?.metadata.annotations?.[ANNOTATION_COCOON_SET_GENERATION], "1");
});
