import assert from "node:assert/strict";
import { type ControllerHost, controllerManagedBy, type Runnable } from "./builder.ts";
import { FakeClock } from "./testing/fake_clock.ts";
import { Controller } from "./controller.ts";
import { enqueueFromMap } from "./handler.ts";
import type { KubeObject } from "./object.ts";
import { annotationChanged, generationChanged, or } from "./predicates.ts";
import { PriorityQueue } from "./priority_queue.ts";
import type { RateLimiter } from "./rate_limiter.ts";
import type { Reconciler, Request } from "./reconcile.ts";
import { resourceId, type ResourceType, resourceType } from "./resource.ts";
import type { Informer } from "./source.ts";
import { StubInformer } from "./testing/stub_informer.ts";
import { WorkQueue } from "./workqueue.ts";

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

async function waitFor(cond: () => boolean, what: string, timeoutMs = 5000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!cond()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 1));
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
  await waitFor(() => rec.count("ns/demo") === 1, "For create");

  pods.add(pod("demo-0", "demo"));
  await waitFor(() => rec.count("ns/demo") === 2, "owned pod create maps to owner");
  pods.add({ metadata: { name: "stray", namespace: "ns" } });
  // Owned pod annotation-free update is filtered; an annotation change passes.
  pods.update(pod("demo-0", "demo"));
  pods.update(pod("demo-0", "demo", { "vm.cocoonstack.io/name": "vm1" }));
  await waitFor(() => rec.count("ns/demo") === 3, "annotation change maps to owner");
  pods.delete(pod("demo-0", "demo"));
  await waitFor(() => rec.count("ns/demo") === 4, "owned pod delete maps to owner");
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
  await waitFor(() => rec.count("ns/h1") === 1, "create mapped");
  pods.update({ metadata: { name: "p", namespace: "ns", annotations: { target: "h2" } } });
  await waitFor(() => rec.count("ns/h2") === 1 && rec.count("ns/h1") === 2, "old and new");
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

Deno.test("builder passes the queue choice and the rate limiter through withOptions", async () => {
  const asked: string[] = [];
  const rateLimiter: RateLimiter = {
    when: (item) => {
      asked.push(item);
      return 50;
    },
    forget: () => {},
    numRequeues: () => 0,
  };
  for (const usePriorityQueue of [undefined, false]) {
    const host = new StubHost();
    const clock = new FakeClock();
    const ctrl = controllerManagedBy(host)
      .named(`builder-queue-${usePriorityQueue}`)
      .for(CocoonSets)
      .withOptions({ clock, rateLimiter, ...(usePriorityQueue === false && { usePriorityQueue }) })
      .build(new Recorder());
    const ac = new AbortController();
    const running = ctrl.start(ac.signal);
    assert.ok(
      usePriorityQueue === false
        ? ctrl.queue instanceof WorkQueue
        : ctrl.queue instanceof PriorityQueue,
      `queue for usePriorityQueue=${usePriorityQueue}`,
    );
    ctrl.queue.addRateLimited("ns/x");
    assert.equal(clock.nextDeadline(), 50, "the given rate limiter decides the delay");
    ac.abort();
    await running;
  }
  assert.deepEqual(asked, ["ns/x", "ns/x"]);
});
