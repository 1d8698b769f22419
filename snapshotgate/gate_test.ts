import assert from "node:assert/strict";
import { Pods } from "../kube/mod.ts";
import type { Pod } from "../kube/mod.ts";
import { FakeClient } from "../kube/testing/mod.ts";
import { FakeRegistry } from "../snapshot/testing/fake.ts";
import type { CocoonSet } from "../common/apis/v1/cocoonset_types.ts";
import type { CocoonHibernation } from "../common/apis/v1/cocoonhibernation_types.ts";
import { CocoonHibernations, CocoonSets } from "../common/apis/v1/resources.ts";
import {
  ANNOTATION_HIBERNATE,
  ANNOTATION_HIBERNATED_ON_NODE,
  ANNOTATION_RESTORE_FROM_HIBERNATE,
  setDerivesVMName,
  vmNameSplits,
} from "../common/meta/mod.ts";
import {
  actingRefusal,
  type Actor,
  type ClaimSources,
  deleteTagIfAllowed,
  mayDeleteTag,
  scannedVMNameIndex,
} from "./mod.ts";

/** The fake API as both the gate's uncached reader and (scanned) its cache's VM-name index. */
function sources(fake: FakeClient): ClaimSources {
  return { reader: fake, index: scannedVMNameIndex(fake) };
}

function set(ns: string, name: string, mod: (cs: CocoonSet) => void = () => {}): CocoonSet {
  const cs = {
    apiVersion: "cocoonset.cocoonstack.io/v1",
    kind: "CocoonSet",
    metadata: { namespace: ns, name, uid: `uid-${ns}-${name}` },
    spec: { agent: { image: "img" } },
  } as unknown as CocoonSet;
  mod(cs);
  return cs;
}

function pod(ns: string, name: string, annotations: Record<string, string> = {}): Pod {
  return { apiVersion: "v1", kind: "Pod", metadata: { namespace: ns, name, annotations } };
}

function request(
  ns: string,
  name: string,
  podName: string,
  desire: string,
  phase?: string,
): CocoonHibernation {
  return {
    apiVersion: "cocoonset.cocoonstack.io/v1",
    kind: "CocoonHibernation",
    metadata: { namespace: ns, name, uid: `uid-${name}` },
    spec: { podRef: { name: podName }, desire },
    ...(phase ? { status: { phase } } : {}),
  } as unknown as CocoonHibernation;
}

const requestActor = (ns: string, name: string, podName: string): Actor => ({
  kind: "CocoonHibernation",
  namespace: ns,
  name,
  podName,
});
const setActor = (ns: string, name: string): Actor => ({
  kind: "CocoonSet",
  namespace: ns,
  name,
  toolboxNames: [],
});

Deno.test("vmNameSplits lists every namespace a VM name could come from", () => {
  assert.deepEqual(vmNameSplits("vk-team-x-prod-0"), [
    { namespace: "team", rest: "x-prod-0" },
    { namespace: "team-x", rest: "prod-0" },
    { namespace: "team-x-prod", rest: "0" },
  ]);
  assert.deepEqual(vmNameSplits("other"), []);
  assert.equal(setDerivesVMName("ns", "demo", ["tb"], "vk-ns-demo-tb"), true);
  assert.equal(setDerivesVMName("ns", "demo", [], "vk-ns-demo-tb"), false);
  assert.equal(setDerivesVMName("ns", "demo", [], "vk-ns-demo-3"), true);
  assert.equal(setDerivesVMName("ns", "demo", [], "vk-other-demo-0"), false);
});

Deno.test("gate: a released seat's node hint claims the main's :hibernate", async () => {
  const fake = new FakeClient();
  fake.seed(
    CocoonSets,
    set("ns", "demo", (cs) => {
      cs.metadata.annotations = { [ANNOTATION_HIBERNATED_ON_NODE]: "node-a" };
      cs.status = { phase: "Suspended" } as CocoonSet["status"];
    }),
  );
  const v = await mayDeleteTag(
    sources(fake),
    requestActor("ns", "hib", "demo-0"),
    "vk-ns-demo-0",
    "hibernate",
  );
  assert.equal(v.allowed, false);
  assert.ok(!v.allowed && v.kind === "claimed");
  assert.match(!v.allowed ? v.message : "", /CocoonSet ns\/demo \(released seat/);
});

Deno.test("gate: a migration in flight claims the main's :hibernate", async () => {
  const fake = new FakeClient();
  fake.seed(
    CocoonSets,
    set("ns", "demo", (cs) => {
      cs.status = { phase: "Migrating" } as CocoonSet["status"];
    }),
  );
  const v = await mayDeleteTag(
    sources(fake),
    requestActor("ns", "hib", "demo-0"),
    "vk-ns-demo-0",
    "hibernate",
  );
  assert.ok(!v.allowed && /migration in flight/.test(v.message));
});

Deno.test("gate: the claimant table on pods and requests", async (t) => {
  const vm = "vk-ns-demo-0";
  const cases: [string, (f: FakeClient) => void, boolean][] = [
    ["no claimant", () => {}, true],
    ["a hibernated pod", (f) => {
      f.seed(Pods, pod("ns", "demo-0", { [ANNOTATION_HIBERNATE]: "true" }));
    }, false],
    ["a restore-marked pod not yet live", (f) => {
      f.seed(Pods, pod("ns", "demo-0", { [ANNOTATION_RESTORE_FROM_HIBERNATE]: "true" }));
    }, false],
    ["a plain pod", (f) => {
      f.seed(Pods, pod("ns", "demo-0"));
    }, true],
    ["a live Hibernate request", (f) => {
      f.seed(CocoonHibernations, request("ns", "other", "demo-0", "Hibernate", "Hibernated"));
    }, false],
    ["a Waking request", (f) => {
      f.seed(CocoonHibernations, request("ns", "other", "demo-0", "Wake", "Waking"));
    }, false],
    ["a finished Wake request", (f) => {
      f.seed(CocoonHibernations, request("ns", "other", "demo-0", "Wake", "Active"));
    }, true],
    ["a set suspended with retain", (f) => {
      f.seed(CocoonSets, set("ns", "demo", (cs) => cs.spec.suspend = true));
    }, false],
  ];
  for (const [name, seed, allowed] of cases) {
    await t.step(name, async () => {
      const fake = new FakeClient();
      seed(fake);
      const registry = new FakeRegistry();
      registry.put(vm, "hibernate");
      const v = await deleteTagIfAllowed(
        { ...sources(fake), registry },
        requestActor("ns", "hib", "demo-0"),
        vm,
        "hibernate",
      );
      assert.equal(v.allowed, allowed);
      assert.equal(registry.contains(vm, "hibernate"), !allowed);
    });
  }
});

Deno.test("gate: a name the actor cannot derive is refused", async () => {
  const fake = new FakeClient();
  const v = await mayDeleteTag(
    sources(fake),
    setActor("ns", "demo"),
    "vk-victim-app-0",
    "hibernate",
  );
  assert.ok(!v.allowed && v.kind === "not-derived");
  assert.match(!v.allowed ? v.message : "", /vk-victim-app-0/);
  const w = await actingRefusal(
    sources(fake),
    requestActor("ns", "hib", "demo-0"),
    "vk-victim-app-0",
    true,
  );
  assert.equal(w?.kind, "not-derived");
});

Deno.test("gate: team / x-prod-0 and team-x / prod-0 collide and are refused naming both", async () => {
  const fake = new FakeClient();
  fake.seed(Pods, pod("team", "x-prod-0"));
  fake.seed(CocoonSets, set("team-x", "prod"));
  const vm = "vk-team-x-prod-0";
  const bySet = await mayDeleteTag(sources(fake), setActor("team-x", "prod"), vm, "hibernate");
  assert.ok(!bySet.allowed && bySet.kind === "collision");
  assert.match(!bySet.allowed ? bySet.message : "", /CocoonSet team-x\/prod.*Pod team\/x-prod-0/);
  const byRequest = await actingRefusal(
    sources(fake),
    requestActor("team", "hib", "x-prod-0"),
    vm,
    true,
  );
  assert.equal(byRequest?.kind, "collision");
  assert.match(byRequest?.message ?? "", /CocoonSet team-x\/prod/);
  // Alone in its namespace, the same actor may act.
  const alone = new FakeClient();
  alone.seed(CocoonSets, set("team-x", "prod"));
  assert.equal(
    (await mayDeleteTag(sources(alone), setActor("team-x", "prod"), vm, "hibernate")).allowed,
    true,
  );
});

Deno.test("gate: a request yielding to the set's migration does not hold the migration's tag", async () => {
  const vm = "vk-ns-demo-0";
  const migrating = set("ns", "demo", (cs) => {
    cs.status = { phase: "Migrating" } as CocoonSet["status"];
  });
  const fake = new FakeClient();
  fake.seed(CocoonSets, migrating);
  // The restored main runs; the Hibernate request waits for the migration (it yields).
  fake.seed(Pods, pod("ns", "demo-0"));
  fake.seed(CocoonHibernations, request("ns", "hib", "demo-0", "Hibernate", "Hibernating"));
  const registry = new FakeRegistry();
  registry.put(vm, "hibernate");
  const v = await deleteTagIfAllowed(
    { ...sources(fake), registry },
    setActor("ns", "demo"),
    vm,
    "hibernate",
  );
  assert.equal(v.allowed, true, !v.allowed ? v.message : "");
  assert.equal(registry.contains(vm, "hibernate"), false);

  // Once the request made vk-cocoon hibernate the pod again, the pod holds the fresh push.
  const asked = new FakeClient();
  asked.seed(CocoonSets, migrating);
  asked.seed(Pods, pod("ns", "demo-0", { [ANNOTATION_HIBERNATE]: "true" }));
  asked.seed(CocoonHibernations, request("ns", "hib", "demo-0", "Hibernate", "Hibernating"));
  const w = await mayDeleteTag(sources(asked), setActor("ns", "demo"), vm, "hibernate");
  assert.ok(!w.allowed && /Pod ns\/demo-0 \(asked to hibernate\)/.test(w.message));

  // A set that runs no flow of its own on the VM still waits for the request.
  const running = new FakeClient();
  running.seed(CocoonSets, set("ns", "demo"));
  running.seed(CocoonHibernations, request("ns", "hib", "demo-0", "Hibernate", "Hibernated"));
  const r = await mayDeleteTag(sources(running), setActor("ns", "demo"), vm, "hibernate");
  assert.ok(!r.allowed && /CocoonHibernation ns\/hib/.test(r.message));
});
