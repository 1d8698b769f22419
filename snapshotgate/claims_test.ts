/**
 * Where the gate and the tenancy check read: the cache's VM-name index names the namespaces,
 * the API server decides. A claimant the cache has not seen yet still stops a delete; a
 * collision the cache still shows but the API server no longer holds refuses nothing; the sets
 * and requests of only the namespaces the index names (plus the actor's own, for a delete) are
 * listed past the cache, and a poll of an actor already acting under its name reads nothing.
 */
import assert from "node:assert/strict";
import { Pods } from "../kube/mod.ts";
import type { KubeObject, Pod, ResourceType } from "../kube/mod.ts";
import { FakeClient, staleCache } from "../kube/testing/mod.ts";
import type { CocoonSet } from "../common/apis/v1/cocoonset_types.ts";
import type { CocoonHibernation } from "../common/apis/v1/cocoonhibernation_types.ts";
import { CocoonHibernations, CocoonSets } from "../common/apis/v1/resources.ts";
import {
  ANNOTATION_HIBERNATE,
  ANNOTATION_RESTORE_FROM_HIBERNATE,
  ANNOTATION_VM_NAME,
} from "../common/meta/mod.ts";
import {
  actingRefusal,
  type Actor,
  type ClaimSources,
  mayDeleteTag,
  scannedVMNameIndex,
  type VMNameIndex,
} from "./mod.ts";

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

function request(ns: string, name: string, podName: string, desire: string): CocoonHibernation {
  return {
    apiVersion: "cocoonset.cocoonstack.io/v1",
    kind: "CocoonHibernation",
    metadata: { namespace: ns, name, uid: `uid-${name}` },
    spec: { podRef: { name: podName }, desire },
  } as unknown as CocoonHibernation;
}

const requestActor = (ns: string, name: string, podName: string): Actor => ({
  kind: "CocoonHibernation",
  namespace: ns,
  name,
  podName,
});
const setActor = (ns: string, name: string, creationTimestamp?: string): Actor => ({
  kind: "CocoonSet",
  namespace: ns,
  name,
  toolboxNames: [],
  creationTimestamp,
});

type Seed = [ResourceType<KubeObject>, KubeObject];
const P = Pods as ResourceType<KubeObject>;
const S = CocoonSets as ResourceType<KubeObject>;
const H = CocoonHibernations as ResourceType<KubeObject>;

/** An API server holding `api`, and a cache (a second fake, scanned) holding `cached`. */
function world(api: Seed[], cached: Seed[], holds?: (ns: string) => boolean) {
  const server = new FakeClient();
  for (const [rt, obj] of api) server.seed(rt, obj);
  const cache = new FakeClient();
  for (const [rt, obj] of cached) cache.seed(rt, obj);
  const index: VMNameIndex = { ...scannedVMNameIndex(cache), ...(holds ? { holds } : {}) };
  const sources: ClaimSources = { reader: server, index };
  /** The requests the API server answered (each "verb plural namespace/name"). */
  const reads = () =>
    server.actions.map((a) => `${a.verb} ${a.resource.plural} ${a.namespace}/${a.name}`);
  return { server, sources, reads };
}

Deno.test("gate: a claimant the cache has not seen yet still stops a delete", async (t) => {
  const vm = "vk-ns-demo-0";
  const cases: [string, Seed][] = [
    ["a Hibernate request created a moment ago", [H, request("ns", "new", "demo-0", "Hibernate")]],
    ["a pod asked to hibernate a moment ago", [
      P,
      pod("ns", "demo-0", { [ANNOTATION_HIBERNATE]: "true" }),
    ]],
    ["a restore pod created a moment ago", [
      P,
      pod("ns", "demo-0", { [ANNOTATION_RESTORE_FROM_HIBERNATE]: "true" }),
    ]],
    ["a set that began migrating a moment ago", [
      S,
      set("ns", "demo", (cs) => {
        cs.status = { phase: "Migrating" } as CocoonSet["status"];
      }),
    ]],
  ];
  for (const [name, claimant] of cases) {
    await t.step(name, async () => {
      // The cache shows nothing at all; the API server holds the claimant.
      const { sources } = world([claimant], []);
      const staleIndex = scannedVMNameIndex(staleCache(new FakeClient(), { list: () => [] }));
      const v = await mayDeleteTag(
        { ...sources, index: staleIndex },
        requestActor("ns", "hib", "demo-0"),
        vm,
        "hibernate",
      );
      assert.ok(!v.allowed && v.kind === "claimed", `refused: ${JSON.stringify(v)}`);
    });
  }
});

Deno.test("gate: the read before a delete lists the actor's namespace and the ones the index names", async () => {
  const vm = "vk-team-x-prod-0";
  const prod = set("team-x", "prod");
  const alone = world([[S, prod]], [[S, prod]]);
  const ok = await mayDeleteTag(alone.sources, setActor("team-x", "prod"), vm, "hibernate");
  assert.equal(ok.allowed, true);
  // team / x-prod-0 and team-x-prod / 0 are splits of the name: nothing there is in the index,
  // so only the pod the name derives there is read (a pod no set owns is not in the cache).
  assert.deepEqual(alone.reads().sort(), [
    "get pods team-x-prod/0",
    "get pods team-x/prod-0",
    "get pods team/x-prod-0",
    "list cocoonhibernations team-x/",
    "list cocoonsets team-x/",
  ]);

  const other = set(
    "team",
    "x-prod",
    (cs) => cs.metadata.creationTimestamp = "2020-01-01T00:00:00Z",
  );
  const shared = world([[S, prod], [S, other]], [[S, prod], [S, other]]);
  const v = await mayDeleteTag(shared.sources, setActor("team-x", "prod"), vm, "hibernate");
  assert.ok(!v.allowed && v.kind === "collision");
  assert.match(v.message, /CocoonSet team\/x-prod/);
  assert.deepEqual(shared.reads().sort(), [
    "get pods team-x-prod/0",
    "get pods team-x/prod-0",
    "get pods team/x-prod-0",
    "list cocoonhibernations team-x/",
    "list cocoonhibernations team/",
    "list cocoonsets team-x/",
    "list cocoonsets team/",
  ]);
});

Deno.test("gate: a pod no set owns, in another namespace and outside the cache, still stops a delete", async () => {
  const vm = "vk-team-x-prod-0";
  const prod = set("team-x", "prod");
  // The cache holds only CocoonSet pods: team/x-prod-0 is on the API server alone.
  const { sources } = world([[S, prod], [P, pod("team", "x-prod-0")]], [[S, prod]]);
  const v = await mayDeleteTag(sources, setActor("team-x", "prod"), vm, "latest");
  assert.ok(!v.allowed && v.kind === "collision");
  assert.match(v.message, /Pod team\/x-prod-0/);
});

Deno.test("tenancy: a collision the cache still shows but the API server no longer holds refuses nothing", async () => {
  const vm = "vk-team-x-prod-0";
  // The cache still shows team-x/prod, deleted since.
  const { sources, reads } = world([], [[S, set("team-x", "prod")]]);
  const refusal = await actingRefusal(sources, requestActor("team", "hib", "x-prod-0"), vm, false);
  assert.equal(refusal, undefined);
  assert.deepEqual(reads().sort(), [
    "get pods team-x/prod-0",
    "list cocoonhibernations team-x/",
    "list cocoonsets team-x/",
  ]);
});

Deno.test("tenancy: a poll under a name no other namespace shares costs no API request", async () => {
  const vm = "vk-team-x-prod-0";
  const { sources, reads } = world([], [[P, pod("team", "x-prod-0")]]);
  const actor = requestActor("team", "hib", "x-prod-0");
  assert.equal(await actingRefusal(sources, actor, vm, false), undefined);
  assert.deepEqual(reads(), []);
  // The first act under the name reads the pod it derives in each other namespace, nothing else.
  assert.equal(await actingRefusal(sources, actor, vm, true), undefined);
  assert.deepEqual(reads().sort(), ["get pods team-x-prod/0", "get pods team-x/prod-0"]);
});

Deno.test("tenancy: a namespace the index names is listed past the cache only at a VM-name decision", async () => {
  const vm = "vk-team-x-prod-0";
  const first = set(
    "team-x",
    "prod",
    (cs) => cs.metadata.creationTimestamp = "2026-01-01T00:00:00Z",
  );
  // A set of team created later: a second comer, which holds nothing under the name.
  const later = set(
    "team",
    "x-prod",
    (cs) => cs.metadata.creationTimestamp = "2026-02-01T00:00:00Z",
  );
  const { sources, reads } = world([[S, first], [S, later]], [[S, first], [S, later]]);
  const actor = setActor("team-x", "prod", "2026-01-01T00:00:00Z");
  assert.equal(await actingRefusal(sources, actor, vm, false), undefined);
  assert.deepEqual(reads(), [], "a pass already acting under the name stays with the cache");
  assert.equal(await actingRefusal(sources, actor, vm, true), undefined);
  assert.deepEqual(reads().sort(), [
    "get pods team-x-prod/0",
    "get pods team/x-prod-0",
    "list cocoonhibernations team/",
    "list cocoonsets team/",
  ]);
});

Deno.test("tenancy: at a VM-name decision a pod no set owns in another namespace refuses the act", async () => {
  const vm = "vk-team-x-late-0";
  const late = set("team-x", "late");
  // As vk-cocoon runs it: the pod of team derives (and names) the same VM.
  const other = pod("team", "x-late-0", { [ANNOTATION_VM_NAME]: vm });
  const { sources } = world([[S, late], [P, other]], [[S, late]]);
  const actor = setActor("team-x", "late");
  assert.equal(
    await actingRefusal(sources, actor, vm, false),
    undefined,
    "the cache cannot see it",
  );
  const refusal = await actingRefusal(sources, actor, vm, true);
  assert.equal(refusal?.kind, "collision");
  assert.match(refusal?.message ?? "", /Pod team\/x-late-0/);
});

Deno.test("tenancy: a namespace the cache does not hold (another shard's) is read past the cache", async () => {
  const vm = "vk-team-x-prod-0";
  // team-x's set lives in a namespace this replica's cache does not hold.
  const { sources } = world([[S, set("team-x", "prod")]], [], (ns) => ns !== "team-x");
  const refusal = await actingRefusal(sources, requestActor("team", "hib", "x-prod-0"), vm, false);
  assert.equal(refusal?.kind, "collision");
  assert.match(refusal?.message ?? "", /CocoonSet team-x\/prod/);
});

Deno.test("index: a pod whose vm-name annotation names the VM is found under that name", async () => {
  const vm = "vk-ns-demo-0";
  // A pod of another name that vk-cocoon runs as the VM, asked to hibernate.
  const runner = pod("ns", "renamed", { [ANNOTATION_VM_NAME]: vm, [ANNOTATION_HIBERNATE]: "true" });
  const { sources } = world([[P, runner]], [[P, runner]]);
  const v = await mayDeleteTag(sources, requestActor("ns", "hib", "demo-0"), vm, "hibernate");
  assert.ok(!v.allowed && /Pod ns\/renamed \(asked to hibernate\)/.test(v.message));
});
