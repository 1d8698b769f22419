import assert from "node:assert/strict";
import { Pods } from "../kube/mod.ts";
import type { Pod } from "../kube/mod.ts";
import { CocoonHibernations } from "../common/apis/v1/resources.ts";
import { ANNOTATION_VM_NAME, readRestoreFromHibernate } from "../common/meta/mod.ts";
import {
  actionsOf,
  getPod,
  newCocoonSet,
  newHibernation,
  newTestEnv,
  newTestPass,
  seedSet,
  TEST_NAMESPACE,
} from "./_test_support.ts";
import { toolboxPodName } from "./pods.ts";
import { markRestoreIfHibernated, restoreIntent } from "./restore.ts";
import { ensureToolboxes } from "./toolboxes.ts";
import { HIBERNATE_SNAPSHOT_TAG } from "../snapshot/registry.ts";

function podForVM(vm: string): Pod {
  return {
    metadata: { name: "p", namespace: TEST_NAMESPACE, annotations: { [ANNOTATION_VM_NAME]: vm } },
  };
}

Deno.test("restore is marked only with intent and a snapshot; a probe error fails closed", async (t) => {
  const cases: {
    name: string;
    intent: boolean;
    snapshot: boolean;
    probeError?: Error;
    marked: boolean;
  }[] = [
    { name: "no intent skips the probe", intent: false, snapshot: true, marked: false },
    { name: "intent and snapshot", intent: true, snapshot: true, marked: true },
    { name: "intent without snapshot", intent: true, snapshot: false, marked: false },
    {
      name: "probe error",
      intent: true,
      snapshot: true,
      probeError: new Error("boom"),
      marked: false,
    },
  ];
  for (const c of cases) {
    await t.step(c.name, async () => {
      const env = newTestEnv();
      if (c.snapshot) env.registry.put("vm", HIBERNATE_SNAPSHOT_TAG);
      if (c.probeError) env.registry.failNext("hasManifest", c.probeError);
      const pod = podForVM("vm");

      const run = markRestoreIfHibernated(
        newTestPass(env.reconciler.deps, newCocoonSet("demo")),
        pod,
        c.intent,
      );
      if (c.probeError) await assert.rejects(run, /boom/);
      else await run;

      assert.equal(readRestoreFromHibernate(pod), c.marked);
      assert.equal(env.registry.calls.length, c.intent ? 1 : 0);
    });
  }
});

Deno.test("without a registry restore is never marked and nothing fails", async () => {
  const env = newTestEnv([], undefined, { withoutRegistry: true });
  const pod = podForVM("vm");

  await markRestoreIfHibernated(newTestPass(env.reconciler.deps, newCocoonSet("demo")), pod, true);

  assert.equal(readRestoreFromHibernate(pod), false);
});

Deno.test("only pods whose CR is Hibernated or Waking are restorable", async () => {
  const env = newTestEnv();
  env.fake.seed(CocoonHibernations, newHibernation("hibernated", "Hibernate", "Hibernated"));
  env.fake.seed(CocoonHibernations, newHibernation("waking", "Hibernate", "Waking"));
  env.fake.seed(CocoonHibernations, newHibernation("active", "Hibernate", "Active"));
  env.fake.seed(CocoonHibernations, newHibernation("hibernating", "Hibernate", "Hibernating"));
  env.fake.seed(CocoonHibernations, {
    ...newHibernation("elsewhere", "Hibernate", "Hibernated"),
    metadata: { name: "h-elsewhere", namespace: "other" },
  });

  const got = await restoreIntent(newTestPass(env.reconciler.deps, newCocoonSet("demo")));

  assert.deepEqual([...got].sort(), ["hibernated", "waking"]);
});

Deno.test("a toolbox hibernated through a CR is recreated restoring from its snapshot", async () => {
  const env = newTestEnv();
  const cs = newCocoonSet("demo", (c) => {
    c.spec.toolboxes = [{ name: "tb", image: "img", mode: "run" }];
  });
  const podName = toolboxPodName("demo", "tb");
  env.fake.seed(CocoonHibernations, newHibernation(podName, "Hibernate", "Hibernated"));
  env.registry.put("vk-ns-demo-tb", HIBERNATE_SNAPSHOT_TAG);
  const stored = seedSet(env, cs);

  const pass = newTestPass(env.reconciler.deps, stored);
  const out = await ensureToolboxes(pass);

  assert.equal(out, true);
  assert.deepEqual(actionsOf(env, "create", Pods).map((a) => a.name), [podName]);
  const created = await getPod(env.fake, podName);
  assert.ok(created, "the missing toolbox is created");
  assert.equal(readRestoreFromHibernate(created), true);
});
