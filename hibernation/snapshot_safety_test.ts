/**
 * Snapshot safety on the fake API: a CocoonHibernation never drops a tag a CocoonSet still needs, yields
 * to the set that drives the VM, and acts only under a name it derives from its own namespace.
 */
import assert from "node:assert/strict";
import type { CocoonSet } from "../common/apis/v1/cocoonset_types.ts";
import {
  COCOON_HIBERNATION_PHASE_ACTIVE,
  COCOON_HIBERNATION_PHASE_FAILED,
  COCOON_HIBERNATION_PHASE_HIBERNATED,
  COCOON_HIBERNATION_PHASE_HIBERNATING,
  COCOON_HIBERNATION_PHASE_WAKING,
  CocoonHibernations,
  CocoonSets,
} from "../common/apis/v1/mod.ts";
import {
  ANNOTATION_HIBERNATED_ON_NODE,
  ANNOTATION_VMID,
  readHibernateState,
} from "../common/meta/mod.ts";
import { Events, Pods } from "../kube/mod.ts";
import type { Pod } from "../kube/mod.ts";
import { staleCache } from "../kube/testing/mod.ts";
import { FakeRegistry } from "../snapshot/testing/fake.ts";
import { at, Harness, NS, request, VM, vmPod } from "./_fixtures.ts";
import { REASON_YIELDED_TO_COCOON_SET } from "./precedence.ts";
import { CONDITION_TYPE_BLOCKED } from "./precedence.ts";

function set(name: string, mod: (cs: CocoonSet) => void, namespace = NS): CocoonSet {
  const cs = {
    apiVersion: "cocoonset.cocoonstack.io/v1",
    kind: "CocoonSet",
    metadata: { namespace, name, uid: `uid-${namespace}-${name}`, generation: 1 },
    spec: { agent: { image: "img" } },
  } as unknown as CocoonSet;
  mod(cs);
  return cs;
}

function ownedBy(pod: Pod, setName: string): Pod {
  pod.metadata.ownerReferences = [{
    apiVersion: "cocoonset.cocoonstack.io/v1",
    kind: "CocoonSet",
    name: setName,
    uid: `uid-${NS}-${setName}`,
    controller: true,
  }];
  return pod;
}

const livePod = (hibernate: boolean) =>
  ownedBy(
    vmPod({ vmID: "vmid-1", running: true, lifecycle: { state: "ready" }, hibernate }),
    "demo",
  );

Deno.test("a request deleted while its pod is gone keeps the tag a CocoonSet needs", async (t) => {
  for (
    const [name, mod] of [
      ["released seat (node hint)", (cs: CocoonSet) => {
        cs.metadata.annotations = { [ANNOTATION_HIBERNATED_ON_NODE]: "node-a" };
        cs.status = { phase: "Suspended" } as CocoonSet["status"];
      }],
      ["migration gap (old main deleted, restored main not created)", (cs: CocoonSet) => {
        cs.spec.nodeName = "node-b";
        cs.status = { phase: "Migrating" } as CocoonSet["status"];
      }],
    ] as const
  ) {
    await t.step(name, async () => {
      const registry = new FakeRegistry();
      registry.put(VM, "hibernate");
      const h = Harness.create([
        request("hib", "Hibernate", {
          deleting: true,
          status: { vmName: VM, phase: COCOON_HIBERNATION_PHASE_HIBERNATED },
        }),
      ], { registry });
      h.api.seed(CocoonSets, set("demo", mod));
      await h.reconcile("hib");
      assert.equal(await h.gone("hib"), true, "the request still goes");
      assert.equal(registry.contains(VM, "hibernate"), true, "the set's snapshot is kept");
      assert.equal(registry.callsOf("deleteManifest").length, 0);
      await h.close();
    });
  }
});

Deno.test("a finished Wake request yields to a retain suspend, once, without a loop", async () => {
  const registry = new FakeRegistry();
  registry.put(VM, "hibernate");
  const h = Harness.create([
    request("hib", "Wake", { status: { vmName: VM, phase: COCOON_HIBERNATION_PHASE_ACTIVE } }),
    // The set asked the VM to hibernate; vk-cocoon pushed the tag and has not removed it yet.
    livePod(true),
  ], { registry });
  h.api.seed(
    CocoonSets,
    set("demo", (cs) => {
      cs.spec.suspend = true;
      cs.status = { phase: "Suspending" } as CocoonSet["status"];
    }),
  );
  assert.deepEqual(await h.reconcile("hib"), { requeueAfter: 5_000 });
  assert.equal(readHibernateState(await h.pod()), true, "the suspend's request stays");
  assert.equal(registry.contains(VM, "hibernate"), true, "the just-pushed tag stays");
  const got = await h.hib("hib");
  const blocked = got.status?.conditions?.find((c) => c.type === CONDITION_TYPE_BLOCKED);
  assert.equal(blocked?.status, "True");
  assert.match(blocked?.message ?? "", /CocoonSet ns\/demo is suspended/);
  assert.equal(got.status?.phase, COCOON_HIBERNATION_PHASE_ACTIVE);
  assert.deepEqual(await h.reasons("hib"), [REASON_YIELDED_TO_COCOON_SET]);
  // Passes on: no write at all (one per requeue interval at most), no second Event.
  const writes = h.writes();
  await h.reconcile("hib");
  await h.reconcile("hib");
  assert.equal(h.writes(), writes);
  assert.deepEqual(await h.reasons("hib"), [REASON_YIELDED_TO_COCOON_SET]);
  await h.close();
});

Deno.test("a live Hibernate request does not drive a main the set migrates", async () => {
  const registry = new FakeRegistry();
  registry.put(VM, "hibernate");
  const h = Harness.create([request("hib", "Hibernate"), livePod(false)], { registry });
  h.api.seed(
    CocoonSets,
    set("demo", (cs) => {
      cs.spec.nodeName = "node-b";
      cs.status = { phase: "Migrating" } as CocoonSet["status"];
    }),
  );
  await h.reconcile("hib");
  assert.equal(readHibernateState(await h.pod()), false, "the migration's restored main runs on");
  assert.deepEqual(await h.reasons("hib"), [REASON_YIELDED_TO_COCOON_SET]);
  // Once the set lets go, the request acts and says it is no longer blocked.
  const cs = await h.api.get(CocoonSets, NS, "demo");
  cs.status = { phase: "Running" } as CocoonSet["status"];
  await h.api.updateStatus(CocoonSets, cs);
  await h.reconcile("hib");
  assert.equal(readHibernateState(await h.pod()), true);
  const blocked = (await h.hib("hib")).status?.conditions?.find((c) =>
    c.type === CONDITION_TYPE_BLOCKED
  );
  assert.equal(blocked?.status, "False");
  await h.close();
});

Deno.test("tenancy: a pod annotation naming another namespace's VM is refused with a Warning", async () => {
  const registry = new FakeRegistry();
  registry.put("vk-victim-app-0", "hibernate");
  const h = Harness.create([
    request("hib", "Wake"),
    vmPod({ vmName: "vk-victim-app-0", vmID: "x", running: true, lifecycle: { state: "ready" } }),
  ], { registry });
  await h.reconcile("hib");
  const got = await h.hib("hib");
  assert.equal(got.status?.phase, COCOON_HIBERNATION_PHASE_FAILED);
  assert.deepEqual(await h.reasons("hib"), ["VMNameRefused"]);
  const ev = (await h.events()).find((e) => e.reason === "VMNameRefused");
  assert.match(ev?.message ?? "", /vk-victim-app-0/);
  assert.equal(registry.contains("vk-victim-app-0", "hibernate"), true);
  await h.close();
});

Deno.test("tenancy: team / x-prod-0 and team-x / prod-0 share a VM name; the request is refused naming both", async () => {
  const vm = "vk-team-x-prod-0";
  const registry = new FakeRegistry();
  registry.put(vm, "hibernate");
  const hib = request("hib", "Hibernate", { pod: "x-prod-0" });
  hib.metadata.namespace = "team";
  const pod = vmPod({ name: "x-prod-0", vmName: vm, vmID: "x", running: true });
  pod.metadata.namespace = "team";
  const h = Harness.create([hib, pod], { registry });
  h.api.seed(CocoonSets, set("prod", () => {}, "team-x"));
  await h.reconciler.reconcile({ namespace: "team", name: "hib" }, new AbortController().signal);
  const got = await h.api.get(CocoonHibernations, "team", "hib");
  assert.equal(got.status?.phase, COCOON_HIBERNATION_PHASE_FAILED);
  await h.recorder.flush();
  const ev = (await h.api.list(Events)).items.find((e) => e.reason === "VMNameRefused");
  assert.match(ev?.message ?? "", /CocoonHibernation team\/hib.*CocoonSet team-x\/prod/);
  assert.equal(readHibernateState(await h.api.get(Pods, "team", "x-prod-0")), false);
  await h.close();
});

Deno.test("on a pod without lifecycle annotations, Hibernate ends once vk-cocoon clears the VM id", async () => {
  const registry = new FakeRegistry();
  const live = vmPod({ vmID: "vmid-1", running: true });
  live.spec!.nodeName = "node-a";
  const h = Harness.create([request("hib", "Hibernate"), live], { registry });
  await h.reconcile("hib");
  assert.equal(readHibernateState(await h.pod()), true, "the VM is asked to hibernate");
  // vk-cocoon saves and pushes: the tag exists while the VM still runs under its id.
  registry.put(VM, "hibernate");
  await h.reconcile("hib");
  assert.notEqual((await h.hib("hib")).status?.phase, COCOON_HIBERNATION_PHASE_HIBERNATED);
  // It removes the VM and clears the id last: that is its confirmation.
  const pod = await h.pod();
  delete pod.metadata.annotations![ANNOTATION_VMID];
  pod.status = { phase: "Pending" };
  await h.api.update(Pods, pod);
  await h.reconcile("hib");
  assert.equal((await h.hib("hib")).status?.phase, COCOON_HIBERNATION_PHASE_HIBERNATED);
  await h.close();
});

Deno.test("the time a Hibernating request yields to its CocoonSet does not count toward its deadline", async () => {
  const h = Harness.create([request("hib", "Hibernate"), livePod(false)]);
  const demo = h.api.seed(
    CocoonSets,
    set("demo", (cs) => cs.status = { phase: "Running" } as CocoonSet["status"]),
  );
  const setPhase = async (phase: string) => {
    const cs = await h.api.get(CocoonSets, NS, demo.metadata.name!);
    cs.status = { phase } as CocoonSet["status"];
    await h.api.updateStatus(CocoonSets, cs);
  };
  await h.reconcile("hib");
  assert.equal((await h.hib("hib")).status?.phase, COCOON_HIBERNATION_PHASE_HIBERNATING);
  h.clock.advance(60_000); // one of its three minutes used
  await setPhase("Migrating");
  await h.reconcile("hib");
  const blocked = (await h.hib("hib")).status?.conditions?.find((c) =>
    c.type === CONDITION_TYPE_BLOCKED
  );
  assert.equal(blocked?.status, "True");
  h.clock.advance(10 * 60_000); // far past the deadline, all of it yielded
  await setPhase("Running");
  await h.reconcile("hib");
  assert.equal((await h.hib("hib")).status?.phase, COCOON_HIBERNATION_PHASE_HIBERNATING);
  h.clock.advance(90_000); // 2.5 minutes counted
  await h.reconcile("hib");
  assert.equal((await h.hib("hib")).status?.phase, COCOON_HIBERNATION_PHASE_HIBERNATING);
  h.clock.advance(60_000); // 3.5 minutes counted: the deadline still holds
  await h.reconcile("hib");
  assert.equal((await h.hib("hib")).status?.phase, COCOON_HIBERNATION_PHASE_FAILED);
  await h.close();
});

Deno.test("a lagging cache showing an earlier round's hibernated pod does not end a silent Hibernate", async () => {
  const registry = new FakeRegistry();
  registry.put(VM, "hibernate"); // the earlier round's
  // Stored: woken since (VM vmid-2) and asked to hibernate again; the VM still runs.
  const stored = vmPod({ hibernate: true, vmID: "vmid-2", running: true });
  stored.spec!.nodeName = "node-a";
  let staleServed = 0;
  const uncachedPodGets: string[] = [];
  const h = Harness.create([
    request("hib", "Hibernate", {
      status: { phase: COCOON_HIBERNATION_PHASE_HIBERNATING, vmName: VM },
    }),
    stored,
  ], {
    registry,
    cachedClient: (api) => {
      let stale: Pod | undefined;
      return staleCache(api, {
        get: async (rt, _namespace, _name, read) => {
          const got = await read();
          if (rt !== Pods) return got;
          // The cache still shows the earlier round: id cleared, nothing running.
          stale ??= (() => {
            const copy = structuredClone(got) as Pod;
            delete copy.metadata.annotations![ANNOTATION_VMID];
            copy.status = { phase: "Pending" };
            return copy;
          })();
          staleServed++;
          return stale;
        },
      });
    },
    // Lets every read through, recording which pods were read past the cache.
    apiReader: (api) =>
      staleCache(api, {
        get: (rt, namespace, name) => {
          if (rt === Pods) uncachedPodGets.push(`${namespace}/${name}`);
          return undefined;
        },
      }),
  });
  await h.reconcile("hib");
  assert.equal((await h.hib("hib")).status?.phase, COCOON_HIBERNATION_PHASE_HIBERNATING);
  // The pass worked from the stale copy, whose cleared id reads as confirmed, and so had to ask
  // the API server about the pod before it probed the registry.
  assert.ok(staleServed > 0, "the stale copy was served");
  assert.deepEqual(
    uncachedPodGets.filter((ref) => ref === `${NS}/${stored.metadata.name}`).length,
    1,
    "read past the cache once, to confirm (the tenancy check of a request already acting " +
      "under the name reads the cache)",
  );
  assert.deepEqual(registry.callsOf("hasManifest", VM), [], "the registry is not asked");
  await h.close();
});

Deno.test("the time a Waking request yields to its CocoonSet does not count toward its deadline", async () => {
  const h = Harness.create([
    request("hib", "Wake", {
      status: {
        phase: COCOON_HIBERNATION_PHASE_WAKING,
        vmName: VM,
        conditions: [{
          type: "Ready",
          status: "False",
          reason: "Pending",
          message: COCOON_HIBERNATION_PHASE_WAKING,
          observedGeneration: 1,
          lastTransitionTime: at(0),
        }],
      },
    }),
    // Not running yet: the restore is slow.
    ownedBy(vmPod({ hibernate: false }), "demo"),
  ]);
  h.api.seed(
    CocoonSets,
    set("demo", (cs) => cs.status = { phase: "Migrating" } as CocoonSet["status"]),
  );
  await h.reconcile("hib");
  assert.equal(
    (await h.hib("hib")).status?.conditions?.find((c) => c.type === CONDITION_TYPE_BLOCKED)?.status,
    "True",
  );
  h.clock.advance(20 * 60_000); // far past the 5-minute deadline, all of it yielded
  const cs = await h.api.get(CocoonSets, NS, "demo");
  cs.status = { phase: "Running" } as CocoonSet["status"];
  await h.api.updateStatus(CocoonSets, cs);
  await h.reconcile("hib");
  assert.equal((await h.hib("hib")).status?.phase, COCOON_HIBERNATION_PHASE_WAKING);
  h.clock.advance(6 * 60_000); // now past it, counted outside the yield
  await h.reconcile("hib");
  assert.equal((await h.hib("hib")).status?.phase, COCOON_HIBERNATION_PHASE_FAILED);
  await h.close();
});

Deno.test("a Wake request that never saw the VM down keeps the tag its push just wrote (no lifecycle annotations)", async () => {
  // An unsuspend withdrew the set's hibernate request after vk-cocoon pushed the tag but before
  // it removed the VM: the pod still shows the old VM live and no lifecycle annotation at all.
  const registry = new FakeRegistry();
  registry.put(VM, "hibernate");
  const pod = ownedBy(vmPod({ vmID: "vmid-1", running: true }), "demo");
  const h = Harness.create([request("wake", "Wake"), pod], { registry });
  h.api.seed(
    CocoonSets,
    set("demo", (cs) => cs.status = { phase: "Running" } as CocoonSet["status"]),
  );
  await h.reconcile("wake");
  assert.equal((await h.hib("wake")).status?.phase, COCOON_HIBERNATION_PHASE_ACTIVE);
  assert.equal(registry.contains(VM, "hibernate"), true, "the only copy of the VM's state stays");
  assert.equal(registry.callsOf("deleteManifest").length, 0);
  await h.close();
});

Deno.test("a Wake request that saw its VM down drops the tag once the restored VM is live", async () => {
  const registry = new FakeRegistry();
  registry.put(VM, "hibernate");
  const h = Harness.create([
    request("wake", "Wake", { status: { vmName: VM, phase: "Waking" } }),
    ownedBy(vmPod({ vmID: "vmid-2", running: true }), "demo"),
  ], { registry });
  h.api.seed(
    CocoonSets,
    set("demo", (cs) => cs.status = { phase: "Running" } as CocoonSet["status"]),
  );
  await h.reconcile("wake");
  assert.equal((await h.hib("wake")).status?.phase, COCOON_HIBERNATION_PHASE_ACTIVE);
  assert.equal(registry.contains(VM, "hibernate"), false);
  await h.close();
});

Deno.test("a woken request keeps the tag for a set its cache does not show yet (read past the cache before the delete)", async () => {
  const registry = new FakeRegistry();
  registry.put(VM, "hibernate");
  const h = Harness.create([
    request("hib", "Wake", {
      status: { phase: COCOON_HIBERNATION_PHASE_WAKING, vmName: VM },
    }),
    // The VM runs again: this wake brought it back.
    vmPod({ vmID: "vmid-2", running: true, lifecycle: { state: "ready" } }),
  ], {
    registry,
    // The cache has not seen the set yet (nor any set).
    cachedClient: (api) => staleCache(api, { list: (rt) => rt === CocoonSets ? [] : undefined }),
  });
  // Suspended a moment ago: the set's `:hibernate` push of the VM is on its way.
  h.api.seed(CocoonSets, set("demo", (cs) => cs.spec.suspend = true));
  await h.reconcile("hib");
  assert.equal((await h.hib("hib")).status?.phase, COCOON_HIBERNATION_PHASE_ACTIVE);
  assert.equal(registry.contains(VM, "hibernate"), true, "the suspended set's tag stays");
  await h.close();
});
