/**
 * The VM-name index as the operator's cache answers it: every object of any namespace that names
 * a VM is found under that name, whichever way it names it.
 */
import assert from "node:assert/strict";
import { Manager, Pods } from "../kube/mod.ts";
import type { KubeObject, Pod, ResourceType } from "../kube/mod.ts";
import { FakeClient } from "../kube/testing/mod.ts";
import type { CocoonSet } from "../common/apis/v1/cocoonset_types.ts";
import type { CocoonHibernation } from "../common/apis/v1/cocoonhibernation_types.ts";
import { CocoonHibernations, CocoonSets } from "../common/apis/v1/resources.ts";
import { ANNOTATION_VM_NAME } from "../common/meta/mod.ts";
import { managerVMNameIndex, registerVMNameIndex, scannedVMNameIndex } from "./mod.ts";
import type { VMNameIndex } from "./mod.ts";
import { vmNameLookupKeys } from "./vm_index.ts";

const objects: [ResourceType<KubeObject>, KubeObject][] = [
  [Pods as ResourceType<KubeObject>, {
    apiVersion: "v1",
    kind: "Pod",
    metadata: { namespace: "team", name: "x-prod-0" },
  } as Pod],
  [Pods as ResourceType<KubeObject>, {
    apiVersion: "v1",
    kind: "Pod",
    metadata: {
      namespace: "a",
      name: "renamed",
      annotations: { [ANNOTATION_VM_NAME]: "vk-a-b-0" },
    },
  } as Pod],
  [CocoonSets as ResourceType<KubeObject>, {
    apiVersion: "cocoonset.cocoonstack.io/v1",
    kind: "CocoonSet",
    metadata: { namespace: "team-x", name: "prod" },
    spec: { agent: { image: "img", replicas: 1 }, toolboxes: [{ name: "db", image: "img" }] },
    status: { toolboxes: [{ name: "cache" }] },
  } as unknown as CocoonSet],
  [CocoonHibernations as ResourceType<KubeObject>, {
    apiVersion: "cocoonset.cocoonstack.io/v1",
    kind: "CocoonHibernation",
    metadata: { namespace: "ns", name: "hib" },
    spec: { podRef: { name: "demo-0" }, desire: "Hibernate" },
    status: { vmName: "vk-ns-old-0" },
  } as unknown as CocoonHibernation],
];

/** "Kind ns/name" of every object of each kind filed under one of vmName's lookup keys. */
async function named(index: VMNameIndex, vmName: string): Promise<string[]> {
  const out = new Set<string>();
  for (const key of vmNameLookupKeys(vmName)) {
    for (const rt of [Pods, CocoonSets, CocoonHibernations] as ResourceType<KubeObject>[]) {
      for (const o of await index.lookup(rt, key)) {
        out.add(`${rt.kind} ${o.metadata.namespace}/${o.metadata.name}`);
      }
    }
  }
  return [...out].sort();
}

const expectations: [string, string[]][] = [
  // The pod derives it, the set derives it as its slot 0: two namespaces share the name.
  ["vk-team-x-prod-0", ["CocoonSet team-x/prod", "Pod team/x-prod-0"]],
  // Any slot number, above replicas too (a scale-down leaves its VMs' tags).
  ["vk-team-x-prod-7", ["CocoonSet team-x/prod"]],
  // Toolboxes of the spec and of the status.
  ["vk-team-x-prod-db", ["CocoonSet team-x/prod"]],
  ["vk-team-x-prod-cache", ["CocoonSet team-x/prod"]],
  ["vk-team-x-prod-web", []],
  // A pod under the name its annotation shows, and under the name it derives.
  ["vk-a-b-0", ["Pod a/renamed"]],
  ["vk-a-renamed", ["Pod a/renamed"]],
  // A request under its target's name and under the name its status recorded.
  ["vk-ns-demo-0", ["CocoonHibernation ns/hib"]],
  ["vk-ns-old-0", ["CocoonHibernation ns/hib"]],
];

Deno.test({
  name: "VM-name index: the operator's cache finds every object that names a VM",
  sanitizeOps: false,
  sanitizeResources: false,
  async fn() {
    const api = new FakeClient();
    for (const [rt, obj] of objects) api.seed(rt, obj);
    const mgr = new Manager({
      client: api,
      metricsBindAddress: "0",
      healthProbeBindAddress: "127.0.0.1:0",
      leaderElection: false,
      leaderElectionId: "unused",
    });
    registerVMNameIndex(mgr);
    registerVMNameIndex(mgr); // a second controller's setup finds it there
    const stop = new AbortController();
    mgr.cache.start(stop.signal);
    try {
      await mgr.cache.waitForSync(stop.signal);
      const index = managerVMNameIndex(mgr);
      const before = api.actions.length;
      for (const [vmName, want] of expectations) {
        assert.deepEqual(await named(index, vmName), want, vmName);
      }
      assert.deepEqual(api.actions.slice(before), [], "the cache answered every lookup");
      assert.equal(index.holds("any"), true);
      // The index computed by listing (the fake standing in for the cache) agrees.
      const scanned = scannedVMNameIndex(api);
      for (const [vmName, want] of expectations) {
        assert.deepEqual(await named(scanned, vmName), want, `${vmName} (scanned)`);
      }
    } finally {
      stop.abort();
      await mgr.cache.stopped();
    }
  },
});
