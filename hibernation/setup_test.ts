/**
 * The controller wired into a manager on the fake API: which pod events reach which requests,
 * the podRef index shared with another controller, and the concurrency guard. The fake clock
 * drives the 5 s requeues and never reaches them, so every pass seen was caused by an event.
 */
import assert from "node:assert/strict";
import { type CocoonHibernation, CocoonHibernations } from "../common/apis/v1/mod.ts";
import { ANNOTATION_VM_NAME } from "../common/meta/keys.ts";
import { Manager, Pods } from "../kube/mod.ts";
import { FakeClient, FakeClock, metricValue, waitUntil } from "../kube/testing/mod.ts";
import { FakeRegistry } from "../snapshot/testing/fake.ts";
import { NS, readyOf, request, T0, vmPod } from "./_fixtures.ts";
import { HIBERNATION_CONTROLLER, POD_REF_INDEX, setupHibernationController } from "./setup.ts";

function manager(api: FakeClient): Manager {
  return new Manager({
    client: api,
    metricsBindAddress: "0",
    healthProbeBindAddress: "127.0.0.1:0",
    leaderElection: false,
    leaderElectionId: "unused",
  });
}

/** A manager running the controller on the fake API, recording every pass by request name. */
function wired(opts: { indexFirst?: boolean } = {}) {
  const clock = new FakeClock(T0);
  const api = new FakeClient({ clock });
  const mgr = manager(api);
  if (opts.indexFirst) {
    mgr.indexField(CocoonHibernations, POD_REF_INDEX, (h: CocoonHibernation) => [
      h.spec.podRef.name,
    ]);
  }
  const r = setupHibernationController(mgr, { registry: new FakeRegistry(), clock }, 4);
  const passes: string[] = [];
  let inFlight = 0;
  const reconcile = r.reconcile.bind(r);
  r.reconcile = async (req, signal) => {
    passes.push(`${req.namespace}/${req.name}`);
    inFlight++;
    try {
      return await reconcile(req, signal);
    } finally {
      inFlight--;
    }
  };
  const stop = new AbortController();
  const run = mgr.start(stop.signal);
  const hib = (name: string, namespace = NS) => api.get(CocoonHibernations, namespace, name);
  const until = (what: string, probe: () => Promise<boolean> | boolean) =>
    waitUntil(async () => {
      clock.advance(1); // lets rate-limited requeues (the finalizer pass) through
      return await probe();
    }, { what, timeoutMs: 10_000, intervalMs: 5 });
  const message = async (name: string) => readyOf((await hib(name)).status)?.message;
  /**
   * Waits until nothing is queued or running for 20 polls in a row: 20 ms of fake time, longer
   * than the rate limiter's first backoffs, so a pending rate-limited requeue would have fired.
   */
  const idle = async () => {
    let quiet = 0;
    await until("idle", async () => {
      const depth = await metricValue("workqueue_depth", { name: HIBERNATION_CONTROLLER }) ?? 0;
      quiet = depth === 0 && inFlight === 0 ? quiet + 1 : 0;
      return quiet >= 20;
    });
  };
  const close = async () => {
    assert.ok(clock.now() - T0 < 5_000, "no 5 s requeue could have fired");
    stop.abort();
    await run;
  };
  return { api, passes, hib, until, message, idle, close };
}

Deno.test("setup rejects a concurrency below one (or not an integer)", () => {
  const mgr = manager(new FakeClient());
  for (const n of [0, -1, 1.5, Number.NaN]) {
    assert.throws(
      () => setupHibernationController(mgr, { registry: new FakeRegistry() }, n),
      /concurrency must be at least 1/,
    );
  }
});

Deno.test({
  name: "pod events, status-only and label-only ones included, reach the requests naming the pod",
  sanitizeOps: false,
  sanitizeResources: false,
  async fn() {
    const w = wired();
    try {
      await w.api.create(Pods, vmPod({ vmName: null }));
      await w.api.create(Pods, vmPod({ name: "demo-1", vmName: null }));
      await w.api.create(CocoonHibernations, request("a", "Wake", { finalizers: [] }));
      await w.api.create(CocoonHibernations, request("b", "Wake", { finalizers: [] }));
      await w.api.create(
        CocoonHibernations,
        request("m", "Hibernate", { pod: "demo-1", finalizers: [] }),
      );
      // The same pod name in another namespace: its events are not this request's.
      await w.api.create(CocoonHibernations, {
        ...request("o", "Wake", { finalizers: [] }),
        metadata: { name: "o", namespace: "other" },
      });
      const phases =
        async () => [(await w.hib("a")).status?.phase, (await w.hib("b")).status?.phase];
      await w.until("all Pending", async () =>
        (await phases()).every((p) => p === "Pending") &&
        (await w.hib("m")).status?.phase === "Pending");
      await w.idle();

      // The VM name (and id) arriving, an annotation change, resumes both requests naming it.
      const seen = w.passes.length;
      await w.api.patch(Pods, NS, "demo-0", "merge", {
        metadata: {
          annotations: { [ANNOTATION_VM_NAME]: "vk-ns-demo-0", "vm.cocoonstack.io/id": "vmid-1" },
        },
      });
      await w.until("a and b Waking", async () => (await phases()).every((p) => p === "Waking"));
      await w.idle();

      // A status-only change (the container running) completes the wakes at once, as in the
      // Go operator.
      await w.api.patch(Pods, NS, "demo-0", "merge", {
        status: {
          phase: "Running",
          containerStatuses: [{
            name: "agent",
            ready: true,
            restartCount: 0,
            image: "placeholder",
            imageID: "",
            state: { running: {} },
          }],
        },
      }, { subresource: "status" });
      await w.until("a and b Active", async () => (await phases()).every((p) => p === "Active"));
      await w.idle();

      // A label-only change is passed on too.
      const beforeRelabel = w.passes.length;
      await w.api.patch(Pods, NS, "demo-0", "merge", { metadata: { labels: { x: "y" } } });
      await w.until("a looked at again", () => w.passes.slice(beforeRelabel).includes("ns/a"));
      await w.idle();

      const others = w.passes.slice(seen).filter((p) => p !== "ns/a" && p !== "ns/b");
      assert.deepEqual(others, [], "requests naming another pod, or another namespace's pod");
      assert.equal((await w.hib("m")).status?.phase, "Pending");
    } finally {
      await w.close();
    }
  },
});

Deno.test({
  name: "a pod's creation and deletion reach the request naming it",
  sanitizeOps: false,
  sanitizeResources: false,
  async fn() {
    const w = wired();
    try {
      await w.api.create(CocoonHibernations, request("h", "Hibernate", { finalizers: [] }));
      await w.until(
        "h Pending",
        async () => (await w.message("h")) === "pod ns/demo-0 not yet present",
      );
      await w.idle();
      await w.api.create(Pods, vmPod({ vmName: null }));
      await w.until(
        "h sees the pod",
        async () =>
          (await w.message("h")) === `pod ns/demo-0 has no ${ANNOTATION_VM_NAME} annotation yet`,
      );
      await w.idle();
      await w.api.delete(Pods, NS, "demo-0");
      await w.until(
        "h sees it gone",
        async () => (await w.message("h")) === "pod ns/demo-0 not yet present",
      );
    } finally {
      await w.close();
    }
  },
});

Deno.test({
  name: "with the podRef index registered by another controller first, pod events still arrive",
  sanitizeOps: false,
  sanitizeResources: false,
  async fn() {
    const w = wired({ indexFirst: true });
    try {
      await w.api.create(Pods, vmPod({ vmName: null }));
      await w.api.create(CocoonHibernations, request("h", "Hibernate", { finalizers: [] }));
      await w.until("h Pending", async () => (await w.hib("h")).status?.phase === "Pending");
      await w.idle();
      await w.api.patch(Pods, NS, "demo-0", "merge", {
        metadata: { annotations: { [ANNOTATION_VM_NAME]: "vk-ns-demo-0" } },
      });
      await w.until(
        "h Hibernating",
        async () => (await w.hib("h")).status?.phase === "Hibernating",
      );
    } finally {
      await w.close();
    }
  },
});
