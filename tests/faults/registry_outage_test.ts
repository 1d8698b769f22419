/**
 * The registry down while snapshots matter. The outage is the operator's: its registry proxy
 * answers every request 503 (the simulator, playing vk-cocoon on the nodes, still pushes and
 * pulls), which is the hardest case for the operator — the snapshot exists, it just cannot see
 * it. On every flow it must fail closed and recover once the registry is back:
 *
 * - suspend (retain) and CocoonHibernation hibernate: never Suspended / Hibernated while the
 *   snapshot cannot be confirmed, although every VM has hibernated;
 * - restore (the pod of a hibernated VM is lost) and wake of a released set: no pod is created
 *   without restore-from-hibernate, nothing boots fresh over the snapshot;
 * - CocoonHibernation wake: the VM runs again; the tag it could not drop is removed when the
 *   request is deleted with the registry back;
 * - delete: the set goes anyway, with an error logged for every snapshot it could not drop
 *   (those stay in the registry: nothing is left to collect them).
 *
 * Watched throughout: no needed `:hibernate` deleted, no VM booted fresh or from another
 * snapshot while it held one, no duplicate pod or VM. Figure per flow: outage length, the
 * operator's refused attempts during it, and the time to recover once the registry was back.
 */
import assert from "node:assert/strict";
import { CocoonHibernations, type CocoonSet, CocoonSets } from "../../common/apis/v1/mod.ts";
import { ANNOTATION_RESTORE_FROM_HIBERNATE } from "../../common/meta/keys.ts";
import { Pods } from "../../kube/core.ts";
import type { Stack } from "../harness/stack.ts";
import { waitUntil } from "../harness/wait.ts";
import {
  createSet,
  getSet,
  inPhase,
  patchSpec,
  vmOf,
  waitGone,
  waitSet,
} from "../harness/stack_objects.ts";
import { faultSuite, type Figure, operatorLog, type SystemWatch, watchSystem } from "./_support.ts";
import type { Observation } from "./_observer.ts";

const NS = "faults-registry";
const WAIT_MS = 60_000;
/** Refused attempts the operator must have made before the registry comes back. */
const ATTEMPTS = 3;
/** The shortest outage: longer than the 5 s polls of Suspending and Hibernating. */
const MIN_OUTAGE_MS = 6_000;

/**
 * Errors logged since `since` whose message mentions `text`, by the named controller's
 * reconcile loop ("" for errors a reconciler logs itself without failing the pass).
 */
function refusals(stack: Stack, since: number, controller: string, text: string): number {
  return operatorLog(stack, 0, since).filter((l) =>
    l.level === "ERROR" && (l.properties.controller ?? "") === controller &&
    l.message.includes(text)
  ).length;
}

/**
 * Holds the outage for MIN_OUTAGE_MS and until the controller has tried and failed `ATTEMPTS`
 * times (its log says so), then lifts it, recording the outage in the figure.
 */
async function outageUntilRefused(
  stack: Stack,
  since: number,
  controller: string,
  text: string,
  fig: Figure,
): Promise<void> {
  await waitUntil(
    () =>
      Date.now() - since >= MIN_OUTAGE_MS && refusals(stack, since, controller, text) >= ATTEMPTS,
    {
      what: `${ATTEMPTS} refused attempts of ${controller} mentioning ${JSON.stringify(text)}`,
      timeoutMs: WAIT_MS,
      intervalMs: 100,
    },
  );
  fig.refusedAttempts = refusals(stack, since, controller, text);
  fig.registry503s = stack.proxy.requests.filter((r) => r.status === 503 && r.at >= since).length;
  stack.proxy.down = false;
  fig.outageMs = Date.now() - since;
}

/** The observations of kind/name between from and to (ms). */
function seenBetween<T extends { metadata: { name?: string } }>(
  observations: readonly Observation<T>[],
  name: string,
  from: number,
  to: number,
): Observation<T>[] {
  return observations.filter((o) => o.object.metadata.name === name && o.at >= from && o.at <= to);
}

/** Whether the simulator has the pod's VM hibernated. */
async function vmHibernated(stack: Stack, pod: string): Promise<boolean> {
  return (await stack.sim.vm(NS, pod))?.phase === "hibernated";
}

async function waitHibernation(stack: Stack, name: string, phase: string): Promise<void> {
  await waitUntil(async () => {
    const h = await stack.admin.get(CocoonHibernations, NS, name);
    return h.status?.phase === phase;
  }, { what: `CocoonHibernation ${name} ${phase}`, timeoutMs: WAIT_MS, intervalMs: 100 });
}

async function hibernate(stack: Stack, name: string, pod: string): Promise<void> {
  await stack.admin.create(CocoonHibernations, {
    apiVersion: "cocoonset.cocoonstack.io/v1",
    kind: "CocoonHibernation",
    metadata: { name, namespace: NS },
    spec: { podRef: { name: pod }, desire: "Hibernate" },
  });
}

faultSuite("registry outage", {}, async (stack, scenario) => {
  const watch: SystemWatch = await watchSystem(stack);
  const sets = watch.sets;
  try {
    let retained: CocoonSet | undefined;

    await scenario(
      "suspend (retain) with the registry down: never Suspended unconfirmed",
      async (fig) => {
        const cs = await createSet(stack, NS, "ret", { agent: { replicas: 1 } });
        await waitSet(
          stack,
          cs,
          "Running",
          (c) => inPhase("Running")(c) && c.status?.readyAgents === 2,
        );
        const down = Date.now();
        stack.proxy.down = true;
        retained = await patchSpec(stack, cs, { suspend: true });
        await waitUntil(
          async () => await vmHibernated(stack, "ret-0") && await vmHibernated(stack, "ret-1"),
          {
            what: "both VMs hibernated",
            timeoutMs: WAIT_MS,
          },
        );
        await outageUntilRefused(stack, down, "cocoonset", "probe hibernate snapshot", fig);
        const during = seenBetween(sets.observations, "ret", down, Date.now());
        fig.phasesDuringOutage = [
          ...new Set(during.map((o) => o.object.status?.phase)),
        ];
        assert.ok(
          during.every((o) => o.object.status?.phase !== "Suspended"),
          "not Suspended while the snapshots cannot be confirmed",
        );
        const up = Date.now();
        await waitSet(stack, retained, "Suspended", inPhase("Suspended"));
        fig.recoverMs = Date.now() - up;
        for (const m of [0, 1]) {
          assert.deepEqual(await stack.tagsOf(vmOf(NS, "ret", m)), ["hibernate"]);
        }
      },
    );

    await scenario(
      "CocoonHibernation hibernate with the registry down: Hibernating until it returns",
      async (fig) => {
        const cs = await createSet(stack, NS, "hib");
        await waitSet(stack, cs, "Running", inPhase("Running"));
        const down = Date.now();
        stack.proxy.down = true;
        await hibernate(stack, "hib", "hib-0");
        await waitUntil(() => vmHibernated(stack, "hib-0"), {
          what: "VM hibernated",
          timeoutMs: WAIT_MS,
        });
        await outageUntilRefused(stack, down, "cocoonhibernation", "probe hibernate snapshot", fig);
        const during = seenBetween(watch.hibernations.observations, "hib", down, Date.now());
        const phases = [...new Set(during.map((o) => o.object.status?.phase))];
        fig.phasesDuringOutage = phases;
        assert.ok(
          !phases.includes("Hibernated"),
          "not Hibernated while the snapshot is unconfirmed",
        );
        const up = Date.now();
        await waitHibernation(stack, "hib", "Hibernated");
        fig.recoverMs = Date.now() - up;
      },
    );

    await scenario(
      "restore with the registry down fails closed: no fresh boot over the snapshot",
      async (fig) => {
        // The hibernated main's pod is lost; the set must recreate it from its snapshot.
        const down = Date.now();
        stack.proxy.down = true;
        await stack.admin.delete(Pods, NS, "hib-0");
        await outageUntilRefused(
          stack,
          down,
          "cocoonset",
          `probe hibernate snapshot ${vmOf(NS, "hib", 0)}`,
          fig,
        );
        const created = watch.pods.observations.filter((o) =>
          o.object.metadata.name === "hib-0" && o.type === "ADDED" && o.at >= down
        );
        fig.podsCreatedDuringOutage = created.length;
        for (const o of created) {
          assert.equal(
            o.object.metadata.annotations?.[ANNOTATION_RESTORE_FROM_HIBERNATE],
            "true",
            "a main created during the outage restores",
          );
        }
        const up = Date.now();
        const pod = await waitUntil(async () => {
          const p = await stack.admin.get(Pods, NS, "hib-0").catch(() => undefined);
          return p && !p.metadata.deletionTimestamp ? p : undefined;
        }, { what: "hib-0 recreated", timeoutMs: WAIT_MS, intervalMs: 100 });
        assert.equal(pod.metadata.annotations?.[ANNOTATION_RESTORE_FROM_HIBERNATE], "true");
        await waitUntil(async () => (await stack.sim.vm(NS, "hib-0"))?.restoredFrom, {
          what: "hib-0's VM restored from its snapshot",
          timeoutMs: WAIT_MS,
        });
        fig.recoverMs = Date.now() - up;
        // The request still wants the VM hibernated: the restored VM is hibernated again, and the
        // request confirms it (it kept its Hibernated phase through the gap, so look for a write
        // after the VM went down).
        await waitUntil(async () => {
          await watch.sim.sync();
          const down = watch.sim.events.findLast((e) =>
            e.name === "hib-0" && e.type === "hibernated" && e.at >= up
          );
          return down !== undefined &&
            watch.hibernations.observations.some((o) =>
              o.object.metadata.name === "hib" && o.at > down.at &&
              o.object.status?.phase === "Hibernated"
            );
        }, { what: "hib-0 hibernated again and confirmed", timeoutMs: WAIT_MS, intervalMs: 100 });
      },
    );

    await scenario(
      "CocoonHibernation wake with the registry down: the VM runs, its tag goes later",
      async (fig) => {
        const down = Date.now();
        stack.proxy.down = true;
        await stack.admin.patch(CocoonHibernations, NS, "hib", "merge", {
          spec: { desire: "Wake" },
        });
        await waitHibernation(stack, "hib", "Active");
        fig.activeAfterMs = Date.now() - down;
        assert.equal((await stack.sim.vm(NS, "hib-0"))?.phase, "running");
        const errors = refusals(stack, down, "", "delete hibernate snapshot");
        fig.tagDeleteErrorsLogged = errors;
        assert.ok(errors >= 1, "the failed tag delete is logged at error level");
        stack.proxy.down = false;
        fig.outageMs = Date.now() - down;
        fig.tagLeftAfterWake = (await stack.tagsOf(vmOf(NS, "hib", 0))).includes("hibernate");
        const up = Date.now();
        await stack.admin.delete(CocoonHibernations, NS, "hib");
        await waitGone(
          "CocoonHibernation hib",
          () => stack.admin.get(CocoonHibernations, NS, "hib"),
        );
        assert.deepEqual(
          await stack.tagsOf(vmOf(NS, "hib", 0)),
          [],
          "deleting the request drops it",
        );
        fig.recoverMs = Date.now() - up;
      },
    );

    await scenario("wake of a released set with the registry down fails closed", async (fig) => {
      const created = await createSet(stack, NS, "rel", { hibernatePolicy: "release" });
      await waitSet(stack, created, "Running", inPhase("Running"));
      let cs = await patchSpec(stack, created, { suspend: true });
      await waitSet(stack, cs, "Suspended, seat released", inPhase("Suspended"));
      await waitGone("rel-0", () => stack.admin.get(Pods, NS, "rel-0"));
      const down = Date.now();
      stack.proxy.down = true;
      cs = await patchSpec(stack, cs, { suspend: false });
      await outageUntilRefused(stack, down, "cocoonset", "wake: probe hibernate snapshot", fig);
      const pods = watch.pods.observations.filter((o) =>
        o.object.metadata.name === "rel-0" && o.at >= down && o.at <= Date.now()
      );
      fig.podsCreatedDuringOutage = pods.length;
      assert.equal(pods.length, 0, "no main is created while the snapshot cannot be probed");
      const phases = seenBetween(sets.observations, "rel", down, Date.now());
      assert.ok(phases.every((o) => o.object.status?.phase === "Suspended"), "stays Suspended");
      const up = Date.now();
      await waitSet(
        stack,
        cs,
        "Running again",
        (c) => inPhase("Running")(c) && c.status?.readyAgents === 1,
      );
      fig.recoverMs = Date.now() - up;
      assert.ok((await stack.sim.vm(NS, "rel-0"))?.restoredFrom, "restored from the snapshot");
      assert.deepEqual(await stack.tagsOf(vmOf(NS, "rel", 0)), [], "the snapshot was dropped");
    });

    await scenario(
      "delete with the registry down completes, logging each snapshot it keeps",
      async (fig) => {
        const vms = [vmOf(NS, "ret", 0), vmOf(NS, "ret", 1)];
        const down = Date.now();
        stack.proxy.down = true;
        watch.release(vms);
        await stack.admin.delete(CocoonSets, NS, "ret");
        await waitGone("set ret", () => getSet(stack, retained!));
        fig.deleteMs = Date.now() - down;
        const logged = operatorLog(stack, 0, down).filter((l) =>
          l.level === "ERROR" && l.message.startsWith("delete snapshot")
        );
        fig.errorLogs = logged.length;
        stack.proxy.down = false;
        fig.outageMs = Date.now() - down;
        for (const vm of vms) {
          assert.ok(
            logged.some((l) => l.properties.vm === vm && l.properties.tag === "hibernate"),
            `an error names ${vm}:hibernate`,
          );
        }
        const left: string[] = [];
        for (const vm of vms) for (const tag of await stack.tagsOf(vm)) left.push(`${vm}:${tag}`);
        fig.snapshotsLeftBehind = left;
      },
    );

    await scenario("no snapshot was dropped while needed, nothing ran twice", async (fig) => {
      await watch.judge(fig);
    });
  } finally {
    await watch.stop();
  }
});
