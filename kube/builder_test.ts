import assert from "node:assert/strict";
import { type ControllerHost, controllerManagedBy } from "./builder.ts";
import type { Runnable } from "./runnable.ts";
import { FakeClock } from "./testing/fake_clock.ts";
import { Controller } from "./controller.ts";
import { enqueueFromMap } from "./handler.ts";
import type { KubeObject } from "./object.ts";
import { annotationChanged, generationChanged, newPredicateFuncs, or } from "./predicates.ts";
import type { RateLimiter } from "./rate_limiter.ts";
import type { Reconciler, Request } from "./reconcile.ts";
import { resourceId, type ResourceType, resourceType } from "./resource.ts";
import type { Informer } from "./source.ts";
import { StubInformer } from "./testing/stub_informer.ts";
import { waitFor } from "./testing/wait.ts";

/** Minimal ControllerHost: one stub informer per resource type, runnables collected. */
class StubHost implements ControllerHost {
  readonly informers = new Map<string, StubInformer<KubeObject>>();
  readonly runnables: Runnable[] = [];

  informerFor<T extends KubeObject>(rt: ResourceType<T>): Informer<T> {
    return this.stub(rt) as unknown as Informer<T>;
  }

  stub(rt: ResourceType): StubInformer<KubeObject> {
    const id = resourceId(rt);
    let inf = this.informers.get(id);
    if (!inf) this.informers.set(id, inf = new StubInformer());
    return inf;
  }

  add(runnable: Runnable): void {
    this.runnables.push(runnable);
  }
}

const CocoonSets = resourceType<KubeObject>({
  group: "cocoonset.cocoonstack.io",
  version: "v1",
  kind: "CocoonSet",
  plural: "cocoonsets",
  namespaced: true,
  statusSubresource: true,
});
const Pods = resourceType<KubeObject>({
  group: "",
  version: "v1",
  kind: "Pod",
  plural: "pods",
  namespaced: true,
  statusSubresource: true,
});
const ConfigMaps = resourceType<KubeObject>({
  group: "",
  version: "v1",
  kind: "ConfigMap",
  plural: "configmaps",
  namespaced: true,
  statusSubresource: false,
});

class Recorder implements Reconciler {
  calls: string[] = [];
  reconcile(req: Request): Promise<void> {
    this.calls.push(`${req.namespace}/${req.name}`);
    return Promise.resolve();
  }
  count(key: string): number {
    return this.calls.filter((c) => c === key).length;
  }
}

function pod(
  name: string,
  ownerName: string,
  annotations: Record<string, string> = {},
): KubeObject {
  return {
    metadata: {
      name,
      namespace: "ns",
      annotations,
      ownerReferences: [{
        apiVersion: "cocoonset.cocoonstack.io/v1",
        kind: "CocoonSet",
        name: ownerName,
        uid: "u",
        controller: true,
      }],
    },
  };
}

Deno.test("builder wires For (with predicates) and Owns through the controller owner ref", async () => {
  const host = new StubHost();
  const rec = new Recorder();
  const ctrl = controllerManagedBy(host)
    .named("cocoonset-builder-test")
    .for(CocoonSets, { predicates: [generationChanged()] })
    .owns(Pods, { predicates: [annotationChanged()] })
    .withOptions({ maxConcurrentReconciles: 2, clock: new FakeClock() })
    .build(rec);
  assert.ok(ctrl instanceof Controller);
  assert.equal(ctrl.name, "cocoonset-builder-test");
  assert.equal(ctrl.maxConcurrentReconciles, 2);
  assert.deepEqual(host.runnables, [ctrl]);
  assert.equal(ctrl.needLeaderElection, true);

  const ac = new AbortController();
  const running = ctrl.start(ac.signal);
  const sets = host.stub(CocoonSets);
  const pods = host.stub(Pods);
  sets.add({ metadata: { name: "demo", namespace: "ns", generation: 1 } });
  await waitFor("For create", () => rec.count("ns/demo") === 1);

  pods.add(pod("demo-0", "demo"));
  await waitFor("owned pod create maps to owner", () => rec.count("ns/demo") === 2);
  pods.add({ metadata: { name: "stray", namespace: "ns" } });
  // Owned pod annotation-free update is filtered; an annotation change passes.
  pods.update(pod("demo-0", "demo"));
  pods.update(pod("demo-0", "demo", { "vm.cocoonstack.io/name": "vm1" }));
  await waitFor("annotation change maps to owner", () => rec.count("ns/demo") === 3);
  pods.delete(pod("demo-0", "demo"));
  await waitFor("owned pod delete maps to owner", () => rec.count("ns/demo") === 4);
  assert.equal(rec.count("ns/stray"), 0);
  assert.ok(rec.calls.every((c) => c === "ns/demo"), `only the owner: ${rec.calls}`);

  ac.abort();
  await running;
});

Deno.test("builder watches() with a map function and event filters, name defaults to kind", async () => {
  const host = new StubHost();
  const rec = new Recorder();
  const mapped = enqueueFromMap<KubeObject>((p) => {
    const target = p.metadata.annotations?.target;
    return target ? [{ namespace: p.metadata.namespace ?? "", name: target }] : [];
  });
  const ctrl = controllerManagedBy(host)
    .for(CocoonSets)
    .watches(Pods, mapped, {
      predicates: [or(annotationChanged(), { create: () => true, update: () => false })],
    })
    .withOptions({ clock: new FakeClock() })
    .build(rec);
  assert.equal(ctrl.name, "cocoonset");

  const ac = new AbortController();
  const running = ctrl.start(ac.signal);
  const pods = host.stub(Pods);
  pods.add({ metadata: { name: "p", namespace: "ns", annotations: { target: "h1" } } });
  await waitFor("create mapped", () => rec.count("ns/h1") === 1);
  pods.update({ metadata: { name: "p", namespace: "ns", annotations: { target: "h2" } } });
  await waitFor("old and new", () => rec.count("ns/h2") === 1 && rec.count("ns/h1") === 2);
  ac.abort();
  await running;
});

Deno.test("builder validates its wiring", () => {
  const host = new StubHost();
  assert.throws(() => controllerManagedBy(host).owns(Pods).build(new Recorder()), /only be used/);
  assert.throws(() => controllerManagedBy(host).named("x").build(new Recorder()), /no watches/);
  assert.throws(
    () => controllerManagedBy(host).watches(Pods, enqueueFromMap(() => [])).build(new Recorder()),
    /for\(\) or named\(\)/,
  );
  assert.throws(() => controllerManagedBy(host).for(Pods).for(Pods), /already called/);
  assert.equal(host.runnables.length, 0);
});

Deno.test("builder passes the rate limiter through withOptions", async () => {
  const asked: string[] = [];
  const rateLimiter: RateLimiter = {
    when: (item) => {
      asked.push(item);
      return 50;
    },
    forget: () => {},
    numRequeues: () => 0,
  };
  const host = new StubHost();
  const clock = new FakeClock();
  const ctrl = controllerManagedBy(host)
    .named("builder-rate-limiter")
    .for(CocoonSets)
    .withOptions({ clock, rateLimiter })
    .build(new Recorder());
  const ac = new AbortController();
  const running = ctrl.start(ac.signal);
  ctrl.queue.addRateLimited("ns/x");
  assert.equal(clock.nextDeadline(), 50, "the given rate limiter decides the delay");
  ac.abort();
  await running;
  assert.deepEqual(asked, ["ns/x"]);
});

/** Starts ctrl; the returned function stops it and waits until it has. */
function run(ctrl: Controller): () => Promise<void> {
  const ac = new AbortController();
  const running = ctrl.start(ac.signal);
  return async () => {
    ac.abort();
    await running;
  };
}

function set(name: string, generation = 1, labels: Record<string, string> = {}): KubeObject {
  return { metadata: { name, namespace: "ns", generation, labels } };
}

// The filter tests below rely on one worker taking keys in the order they were added: an event
// that passed a filter is queued ahead of any later marker and so reconciled before it. Seeing
// the marker reconciled while the filtered key was not proves the event was dropped, not late.

Deno.test("builder: For's predicates drop filtered events (a later marker gets through)", async () => {
  const host = new StubHost();
  const rec = new Recorder();
  const ctrl = controllerManagedBy(host)
    .for(CocoonSets, { predicates: [generationChanged()] })
    .withOptions({ clock: new FakeClock() })
    .build(rec);
  const stop = run(ctrl);
  const sets = host.stub(CocoonSets);
  try {
    sets.add(set("demo"));
    await waitFor("create reconciled", () => rec.count("ns/demo") === 1);
    // With one worker, m1 starting means demo's pass has fully finished: the update below
    // cannot be folded into it.
    sets.add(set("m1"));
    await waitFor("first marker", () => rec.count("ns/m1") === 1);

    sets.update(set("demo", 1, { relabelled: "yes" }));
    sets.add(set("m2"));
    await waitFor("second marker", () => rec.count("ns/m2") === 1);
    assert.equal(rec.count("ns/demo"), 1, "a same-generation update must be dropped");

    sets.update(set("demo", 2, { relabelled: "yes" }));
    await waitFor("a spec change passes", () => rec.count("ns/demo") === 2);
  } finally {
    await stop();
  }
});

Deno.test("builder: a predicate with only update lets every create and delete through", async () => {
  const host = new StubHost();
  const rec = new Recorder();
  const ctrl = controllerManagedBy(host)
    .for(CocoonSets, { predicates: [{ update: () => false }] })
    .withOptions({ clock: new FakeClock() })
    .build(rec);
  const stop = run(ctrl);
  const sets = host.stub(CocoonSets);
  try {
    sets.add(set("a"));
    await waitFor("create passes", () => rec.count("ns/a") === 1);
    sets.add(set("m1"));
    await waitFor("first marker", () => rec.count("ns/m1") === 1);

    sets.update(set("a", 2));
    sets.add(set("m2"));
    await waitFor("second marker", () => rec.count("ns/m2") === 1);
    assert.equal(rec.count("ns/a"), 1, "update is dropped");

    sets.delete(set("a", 2));
    await waitFor("delete passes", () => rec.count("ns/a") === 2);
  } finally {
    await stop();
  }
});

Deno.test("builder: withEventFilter applies to For, Owns and Watches alike", async () => {
  const host = new StubHost();
  const rec = new Recorder();
  const notSkipped = newPredicateFuncs<KubeObject>((o) => o.metadata.labels?.skip !== "true");
  const byTarget = enqueueFromMap<KubeObject>((o) => {
    const target = o.metadata.annotations?.target;
    return target ? [{ namespace: "ns", name: target }] : [];
  });
  const ctrl = controllerManagedBy(host)
    .for(CocoonSets)
    .owns(Pods)
    .watches(ConfigMaps, byTarget)
    .withEventFilter(notSkipped)
    .withOptions({ clock: new FakeClock() })
    .build(rec);
  const stop = run(ctrl);
  const sets = host.stub(CocoonSets);
  const pods = host.stub(Pods);
  const maps = host.stub(ConfigMaps);
  const skip = { skip: "true" };
  try {
    // Each watch works for objects the filter accepts…
    sets.add(set("plain-set"));
    pods.add(pod("plain-pod", "plain-owner"));
    maps.add({
      metadata: { name: "c1", namespace: "ns", annotations: { target: "plain-target" } },
    });
    await waitFor(
      "unfiltered events on every watch",
      () =>
        rec.count("ns/plain-set") === 1 && rec.count("ns/plain-owner") === 1 &&
        rec.count("ns/plain-target") === 1,
    );

    // …and drops the ones it rejects, on every watch.
    sets.add(set("skipped-set", 1, skip));
    const skippedPod = pod("skipped-pod", "skipped-owner");
    skippedPod.metadata.labels = skip;
    pods.add(skippedPod);
    maps.add({
      metadata: {
        name: "c2",
        namespace: "ns",
        labels: skip,
        annotations: { target: "skipped-target" },
      },
    });
    sets.add(set("marker"));
    await waitFor("marker", () => rec.count("ns/marker") === 1);
    assert.equal(rec.count("ns/skipped-set"), 0, "For event filtered");
    assert.equal(rec.count("ns/skipped-owner"), 0, "Owns event filtered");
    assert.equal(rec.count("ns/skipped-target"), 0, "Watches event filtered");
  } finally {
    await stop();
  }
});

function ownedBy(name: string, refs: { owner: string; controller: boolean }[]): KubeObject {
  return {
    metadata: {
      name,
      namespace: "ns",
      ownerReferences: refs.map(({ owner, controller }) => ({
        apiVersion: "cocoonset.cocoonstack.io/v1",
        kind: "CocoonSet",
        name: owner,
        uid: `uid-${owner}`,
        controller,
      })),
    },
  };
}

Deno.test("builder: owns() enqueues only the controller owner by default", async () => {
  const host = new StubHost();
  const rec = new Recorder();
  const ctrl = controllerManagedBy(host).for(CocoonSets).owns(Pods)
    .withOptions({ clock: new FakeClock() }).build(rec);
  const stop = run(ctrl);
  const pods = host.stub(Pods);
  try {
    // The non-controller owner comes first: had it been enqueued, it would be reconciled
    // before the controller owner.
    pods.add(ownedBy("p", [
      { owner: "other", controller: false },
      { owner: "ctl", controller: true },
    ]));
    pods.add(ownedBy("q", [{ owner: "lonely", controller: false }]));
    host.stub(CocoonSets).add(set("marker"));
    await waitFor("controller owner and marker", () => rec.count("ns/marker") === 1);
    assert.deepEqual(rec.calls, ["ns/ctl", "ns/marker"]);
  } finally {
    await stop();
  }
});

Deno.test("builder: owns(..., {matchEveryOwner: true}) enqueues every owner of the For kind", async () => {
  const host = new StubHost();
  const rec = new Recorder();
  const ctrl = controllerManagedBy(host).for(CocoonSets).owns(Pods, { matchEveryOwner: true })
    .withOptions({ clock: new FakeClock() }).build(rec);
  const stop = run(ctrl);
  const pods = host.stub(Pods);
  try {
    pods.add(ownedBy("p", [
      { owner: "other", controller: false },
      { owner: "ctl", controller: true },
    ]));
    pods.add(ownedBy("q", [{ owner: "lonely", controller: false }]));
    await waitFor("every owner", () => rec.calls.length === 3);
    assert.deepEqual(rec.calls, ["ns/other", "ns/ctl", "ns/lonely"]);
  } finally {
    await stop();
  }
});
