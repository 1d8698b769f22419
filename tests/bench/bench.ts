/**
 * `deno task bench [--quick] [--operator-cmd "…"]`: every benchmark, gathered into one JSON
 * document on stdout (progress and the runtime's per-measurement lines go to stderr). Nothing
 * here asserts; tests do that. The document's keys: the runtime figures below (flat, as the
 * summary always had them), `reconcileFixture` (reconcile_fixture.ts), `startup`
 * (startup.ts), `convergence` (convergence.ts; keyed `sets100`, `sets1000`), `memoryAtScale`,
 * `scopedCache`, `fleet`, `fleet10k` and `fleetSlope` (memory_at_scale.ts; the fleet of 1 000,
 * 5 000 and 10 000 sets is the longest part, an hour or more), `pendingFlows` (pending_flows.ts:
 * every API request in the 75 s after start with a Hibernate and a migration held), `flows`
 * (flows.ts: hibernate and wake, suspend and resume, release and wake), `scaleOut` (scale_out.ts:
 * 1 vs 2 sharded replicas; alone: `deno run -A tests/bench/scale_out.ts`). Each of the others
 * also runs alone (`deno task bench:<name>`, see deno.json); `--operator-cmd` names the operator
 * the system benchmarks measure (default `deno task start`), `--quick` makes their N smaller and
 * their windows shorter.
 *
 * The runtime figures:
 *
 * - noop_reconcile_queue: keys/s through the real priority queue + controller, keys enqueued
 *   directly (the runtime's own ceiling).
 * - noop_reconcile_fake_api: keys/s from objects created on the fake API, through the watch,
 *   the informer, predicates, the queue and a reconciler that reads the object from the cache.
 * - cache_memory: heap growth and process RSS for 5 000 realistic pods held by the informer
 *   cache, with managedFields stripped (the default) and, for comparison, kept. Then the same
 *   5 000 pods among 20 000 unrelated ones: cached whole (every pod, as an unscoped informer
 *   does) and label-scoped (byObject with the operator's "cocoonset.cocoonstack.io/name"
 *   selector; the source filters like the API server, so unrelated pods never arrive).
 *   Measured in a child process fed by a generator, so no other copy of the pods is counted.
 * - delete_at_scale: API requests and operator CPU seconds to create, then delete, a CocoonSet of
 *   1 000 sub-agents on the real control plane (tests/bench/delete_at_scale.ts).
 * - refusedAtScale: operator RSS while sets above the per-set limit (limit + 1 and 2147483647
 *   replicas) are refused, next to idle, and a set at the limit converging
 *   (tests/bench/refused_at_scale.ts).
 */
import { controllerManagedBy } from "../../kube/builder.ts";
import { type Pod, Pods } from "../../kube/core.ts";
import { FakeClient } from "../../kube/testing/fake.ts";
import { byObject, InformerCache } from "../../kube/cache.ts";
import { Manager } from "../../kube/manager.ts";
import type { Client, ListOptions, WatchEvent, WatchOptions } from "../../kube/client.ts";
import type { KubeObject } from "../../kube/object.ts";
import type { ResourceType } from "../../kube/resource.ts";
import { matchesLabels, parseLabelSelector } from "../../kube/selector.ts";
import { DemoSets } from "../harness/demo_controller.ts";
import { benchNoopReconcile } from "./controller_bench.ts";
import { benchReconcileFixtureAll } from "./reconcile_fixture.ts";
import { benchDeleteAtScale } from "./delete_at_scale.ts";
import { benchRefusedAtScale } from "./refused_at_scale.ts";
import { startupFromFlags } from "./startup.ts";
import { convergenceFromFlags } from "./convergence.ts";
import { fleetFromFlags, memoryAtScaleFromFlags } from "./memory_at_scale.ts";
import { pendingFlowsFromFlags } from "./pending_flows.ts";
import { flowsFromFlags } from "./flows.ts";
import { benchScaleOut, scaleOutGoals, scaleOutOptions } from "./scale_out.ts";
import { benchFlagsOrExit } from "./flags.ts";
import { progress } from "./load.ts";

const gc = (globalThis as { gc?: () => void }).gc;

function collect(): void {
  if (gc) { for (let i = 0; i < 3; i++) gc(); }
}

function emit(obj: Record<string, unknown>): Record<string, unknown> {
  console.error(JSON.stringify(obj));
  return obj;
}

/** The labels of the operator's i-th pod. */
function realisticLabels(i: number): Record<string, string> {
  return {
    "cocoonset.cocoonstack.io/name": "demo",
    "cocoonset.cocoonstack.io/role": "sub-agent",
    "cocoonset.cocoonstack.io/slot": String(i),
    "app.kubernetes.io/name": "demo",
  };
}

/** A pod shaped like what the operator creates, with a managedFields block like the API's. */
function realisticPod(i: number): Pod {
  const name = `demo-${i}`;
  return {
    metadata: {
      name,
      namespace: "bench",
      labels: realisticLabels(i),
      annotations: {
        "cocoonset.cocoonstack.io/generation": "3",
        "vm.cocoonstack.io/name": `vk-bench-demo-${i}`,
        "cocoonset.cocoonstack.io/image": "ghcr.io/cocoonstack/agent:1.2.3",
        "cocoonset.cocoonstack.io/mode": "clone",
        "cocoonset.cocoonstack.io/os": "linux",
        "cocoonset.cocoonstack.io/snapshot-policy": "always",
        "cocoonset.cocoonstack.io/managed": "true",
        "vm.cocoonstack.io/backend": "cloud-hypervisor",
        "vm.cocoonstack.io/fork-from": "vk-bench-demo-0",
        "vm.cocoonstack.io/id": crypto.randomUUID(),
        "vm.cocoonstack.io/ip": `10.0.${i >> 8}.${i & 255}`,
        "vm.cocoonstack.io/lifecycle-state": "ready",
        "vm.cocoonstack.io/lifecycle-observed-generation": "3",
      },
      ownerReferences: [{
        apiVersion: "cocoonset.cocoonstack.io/v1",
        kind: "CocoonSet",
        name: "demo",
        uid: "5b7e4c1e-0000-4000-8000-000000000001",
        controller: true,
        blockOwnerDeletion: true,
      }],
      managedFields: ["cocoon-operator", "vk-cocoon", "kube-scheduler"].map((manager) => ({
        manager,
        operation: "Update",
        apiVersion: "v1",
        time: "2026-11-30T08:00:00Z",
        fieldsType: "FieldsV1",
        fieldsV1: {
          "f:metadata": {
            "f:annotations": Object.fromEntries(
              Array.from({ length: 12 }, (_, k) => [`f:vm.cocoonstack.io/key-${k}`, {}]),
            ),
            "f:labels": { ".": {}, "f:app.kubernetes.io/name": {} },
          },
          "f:spec": { "f:containers": { 'k:{"name":"agent"}': { ".": {}, "f:image": {} } } },
          "f:status": { "f:conditions": { 'k:{"type":"Ready"}': { ".": {}, "f:status": {} } } },
        },
      })),
    },
    spec: {
      nodeName: "cocoon-node-1",
      containers: [{
        name: "agent",
        image: "ghcr.io/cocoonstack/placeholder:latest",
        resources: { requests: { cpu: "2", memory: "4Gi" }, limits: { cpu: "2", memory: "4Gi" } },
      }],
      nodeSelector: { "cocoonstack.io/pool": "default" },
      tolerations: [
        { key: "virtual-kubelet.io/provider", operator: "Exists" },
        { key: "node.kubernetes.io/not-ready", operator: "Exists", effect: "NoExecute" },
        { key: "node.kubernetes.io/unreachable", operator: "Exists", effect: "NoExecute" },
      ],
      terminationGracePeriodSeconds: 1,
    },
    status: {
      phase: "Running",
      conditions: [
        { type: "Ready", status: "True", lastTransitionTime: "2026-11-30T08:00:00Z" },
        { type: "PodScheduled", status: "True", lastTransitionTime: "2026-11-30T08:00:00Z" },
      ],
      containerStatuses: [{
        name: "agent",
        ready: true,
        restartCount: 0,
        image: "ghcr.io/cocoonstack/placeholder:latest",
        imageID: "",
        state: { running: { startedAt: "2026-11-30T08:00:00Z" } },
      }],
    },
  };
}

/** Objects on the fake API → informer → controller → no-op reconcile (reads the cache). */
async function benchFakeApi(concurrency: number, objects: number) {
  const fake = new FakeClient();
  const mgr = new Manager({
    client: fake,
    metricsBindAddress: "0",
    healthProbeBindAddress: "0",
    leaderElection: false,
    leaderElectionId: "bench",
  });
  let reconciled = 0;
  let done!: () => void;
  const finished = new Promise<void>((r) => done = r);
  controllerManagedBy(mgr).named(`bench-fake-${concurrency}`).for(DemoSets).withOptions({
    maxConcurrentReconciles: concurrency,
  }).complete({
    async reconcile(req, signal) {
      await mgr.client.get(DemoSets, req.namespace, req.name, { signal });
      if (++reconciled === objects) done();
      return {};
    },
  });
  const stop = new AbortController();
  const run = mgr.start(stop.signal);
  await mgr.cache.waitForSync();
  const t0 = performance.now();
  for (let i = 0; i < objects; i++) {
    await fake.create(DemoSets, {
      metadata: { name: `s-${i}`, namespace: "bench" },
      spec: { agent: { image: "img" } },
    });
  }
  await finished;
  const seconds = (performance.now() - t0) / 1000;
  stop.abort();
  await run;
  return { keysPerSecond: Math.round(objects / seconds) };
}

/** The label every pod the operator manages carries (its cache scope). */
const MANAGED_LABEL = "cocoonset.cocoonstack.io/name";

/** The labels of a pod of some other workload: none of the operator's. */
const UNRELATED_LABELS = { "app.kubernetes.io/name": "web", "pod-template-hash": "5d8f7c9b4" };

/** A pod of some other workload: the same size as the operator's. */
function unrelatedPod(i: number): Pod {
  const p = realisticPod(i);
  p.metadata.name = `web-${i}`;
  p.metadata.namespace = "other";
  p.metadata.labels = { ...UNRELATED_LABELS };
  delete p.metadata.ownerReferences;
  return p;
}

/**
 * A client that serves generated pods page by page and then an idle watch, so the process
 * holding the cache holds no other copy of them: its RSS is the operator's, not the fake's.
 * The first `managed` pods are the operator's, the next `unrelated` ones are not; a label
 * selector is applied as the API server would, before anything is sent.
 */
function syntheticPodSource(managed: number, unrelated = 0): Client {
  const unsupported = () => Promise.reject(new Error("read-only synthetic source"));
  const total = managed + unrelated;
  return {
    get: unsupported,
    create: unsupported,
    update: unsupported,
    updateStatus: unsupported,
    patch: unsupported,
    delete: unsupported,
    createSubresource: unsupported,
    list<T extends KubeObject>(_rt: ResourceType<T>, opts: ListOptions = {}) {
      const selector = parseLabelSelector(opts.labelSelector);
      const limit = opts.limit ?? total;
      const items = [];
      let i = Number(opts.continue ?? 0);
      for (; i < total && items.length < limit; i++) {
        // Filtered before the pod is built: the server's work must not show in this RSS.
        if (!matchesLabels(selector, i < managed ? realisticLabels(i) : UNRELATED_LABELS)) continue;
        const p = i < managed ? realisticPod(i) : unrelatedPod(i);
        p.metadata.resourceVersion = String(i + 1);
        items.push(p as unknown as T);
      }
      return Promise.resolve({
        metadata: {
          resourceVersion: String(total),
          ...(i < total ? { continue: String(i) } : {}),
        },
        items,
      });
    },
    watch<T extends KubeObject>(_rt: ResourceType<T>, opts: WatchOptions) {
      // An idle stream: it ends only when the informer stops.
      // deno-lint-ignore require-yield
      return (async function* (): AsyncGenerator<WatchEvent<T>> {
        await new Promise<void>((resolve) => {
          if (opts.signal?.aborted) return resolve();
          opts.signal?.addEventListener("abort", () => resolve(), { once: true });
        });
      })();
    },
  };
}

/** One cache-memory run: how many pods exist and what the cache is told to keep. */
interface CacheMemoryCase {
  managed: number;
  unrelated: number;
  strip: boolean;
  /** Scope the pod informer to the managed label (ManagerOptions.byObject). */
  scoped: boolean;
}

/** Runs in a child process: fills the cache with generated pods, prints heap and RSS. */
async function cacheMemoryChild({ managed, unrelated, strip, scoped }: CacheMemoryCase) {
  collect();
  const before = Deno.memoryUsage();
  const cache = new InformerCache({
    client: syntheticPodSource(managed, unrelated),
    informerDefaults: strip ? {} : { transform: (o: KubeObject) => o },
    byObject: scoped ? [byObject(Pods, { labelSelector: MANAGED_LABEL })] : [],
  });
  cache.informerFor(Pods);
  const ac = new AbortController();
  cache.start(ac.signal);
  await cache.waitForSync();
  collect();
  const after = Deno.memoryUsage();
  const size = cache.informerFor(Pods).size;
  ac.abort();
  await cache.stopped();
  console.log(JSON.stringify({
    pods: size,
    unrelatedPods: unrelated,
    labelScoped: scoped,
    managedFieldsStripped: strip,
    heapDeltaMiB: +((after.heapUsed - before.heapUsed) / 2 ** 20).toFixed(2),
    heapBytesPerPod: Math.round((after.heapUsed - before.heapUsed) / size),
    rssBeforeMiB: +(before.rss / 2 ** 20).toFixed(1),
    rssMiB: +(after.rss / 2 ** 20).toFixed(1),
  }));
}

async function benchCacheMemory(c: CacheMemoryCase): Promise<Record<string, number>> {
  const out = await new Deno.Command(Deno.execPath(), {
    args: [
      "run",
      "-A",
      "--v8-flags=--expose-gc",
      import.meta.filename!,
      "--cache-memory-child",
      JSON.stringify(c),
    ],
    stderr: "inherit",
  }).output();
  if (!out.success) throw new Error("cache memory child failed");
  return JSON.parse(new TextDecoder().decode(out.stdout).trim().split("\n").pop()!);
}

if (Deno.args[0] === "--cache-memory-child") {
  await cacheMemoryChild(JSON.parse(Deno.args[1]) as CacheMemoryCase);
  Deno.exit(0);
}

const flags = benchFlagsOrExit(Deno.args);
const began = performance.now();
const summary: Record<string, unknown> = { gcExposed: !!gc };
for (const concurrency of [1, 4]) {
  const r = await benchNoopReconcile(concurrency, 50_000);
  summary[`noopQueueKeysPerSecond_c${concurrency}`] = Math.round(r.keysPerSecond);
  emit({
    bench: "noop_reconcile_queue",
    concurrency,
    keys: 50_000,
    keysPerSecond: Math.round(r.keysPerSecond),
  });
}
for (const concurrency of [1, 4]) {
  const r = await benchFakeApi(concurrency, 5_000);
  summary[`noopFakeApiKeysPerSecond_c${concurrency}`] = r.keysPerSecond;
  emit({ bench: "noop_reconcile_fake_api", concurrency, objects: 5_000, ...r });
}
for (const strip of [true, false]) {
  const r = await benchCacheMemory({ managed: 5_000, unrelated: 0, strip, scoped: false });
  summary[strip ? "cache5000PodsHeapMiB" : "cache5000PodsHeapMiBWithManagedFields"] =
    r.heapDeltaMiB;
  summary[strip ? "cache5000PodsRssMiB" : "cache5000PodsRssMiBWithManagedFields"] = r.rssMiB;
  emit({ bench: "cache_memory", ...r });
}
for (const scoped of [false, true]) {
  const r = await benchCacheMemory({ managed: 5_000, unrelated: 20_000, strip: true, scoped });
  const key = scoped ? "cache5000PodsAmong25000Scoped" : "cache5000PodsAmong25000Unscoped";
  summary[`${key}HeapMiB`] = r.heapDeltaMiB;
  summary[`${key}RssMiB`] = r.rssMiB;
  emit({ bench: "cache_memory", ...r });
}
emit({ bench: "summary", ...summary });

// The reconciler and the system benchmarks: the system ones each start and stop their own
// control plane, registry and simulator.
progress("reconcile fixture");
const reconcileFixture = await benchReconcileFixtureAll();
progress("delete at scale");
const scale = await benchDeleteAtScale(flags.quick ? 100 : 1000);
emit({ bench: "delete_at_scale", create: scale.create, delete: scale.delete });
progress("refused at scale");
const refusedAtScale = await benchRefusedAtScale(flags.quick ? 100 : 1000);
const startup = await startupFromFlags(flags);
const convergence = await convergenceFromFlags(flags);
const { memoryAtScale, scopedCache } = await memoryAtScaleFromFlags(flags);
progress("pending flows");
const pendingFlows = await pendingFlowsFromFlags(flags);
const { fleet, fleet10k, fleetSlope } = await fleetFromFlags(flags);
const flows = await flowsFromFlags(flags);
progress("scale out");
const scaleOut = await benchScaleOut(scaleOutOptions(flags.operatorCmd, flags.quick));
progress(`scaleOut goals: ${JSON.stringify(scaleOutGoals(scaleOut))}`);
console.log(JSON.stringify(
  {
    ...summary,
    reconcileFixture,
    deleteAtScale: scale.summary,
    refusedAtScale,
    startup,
    convergence,
    memoryAtScale,
    scopedCache,
    pendingFlows,
    fleet,
    fleet10k,
    fleetSlope,
    flows,
    scaleOut,
    quick: flags.quick,
    operatorCmd: flags.operatorCmd,
    benchSeconds: Math.round((performance.now() - began) / 1000),
  },
  null,
  2,
));
