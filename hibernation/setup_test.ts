/**
 * The controller wired into a manager on the fake API: watches, the podRef index, the pod-event
 * filter, and the concurrency guard.
 */
import assert from "node:assert/strict";
import {
  COCOON_HIBERNATION_PHASE_PENDING,
  COCOON_HIBERNATION_PHASE_WAKING,
  CocoonHibernations,
} from "../common/apis/v1/mod.ts";
import { ANNOTATION_VM_NAME } from "../common/meta/keys.ts";
import { Manager, Pods } from "../kube/mod.ts";
import { FakeClient, FakeClock, metricValue, waitUntil } from "../kube/testing/mod.ts";
import { FakeRegistry } from "../snapshot/testing/fake.ts";
import { NS, request, T0, vmPod } from "./_fixtures.ts";
import { HIBERNATION_CONTROLLER, setupHibernationController } from "./setup.ts";
import { POD_REF_INDEX } from "./watch.ts";

function manager(api: FakeClient): Manager {
  return new Manager({
    client: api,
    metricsBindAddress: "0",
    healthProbeBindAddress: "127.0.0.1:0",
    leaderElection: false,
    leaderElectionId: "unused",
  });
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

Deno.test("setup tolerates an index another controller already registered", () => {
  const mgr = manager(new FakeClient());
  mgr.indexField(CocoonHibernations, POD_REF_INDEX, (h) => [h.spec.podRef.name]);
  setupHibernationController(mgr, { registry: new FakeRegistry() }, 2);
});

Deno.test({
  name:
    "wired controller: pod events, status-only ones included, reach the requests naming the pod",
  sanitizeOps: false,
  sanitizeResources: false,
  async fn() {
    // The fake clock drives the 5 s requeues: they never fire unless the test advances it, so
    // every pass seen here was caused by an event.
    const clock = new FakeClock(T0);
    const api = new FakeClient({ clock });
    const mgr = manager(api);
    const registry = new FakeRegistry();
    const r = setupHibernationController(mgr, { registry, clock }, 4);
    const passes: string[] = [];
    let inFlight = 0;
    const reconcile = r.reconcile.bind(r);
    r.reconcile = async (req, signal) => {
      passes.push(req.name);
      inFlight++;
      try {
        return await reconcile(req, signal);
      } finally {
        inFlight--;
      }
    };
    const stop = new AbortController();
    const run = mgr.start(stop.signal);
    const phaseOf = async (name: string) =>
      (await api.get(CocoonHibernations, NS, name)).status?.phase;
    const until = (what: string, probe: () => Promise<boolean> | boolean) =>
      waitUntil(async () => {
        clock.advance(1); // lets rate-limited requeues (the finalizer pass) through
        return await probe();
      }, { what, timeoutMs: 10_000, intervalMs: 5 });
    // Nothing queued or running for 20 polls in a row: 20 ms of fake time, longer than the
    // rate limiter's first backoffs, so a pending rate-limited requeue would have fired.
    let quiet = 0;
    const idle = async () => {
      const depth = await metricValue("workqueue_depth", { name: HIBERNATION_CONTROLLER }) ?? 0;
      quiet = depth === 0 && inFlight === 0 ? quiet + 1 : 0;
      return quiet >= 20;
    };
    try {
      await api.create(Pods, vmPod({ vmName: null }));
      await api.create(Pods, vmPod({ name: "demo-1", vmName: null }));
      await api.create(CocoonHibernations, request("a", "Wake", { finalizers: [] }));
      await api.create(
        CocoonHibernations,
        request("m", "Hibernate", { pod: "demo-1", finalizers: [] }),
      );
      await until(
        "both Pending",
        async () =>
          (await phaseOf("a")) === COCOON_HIBERNATION_PHASE_PENDING &&
          (await phaseOf("m")) === COCOON_HIBERNATION_PHASE_PENDING,
      );

      // The VM name (and id) arriving, an annotation change, resumes the request at once.
      await api.patch(Pods, NS, "demo-0", "merge", {
        metadata: {
          annotations: { [ANNOTATION_VM_NAME]: "vk-ns-demo-0", "vm.cocoonstack.io/id": "vmid-1" },
        },
      });
      await until("a Waking", async () => (await phaseOf("a")) === COCOON_HIBERNATION_PHASE_WAKING);
      assert.equal(await phaseOf("m"), COCOON_HIBERNATION_PHASE_PENDING, "other pod, not woken");
      quiet = 0;
      await until("idle", idle);

      // A status-only change (the container running) completes the wake at once, as in the Go
      // operator: no requeue can have done it, the fake clock has not reached the 5 s mark.
      const seen = passes.length;
      await api.patch(Pods, NS, "demo-0", "merge", {
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
      await until("a Active", async () => (await phaseOf("a")) === "Active");
      assert.ok(clock.now() - T0 < 5_000, "reached before any 5 s requeue could fire");
      quiet = 0;
      await until("idle", idle);
      assert.deepEqual(passes.slice(seen).filter((n) => n === "m"), [], "other pod, not woken");
      assert.equal(await phaseOf("m"), COCOON_HIBERNATION_PHASE_PENDING);
    } finally {
      stop.abort();
      await run;
    }
  },
});
