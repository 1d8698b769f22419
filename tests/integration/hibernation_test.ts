/**
 * The CocoonHibernation reconciler end to end: main.ts as a real process under the operator's
 * ServiceAccount and ClusterRole, a real kube-apiserver + etcd, and a real registry
 * (docker-registry) behind an instrumented proxy that counts the requests in flight per VM and can
 * play an outage. The test plays vk-cocoon (the VM kubelet): it writes the lifecycle annotations,
 * the VM id and the running container on the pods, and pushes the `:hibernate` manifests.
 *
 * The steps share one operator process and run in order; each uses its own pods and requests.
 */
import assert from "node:assert/strict";
import {
  type CocoonHibernation,
  CocoonHibernations,
  type HibernationDesire,
} from "../../common/apis/v1/mod.ts";
import { findStatusCondition } from "../../common/k8s/condition.ts";
import {
  ANNOTATION_COCOON_SET_GENERATION,
  ANNOTATION_HIBERNATE,
  ANNOTATION_LIFECYCLE_OBSERVED_GENERATION,
  ANNOTATION_LIFECYCLE_STATE,
  ANNOTATION_VM_NAME,
  ANNOTATION_VMID,
  LABEL_COCOON_SET,
} from "../../common/meta/keys.ts";
import { ApiClient } from "../../kube/api_client.ts";
import { Events, Namespaces, Pods } from "../../kube/core.ts";
import { isNotFound } from "../../kube/errors.ts";
import { parseRfc3339, rfc3339 } from "../../kube/time.ts";
import { loadRestConfig, Transport } from "../../kube/transport.ts";
import { startControlPlane } from "../harness/control_plane.ts";
import { startSandboxedOperator } from "../harness/sandboxed_operator.ts";
import { sampleSum } from "../harness/prom_text.ts";
import { registryAvailable, startRegistry, type TestRegistry } from "../harness/registry.ts";
import { type RegistryProxy, startRegistryProxy } from "../harness/registry_proxy.ts";
import { waitUntil } from "../harness/wait.ts";

const NS = "hib";
/** Repository prefix under OCI_REGISTRY. */
const PREFIX = "cocoon";
const CONTROLLER = "cocoonhibernation";
// The steps below count passes in the operator's debug log ("reconcile <ns>/<name> …").

function vmOf(pod: string): string {
  return `vk-${NS}-${pod}`;
}

/** What the steps share. */
interface World {
  client: ApiClient;
  registry: TestRegistry;
  proxy: RegistryProxy;
  metricsPort: number;
  /** The operator's output so far (JSON log lines). */
  output(): string;
}

// --- the VM kubelet, played by the test --------------------------------------------------------

/** Creates a VM pod as a CocoonSet would (labelled, stamped) or as a bare pod (neither). */
async function createVmPod(
  w: World,
  name: string,
  opts: { cocoonSet?: boolean; stamp?: number } = {},
): Promise<void> {
  const annotations: Record<string, string> = { [ANNOTATION_VM_NAME]: vmOf(name) };
  if (opts.stamp !== undefined) annotations[ANNOTATION_COCOON_SET_GENERATION] = String(opts.stamp);
  await w.client.create(Pods, {
    metadata: {
      name,
      namespace: NS,
      annotations,
      ...(opts.cocoonSet === false ? {} : { labels: { [LABEL_COCOON_SET]: "demo" } }),
    },
    spec: {
      containers: [{ name: "agent", image: "ghcr.io/cocoonstack/placeholder:latest" }],
      terminationGracePeriodSeconds: 1,
    },
  });
}

async function annotate(w: World, pod: string, annotations: Record<string, string | null>) {
  await w.client.patch(Pods, NS, pod, "merge", { metadata: { annotations } });
}

/** vk hibernated the VM: id cleared, lifecycle pair written together. */
async function vkHibernated(w: World, pod: string, observedGeneration: number): Promise<void> {
  await annotate(w, pod, {
    [ANNOTATION_VMID]: null,
    [ANNOTATION_LIFECYCLE_STATE]: "hibernated",
    [ANNOTATION_LIFECYCLE_OBSERVED_GENERATION]: String(observedGeneration),
  });
}

/** vk pushed the VM's snapshot (straight to the registry, not through the proxy). */
async function vkPushed(w: World, pod: string): Promise<void> {
  await w.registry.pushManifest(`${PREFIX}/${vmOf(pod)}`, "hibernate", `{"vm":"${pod}"}`);
}

/** vk restored the VM: a fresh id, lifecycle ready, a running container. */
async function vkRunning(w: World, pod: string, vmID: string): Promise<void> {
  const current = await w.client.get(Pods, NS, pod);
  await w.client.patch(Pods, NS, pod, "merge", {
    status: {
      phase: "Running",
      containerStatuses: [{
        name: "agent",
        ready: true,
        restartCount: 0,
        image: current.spec?.containers[0].image ?? "",
        imageID: "",
        started: true,
        state: { running: { startedAt: rfc3339(Date.now()) } },
      }],
    },
  }, { subresource: "status" });
  await annotate(w, pod, {
    [ANNOTATION_VMID]: vmID,
    [ANNOTATION_LIFECYCLE_STATE]: "ready",
  });
}

async function tags(w: World, pod: string): Promise<string[]> {
  return await w.registry.tagsOf(`${PREFIX}/${vmOf(pod)}`);
}

// --- requests ------------------------------------------------------------------------------------

async function createRequest(
  w: World,
  name: string,
  pod: string,
  desire: HibernationDesire,
): Promise<void> {
  await w.client.create(CocoonHibernations, {
    metadata: { name, namespace: NS },
    spec: { podRef: { name: pod }, desire },
  });
}

async function setDesire(w: World, name: string, desire: HibernationDesire): Promise<void> {
  await w.client.patch(CocoonHibernations, NS, name, "merge", { spec: { desire } });
}

function hib(w: World, name: string): Promise<CocoonHibernation> {
  return w.client.get(CocoonHibernations, NS, name);
}

function readyOf(h: CocoonHibernation) {
  return findStatusCondition(h.status?.conditions, "Ready");
}

async function waitPhase(
  w: World,
  name: string,
  phase: string,
  timeoutMs = 30_000,
): Promise<CocoonHibernation> {
  return await waitUntil(async () => {
    const h = await hib(w, name);
    return h.status?.phase === phase ? h : undefined;
  }, { what: `${name} ${phase}`, timeoutMs, intervalMs: 100 });
}

async function waitGone(w: World, name: string): Promise<void> {
  await waitUntil(async () => {
    try {
      await hib(w, name);
      return false;
    } catch (err) {
      return isNotFound(err);
    }
  }, { what: `${name} gone`, timeoutMs: 30_000, intervalMs: 100 });
}

/** Reasons of the Events recorded about a request (each repeat counted). */
async function reasons(w: World, name: string): Promise<string[]> {
  const events = await w.client.list(Events, { namespace: NS });
  return events.items
    .filter((e) => e.involvedObject.kind === "CocoonHibernation" && e.involvedObject.name === name)
    .flatMap((e) => Array(e.count ?? 1).fill(e.reason ?? ""));
}

async function waitEvent(w: World, name: string, reason: string): Promise<void> {
  await waitUntil(async () => (await reasons(w, name)).includes(reason), {
    what: `${reason} Event on ${name}`,
    timeoutMs: 30_000,
    intervalMs: 100,
  });
}

// --- the operator's metrics ----------------------------------------------------------------------

async function metricsText(w: World): Promise<string> {
  const res = await fetch(`http://127.0.0.1:${w.metricsPort}/metrics`);
  return await res.text();
}

/** One pass of a request, as the operator's debug log records its start. */
interface LoggedPass {
  desire: string;
  phase: string;
}

/** Passes of the named request in a stretch of the operator's debug log, in order. */
function passesLogged(log: string, name: string): LoggedPass[] {
  const passes: LoggedPass[] = [];
  for (const line of log.split("\n")) {
    let entry: {
      message?: string;
      properties?: { hibernation?: string; desire?: string; phase?: string };
    };
    try {
      entry = JSON.parse(line);
    } catch {
      continue; // not a log line, or one cut at the edge of the stretch
    }
    const p = entry.properties;
    if (entry.message?.startsWith("reconcile ") && p?.hibernation === `${NS}/${name}`) {
      passes.push({ desire: p.desire ?? "", phase: p.phase ?? "" });
    }
  }
  return passes;
}

/**
 * Waits until the operator has started n passes of the named request since log offset `from`
 * (optionally only passes seeing the given desire). Passes of one request never overlap, so when
 * the n-th has started, the ones before it are complete.
 */
async function passesSince(
  w: World,
  name: string,
  from: number,
  n: number,
  desire?: string,
): Promise<void> {
  await waitUntil(
    () =>
      passesLogged(w.output().slice(from), name)
        .filter((p) => desire === undefined || p.desire === desire).length >= n,
    { what: `${n} passes of ${name}`, timeoutMs: 30_000, intervalMs: 100 },
  );
}

// -------------------------------------------------------------------------------------------------

Deno.test({
  name: "CocoonHibernation on a real control plane and a real registry",
  ignore: !registryAvailable(),
  sanitizeResources: false,
  sanitizeOps: false,
  async fn(t) {
    const cp = await startControlPlane();
    const transport = new Transport(await loadRestConfig(cp.kubeconfigPath));
    const client = new ApiClient(transport);
    const registry = await startRegistry({ auth: "none" });
    const proxy = startRegistryProxy(registry.url);
    try {
      await client.create(Namespaces, { metadata: { name: NS } });
      // main.ts under the in-cluster permission set and exactly config/rbac's ClusterRole.
      const operator = await startSandboxedOperator({
        cp,
        ociRegistry: `${proxy.host}/${PREFIX}`,
        env: {
          LEADER_ELECT: "false",
          HIBERNATION_CONCURRENCY: "4",
          OPERATOR_LOG_LEVEL: "debug",
        },
      });
      const proc = operator.proc;
      const w: World = {
        client,
        registry,
        proxy,
        metricsPort: operator.metricsPort,
        output: () => proc.output,
      };
      try {
        await t.step(
          "hibernate: Hibernated only after this round's lifecycle pair AND the manifest",
          async () => {
            // Generation gate: the manifest is there, but vk's pair is from an older round.
            await createVmPod(w, "gen-0", { stamp: 2 });
            await createRequest(w, "gen", "gen-0", "Hibernate");
            await waitPhase(w, "gen", "Hibernating");
            assert.equal(
              (await client.get(Pods, NS, "gen-0")).metadata.annotations?.[ANNOTATION_HIBERNATE],
              "true",
            );
            await vkPushed(w, "gen-0");
            const from = w.output().length;
            await vkHibernated(w, "gen-0", 1);
            // Three passes: a requeue may start before the annotation lands; the third starts
            // only after a pass that saw it has finished.
            await passesSince(w, "gen", from, 3);
            assert.equal((await hib(w, "gen")).status?.phase, "Hibernating");
            assert.deepEqual(proxy.requestsFor(`${PREFIX}/${vmOf("gen-0")}`), [], "no probe yet");
            await vkHibernated(w, "gen-0", 2);
            const done = await waitPhase(w, "gen", "Hibernated");
            assert.equal(readyOf(done)?.status, "True");
            assert.equal(done.status?.vmName, vmOf("gen-0"));

            // Manifest gate: vk's pair qualifies, the registry has nothing yet.
            await createVmPod(w, "man-0");
            await createRequest(w, "man", "man-0", "Hibernate");
            await waitPhase(w, "man", "Hibernating");
            await vkHibernated(w, "man-0", 0);
            await waitUntil(
              () =>
                proxy.requestsFor(`${PREFIX}/${vmOf("man-0")}`, "HEAD").some((r) =>
                  r.status === 404
                ),
              { what: "a probe answered 404", timeoutMs: 30_000, intervalMs: 100 },
            );
            assert.equal((await hib(w, "man")).status?.phase, "Hibernating");
            await vkPushed(w, "man-0");
            await waitPhase(w, "man", "Hibernated"); // through the 5 s requeue: no pod event
            await waitEvent(w, "man", "Hibernated");
            const text = await metricsText(w);
            assert.ok(
              sampleSum(text, "cocoon_operator_hibernate_phase_duration_seconds_count", {
                result: "ok",
              }) >= 2,
            );
          },
        );

        await t.step("wake: Active once the VM runs again, and the tag is gone", async () => {
          await setDesire(w, "man", "Wake");
          await waitPhase(w, "man", "Waking");
          const pod = await client.get(Pods, NS, "man-0");
          assert.equal(pod.metadata.annotations?.[ANNOTATION_HIBERNATE], undefined);
          assert.deepEqual(await tags(w, "man-0"), ["hibernate"], "kept while the VM is down");
          await vkRunning(w, "man-0", "vmid-man-1");
          const active = await waitPhase(w, "man", "Active");
          assert.equal(readyOf(active)?.reason, "Done");
          assert.deepEqual(await tags(w, "man-0"), []);
          await waitEvent(w, "man", "WokenActive");
          assert.ok(
            sampleSum(await metricsText(w), "cocoon_operator_wake_phase_duration_seconds_count", {
              result: "ok",
            }) >= 1,
          );
        });

        await t.step(
          "hibernate timeout (back-dated clock) → Failed → RetryRequested → recovers",
          async () => {
            await createVmPod(w, "late-0");
            await createRequest(w, "late", "late-0", "Hibernate");
            const entered = await waitPhase(w, "late", "Hibernating");
            const conditions = structuredClone(entered.status!.conditions!);
            const backdated = rfc3339(Date.now() - 4 * 60_000);
            findStatusCondition(conditions, "Ready")!.lastTransitionTime = backdated;
            await client.patch(
              CocoonHibernations,
              NS,
              "late",
              "merge",
              { status: { conditions } },
              {
                subresource: "status",
              },
            );
            await waitEvent(w, "late", "HibernateTimedOut");
            await waitEvent(w, "late", "RetryRequested");
            const retried = await waitPhase(w, "late", "Hibernating");
            assert.ok(
              parseRfc3339(readyOf(retried)?.lastTransitionTime)! > parseRfc3339(backdated)!,
              "a fresh 3-minute clock",
            );
            assert.ok(
              sampleSum(
                await metricsText(w),
                "cocoon_operator_hibernate_phase_duration_seconds_count",
                {
                  result: "timeout",
                },
              ) >= 1,
            );
            await vkPushed(w, "late-0");
            await vkHibernated(w, "late-0", 0);
            await waitPhase(w, "late", "Hibernated");
          },
        );

        await t.step(
          "reverse desire mid-flight: the hibernate finishes before the wake starts",
          async () => {
            await createVmPod(w, "flip-0");
            await createRequest(w, "flip", "flip-0", "Hibernate");
            await waitPhase(w, "flip", "Hibernating");
            // A stale view that would finish a wake at once: running with the old VM id.
            await vkRunning(w, "flip-0", "vmid-flip-old");
            const from = w.output().length;
            await setDesire(w, "flip", "Wake");
            await passesSince(w, "flip", from, 2, "Wake");
            assert.equal((await hib(w, "flip")).status?.phase, "Hibernating");
            const pod = await client.get(Pods, NS, "flip-0");
            assert.equal(pod.metadata.annotations?.[ANNOTATION_HIBERNATE], "true");
            assert.deepEqual(proxy.requestsFor(`${PREFIX}/${vmOf("flip-0")}`, "DELETE"), []);

            await vkPushed(w, "flip-0");
            await vkHibernated(w, "flip-0", 0);
            await waitPhase(w, "flip", "Waking"); // Hibernated first, then the wake starts
            assert.ok((await reasons(w, "flip")).includes("Hibernated"));
            assert.deepEqual(await tags(w, "flip-0"), ["hibernate"]);
            await vkRunning(w, "flip-0", "vmid-flip-new");
            await waitPhase(w, "flip", "Active");
            assert.deepEqual(await tags(w, "flip-0"), []);
          },
        );

        await t.step(
          "two requests on one pod: one registry call in flight for the VM, consistent end; the last one deleted drops the tag",
          async () => {
            const repo = `${PREFIX}/${vmOf("pair-0")}`;
            proxy.delayMs = 300;
            try {
              await createVmPod(w, "pair-0");
              await Promise.all([
                createRequest(w, "pair-a", "pair-0", "Hibernate"),
                createRequest(w, "pair-b", "pair-0", "Hibernate"),
              ]);
              await waitPhase(w, "pair-a", "Hibernating");
              await waitPhase(w, "pair-b", "Hibernating");
              await vkPushed(w, "pair-0");
              await vkHibernated(w, "pair-0", 0);
              await waitPhase(w, "pair-a", "Hibernated");
              await waitPhase(w, "pair-b", "Hibernated");
              assert.ok(proxy.requestsFor(repo, "HEAD").length >= 2, "both requests probed");
              assert.equal(proxy.maxInFlight(repo), 1);

              await client.delete(CocoonHibernations, NS, "pair-a");
              await waitGone(w, "pair-a");
              assert.deepEqual(await tags(w, "pair-0"), ["hibernate"], "pair-b still holds it");
              assert.deepEqual(proxy.requestsFor(repo, "DELETE"), []);
              // The pod gone, nothing needs the snapshot any more (while the hibernated pod is
              // there it keeps it: see the differences below).
              await client.delete(Pods, NS, "pair-0", { gracePeriodSeconds: 0 });
              await client.delete(CocoonHibernations, NS, "pair-b");
              await waitGone(w, "pair-b");
              assert.deepEqual(await tags(w, "pair-0"), []);
              assert.equal(proxy.maxInFlight(repo), 1);
            } finally {
              proxy.delayMs = 0;
            }
          },
        );

        await t.step(
          "registry down during hibernate: error backoff, never Hibernated, then recovers",
          async () => {
            const repo = `${PREFIX}/${vmOf("down-0")}`;
            await createVmPod(w, "down-0");
            await createRequest(w, "down", "down-0", "Hibernate");
            await waitPhase(w, "down", "Hibernating");
            await vkPushed(w, "down-0");
            const errorsBefore = sampleSum(
              await metricsText(w),
              "controller_runtime_reconcile_errors_total",
              {
                controller: CONTROLLER,
              },
            );
            proxy.down = true;
            try {
              await vkHibernated(w, "down-0", 0);
              await waitUntil(
                async () =>
                  proxy.requestsFor(repo, "HEAD").filter((r) => r.status === 503).length >= 2 &&
                  sampleSum(await metricsText(w), "controller_runtime_reconcile_errors_total", {
                      controller: CONTROLLER,
                    }) >= errorsBefore + 2,
                { what: "failing probes retried with backoff", timeoutMs: 30_000, intervalMs: 100 },
              );
              assert.equal((await hib(w, "down")).status?.phase, "Hibernating");
            } finally {
              proxy.down = false;
            }
            await waitPhase(w, "down", "Hibernated");
          },
        );

        await t.step(
          "a request on a pod that belongs to no CocoonSet hibernates and wakes",
          async () => {
            await createVmPod(w, "bare-0", { cocoonSet: false });
            await createRequest(w, "bare", "bare-0", "Hibernate");
            await waitPhase(w, "bare", "Hibernating");
            await vkPushed(w, "bare-0");
            await vkHibernated(w, "bare-0", 0);
            await waitPhase(w, "bare", "Hibernated");
            await setDesire(w, "bare", "Wake");
            await waitPhase(w, "bare", "Waking");
            await vkRunning(w, "bare-0", "vmid-bare-1");
            await waitPhase(w, "bare", "Active");
            assert.deepEqual(await tags(w, "bare-0"), []);
          },
        );

        // --- Differences from the Go operator (each fails on the original's behaviour) ---------

        await t.step(
          "deleting a Hibernated request keeps the snapshot its pod still needs; a later Wake restores from it",
          async () => {
            const repo = `${PREFIX}/${vmOf("keep-0")}`;
            await createVmPod(w, "keep-0");
            await createRequest(w, "keep", "keep-0", "Hibernate");
            await waitPhase(w, "keep", "Hibernating");
            await vkPushed(w, "keep-0");
            await vkHibernated(w, "keep-0", 0);
            await waitPhase(w, "keep", "Hibernated");

            // The original deletes the tag here, leaving a hibernated VM nothing to restore from.
            await client.delete(CocoonHibernations, NS, "keep");
            await waitGone(w, "keep");
            assert.deepEqual(await tags(w, "keep-0"), ["hibernate"]);
            assert.deepEqual(proxy.requestsFor(repo, "DELETE"), []);
            const pod = await client.get(Pods, NS, "keep-0");
            assert.equal(pod.metadata.annotations?.[ANNOTATION_HIBERNATE], "true", "still asked");

            await createRequest(w, "keep-wake", "keep-0", "Wake");
            await waitPhase(w, "keep-wake", "Waking");
            assert.deepEqual(await tags(w, "keep-0"), ["hibernate"], "kept while the VM is down");
            await vkRunning(w, "keep-0", "vmid-keep-1");
            await waitPhase(w, "keep-wake", "Active");
            assert.deepEqual(await tags(w, "keep-0"), []);
          },
        );

        await t.step(
          "opposite requests: the later one is refused (Conflict), the VM keeps the earlier one's state, no churn",
          async () => {
            await createVmPod(w, "opp-0");
            await createRequest(w, "opp-first", "opp-0", "Hibernate");
            await waitPhase(w, "opp-first", "Hibernating");
            await vkPushed(w, "opp-0");
            await vkHibernated(w, "opp-0", 0);
            await waitPhase(w, "opp-first", "Hibernated");

            await createRequest(w, "opp-later", "opp-0", "Wake");
            const refused = await waitPhase(w, "opp-later", "Failed");
            assert.equal(readyOf(refused)?.reason, "Conflict");
            assert.match(readyOf(refused)?.message ?? "", /opp-first/);
            await waitEvent(w, "opp-later", "Conflict");
            const event = (await client.list(Events, { namespace: NS })).items.find((e) =>
              e.reason === "Conflict" && e.involvedObject.name === "opp-later"
            );
            assert.equal(event?.type, "Warning");
            assert.match(event?.message ?? "", /opp-first/);

            // Watch the pod for two requeue intervals: nothing flips. The original toggles the
            // annotation and deletes the tag on every pass, about a hundred passes a second.
            const pod = await client.get(Pods, NS, "opp-0");
            const logFrom = w.output().length;
            const windowEnd = Date.now() + 11_000;
            while (Date.now() < windowEnd) {
              const now = await client.get(Pods, NS, "opp-0");
              assert.equal(now.metadata.resourceVersion, pod.metadata.resourceVersion);
              assert.equal(now.metadata.annotations?.[ANNOTATION_HIBERNATE], "true");
              await new Promise((r) => setTimeout(r, 250));
            }
            const passes = passesLogged(w.output().slice(logFrom), "opp-later").length;
            assert.ok(
              passes <= 3,
              `a refused request costs one pass per 5 s, saw ${passes} in 11 s`,
            );
            assert.deepEqual(await tags(w, "opp-0"), ["hibernate"]);
            assert.equal((await hib(w, "opp-first")).status?.phase, "Hibernated");
            assert.deepEqual((await reasons(w, "opp-later")).filter((r) => r === "Conflict"), [
              "Conflict",
            ]);

            // The conflict gone, the refused request proceeds.
            await client.delete(CocoonHibernations, NS, "opp-first");
            await waitGone(w, "opp-first");
            assert.deepEqual(
              await tags(w, "opp-0"),
              ["hibernate"],
              "opp-later still tracks the VM",
            );
            await waitEvent(w, "opp-later", "RetryRequested");
            await waitPhase(w, "opp-later", "Waking");
            await vkRunning(w, "opp-0", "vmid-opp-1");
            await waitPhase(w, "opp-later", "Active");
            assert.deepEqual(await tags(w, "opp-0"), []);
          },
        );

        await t.step("a podRef that is not a pod name fails at once, saying so", async () => {
          await createRequest(w, "badref", "demo/0", "Hibernate");
          const failed = await waitPhase(w, "badref", "Failed");
          assert.match(readyOf(failed)?.message ?? "", /is not a valid pod name/);
        });

        await t.step("a Ready condition that contradicts the phase is put right", async () => {
          const stored = await hib(w, "gen");
          assert.equal(stored.status?.phase, "Hibernated");
          const conditions = structuredClone(stored.status!.conditions!);
          const ready = findStatusCondition(conditions, "Ready")!;
          ready.status = "False";
          ready.reason = "Pending";
          ready.message = "Hibernating";
          await client.patch(CocoonHibernations, NS, "gen", "merge", { status: { conditions } }, {
            subresource: "status",
          });
          await waitUntil(async () => readyOf(await hib(w, "gen"))?.status === "True", {
            what: "Ready back to True on a Hibernated request",
            timeoutMs: 30_000,
            intervalMs: 100,
          });
          const fixed = await hib(w, "gen");
          assert.equal(fixed.status?.phase, "Hibernated");
          assert.equal(readyOf(fixed)?.reason, "Done");
        });

        await t.step("each transition is announced once", async () => {
          // Long after their transitions, with passes in between (the original records these
          // again on the pass after the phase lands).
          for (const name of ["man", "flip", "bare"]) {
            const seen = await reasons(w, name);
            assert.deepEqual(seen.filter((r) => r === "Hibernated"), ["Hibernated"], name);
            assert.deepEqual(seen.filter((r) => r === "WokenActive"), ["WokenActive"], name);
          }
        });
        await operator.assertNoForbidden();
      } finally {
        const status = await operator.stop();
        if (status.code !== 0) console.error(proc.output.slice(-5000));
      }
    } finally {
      await proxy.close();
      await registry.stop();
      transport.close();
      await cp.stop();
    }
  },
});
