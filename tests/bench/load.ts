/**
 * The load the system benchmarks put on a cluster: N CocoonSets of one main agent, three
 * sub-agents and one toolbox (five pods each) spread over namespaces, a wait until every one of
 * them is Running with all five pods ready, and plain pods of some other workload (no CocoonSet
 * label) in other namespaces, created by the admin client with many requests in flight.
 *
 * @module
 */
import type { CocoonSet } from "../../common/apis/v1/cocoonset_types.ts";
import type { HibernatePolicy } from "../../common/apis/v1/enums.ts";
import { CocoonSets } from "../../common/apis/v1/resources.ts";
import type { ApiClient } from "../../kube/api_client.ts";
import type { Client } from "../../kube/client.ts";
import { Namespaces, type Pod, Pods } from "../../kube/core.ts";
import { isAlreadyExists } from "../../kube/errors.ts";
import { SharedInformer } from "../../kube/informer.ts";
import type { KubeObject } from "../../kube/object.ts";
import type { ResourceType } from "../../kube/resource.ts";
import type { SimNode } from "../../sim/nodes.ts";

/** The image every benchmark VM asks for (the simulator never pulls it). */
const IMAGE = "ghcr.io/cocoonstack/cocoon/ubuntu:24.04";
const TOOLBOX_IMAGE = "ghcr.io/cocoonstack/cocoon/toolbox:1";

/** Sub-agents per set (the main agent is one more). */
export const SUB_AGENTS = 3;
/** Pods per set: main + sub-agents + one toolbox. */
export const PODS_PER_SET = 1 + SUB_AGENTS + 1;
/** Sets per namespace. */
const SETS_PER_NAMESPACE = 50;

/** Progress lines go to stderr; stdout carries only the JSON document. */
export function progress(message: string): void {
  console.error(`[bench] ${new Date().toISOString().slice(11, 19)} ${message}`);
}

/** Runs fn over items with at most `limit` calls in flight; rejects on the first failure. */
export async function inParallel<T>(
  items: readonly T[],
  limit: number,
  fn: (item: T, index: number) => Promise<unknown>,
): Promise<void> {
  let next = 0;
  const worker = async () => {
    while (next < items.length) {
      const i = next++;
      await fn(items[i], i);
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
}

/**
 * Simulator nodes for `sets` sets: a set's agents share their main's node, so each node has
 * room for a whole number of sets with a quarter to spare (placement is by free seats, not
 * packed), every node has room for two whole sets, and no node holds more than about 250 pods.
 */
export function nodesFor(sets: number): SimNode[] {
  const seatsNeeded = Math.ceil(sets * PODS_PER_SET * 1.25);
  const count = Math.max(2, Math.ceil(seatsNeeded / 250));
  const seats = Math.max(2 * PODS_PER_SET, Math.ceil(seatsNeeded / count));
  return Array.from({ length: count }, (_, i) => ({ name: `vk-${i}`, pool: "default", seats }));
}

/** A set's namespace and name. */
export interface SetRef {
  namespace: string;
  name: string;
}

/** The i-th set of a run: `bench-<i / 50>/set-<i>`. */
export function setRef(i: number, prefix = "bench"): SetRef {
  return { namespace: `${prefix}-${Math.floor(i / SETS_PER_NAMESPACE)}`, name: `set-${i}` };
}

/** Creates a namespace; no error when it exists. */
export async function ensureNamespace(admin: ApiClient, name: string): Promise<void> {
  try {
    await admin.create(Namespaces, { metadata: { name } });
  } catch (err) {
    if (!isAlreadyExists(err)) throw err;
  }
}

/** The shape of a benchmark set (default: main + three sub-agents + one toolbox). */
export interface SetShape {
  subAgents?: number;
  toolbox?: boolean;
  hibernatePolicy?: HibernatePolicy;
}

/** One benchmark CocoonSet of the given shape. */
function benchSet(ref: SetRef, shape: SetShape = {}): CocoonSet {
  const { subAgents = SUB_AGENTS, toolbox = true, hibernatePolicy } = shape;
  return {
    apiVersion: "cocoonset.cocoonstack.io/v1",
    kind: "CocoonSet",
    metadata: { name: ref.name, namespace: ref.namespace },
    spec: {
      agent: {
        image: IMAGE,
        replicas: subAgents,
        resources: { limits: { cpu: "2", memory: "4Gi" } },
      },
      ...(toolbox ? { toolboxes: [{ name: "tools", image: TOOLBOX_IMAGE }] } : {}),
      ...(hibernatePolicy ? { hibernatePolicy } : {}),
    },
  };
}

/**
 * Creates the sets numbered [from, to) (namespaces first), `inFlight` creates at a time, of the
 * given shape.
 */
export async function createSets(
  admin: ApiClient,
  from: number,
  to: number,
  inFlight = 50,
  shape: SetShape = {},
): Promise<SetRef[]> {
  const refs = Array.from({ length: to - from }, (_, k) => setRef(from + k));
  const namespaces = [...new Set(refs.map((r) => r.namespace))];
  await inParallel(namespaces, 10, (ns) => ensureNamespace(admin, ns));
  await inParallel(refs, inFlight, (ref) => admin.create(CocoonSets, benchSet(ref, shape)));
  return refs;
}

/** Running for its spec with every agent and toolbox the spec asks for ready. */
export function converged(cs: CocoonSet): boolean {
  const st = cs.status;
  return st?.phase === "Running" && st.observedGeneration === cs.metadata.generation &&
    st.readyAgents === 1 + (cs.spec.agent.replicas ?? 0) &&
    (st.readyToolboxes ?? 0) === (cs.spec.toolboxes?.length ?? 0);
}

/**
 * A cluster-wide informer of one kind in the benchmark process, for the waits of a benchmark:
 * one list and a watch, where polling whole lists would load the API server (and etcd, without
 * the watch cache) in proportion to the fleet, many times a second, while it is being measured.
 */
export interface ObjectWatch<T extends KubeObject> extends AsyncDisposable {
  /** Objects known now. */
  readonly size: number;
  /**
   * Resolves with the time (performance.now()) of the watch event at which `count` objects
   * satisfy `done` (at once when they already do); rejects after timeoutMs, saying how many
   * did. Logs progress every ~10 s. One wait at a time.
   */
  waitFor(
    count: number,
    done: (obj: T) => boolean,
    what: string,
    timeoutMs: number,
  ): Promise<number>;
  /** How many objects give each value of `key` now (e.g. by phase, to say where a wait stalled). */
  countBy(key: (obj: T) => string): Record<string, number>;
  stop(): Promise<void>;
}

/** Starts an ObjectWatch of `rt` (all namespaces) and waits for its first list. */
export async function watchObjects<T extends KubeObject>(
  client: Client,
  rt: ResourceType<T>,
): Promise<ObjectWatch<T>> {
  const informer = new SharedInformer<T>({ client, rt });
  const stopping = new AbortController();
  const running = informer.run(stopping.signal);
  /** The current wait: the keys that satisfy it and what to do on each change. */
  let waiter: { keys: Set<string>; check(obj: T, gone: boolean): void } | undefined;
  const key = (o: T) => `${o.metadata.namespace ?? ""}/${o.metadata.name}`;
  informer.addEventHandler({
    onAdd: (o) => waiter?.check(o, false),
    onUpdate: (_, o) => waiter?.check(o, false),
    onDelete: (o) => waiter?.check(o, true),
  });
  const stop = async () => {
    stopping.abort();
    await running.catch(() => {});
  };
  try {
    await informer.waitForSync(AbortSignal.timeout(300_000));
  } catch (err) {
    await stop();
    throw err;
  }
  return {
    get size() {
      return informer.size;
    },
    waitFor(count, done, what, timeoutMs) {
      if (waiter) return Promise.reject(new Error("watchObjects: one wait at a time"));
      return new Promise<number>((resolve, reject) => {
        const keys = new Set<string>();
        let lastLog = performance.now();
        const finish = (err?: Error) => {
          clearTimeout(timer);
          waiter = undefined;
          if (err) reject(err);
          else resolve(performance.now());
        };
        const timer = setTimeout(
          () =>
            finish(
              new Error(
                `timed out after ${timeoutMs} ms waiting for ${count} ${what} (${keys.size} reached)`,
              ),
            ),
          timeoutMs,
        );
        waiter = {
          keys,
          check(obj, gone) {
            if (!gone && done(obj)) keys.add(key(obj));
            else keys.delete(key(obj));
            if (keys.size >= count) return finish();
            const now = performance.now();
            if (now - lastLog > 10_000) {
              lastLog = now;
              progress(`${keys.size}/${count} ${what}`);
            }
          },
        };
        for (const obj of informer.listStored()) if (done(obj)) keys.add(key(obj));
        if (keys.size >= count) finish();
      });
    },
    countBy(keyOf) {
      const out: Record<string, number> = {};
      for (const obj of informer.listStored()) {
        const k = keyOf(obj);
        out[k] = (out[k] ?? 0) + 1;
      }
      return out;
    },
    stop,
    [Symbol.asyncDispose]: stop,
  };
}

/**
 * Waits until `count` CocoonSets (cluster-wide) have converged (see watchObjects); logs
 * progress every ~10 s. Returns the time it happened (performance.now(), at the watch event
 * that made it so).
 */
export async function waitConverged(
  admin: ApiClient,
  count: number,
  timeoutMs: number,
): Promise<number> {
  await using sets = await watchObjects(admin, CocoonSets);
  return await sets.waitFor(count, converged, "CocoonSets Running", timeoutMs);
}

/** Labels of the unrelated workload: none of the operator's. */
const UNRELATED_LABELS = { "app.kubernetes.io/name": "web", "pod-template-hash": "5d8f7c9b4" };

/** A pod of some other workload, of a typical size (about 1.5 KiB as JSON). */
function unrelatedPod(namespace: string, i: number): Pod {
  return {
    metadata: {
      name: `web-${i}`,
      namespace,
      labels: { ...UNRELATED_LABELS },
      annotations: {
        "kubectl.kubernetes.io/default-container": "web",
        "prometheus.io/scrape": "true",
        "prometheus.io/port": "9102",
      },
    },
    spec: {
      containers: [{
        name: "web",
        image: "registry.example.com/team/web:2026.11.30-1",
        command: ["/usr/local/bin/web"],
        args: ["--listen=:8080", "--metrics=:9102", "--config=/etc/web/config.yaml"],
        env: [
          { name: "LOG_LEVEL", value: "info" },
          { name: "LISTEN_ADDR", value: ":8080" },
          { name: "UPSTREAM", value: "http://api.team.svc.cluster.local:8080" },
        ],
        resources: {
          requests: { cpu: "100m", memory: "128Mi" },
          limits: { cpu: "500m", memory: "256Mi" },
        },
      }],
      // Unscheduled on purpose: no kubelet runs them and the simulator only takes pods that
      // tolerate its nodes' taint.
      terminationGracePeriodSeconds: 30,
    },
  };
}

/**
 * Creates `count` unrelated pods in namespaces `unrelated-<k>` (1 000 per namespace), with
 * `inFlight` creates at a time.
 */
export async function createUnrelatedPods(
  admin: ApiClient,
  count: number,
  inFlight = 200,
): Promise<void> {
  const perNamespace = 1_000;
  const namespaces = Array.from(
    { length: Math.ceil(count / perNamespace) },
    (_, k) => `unrelated-${k}`,
  );
  await inParallel(namespaces, 10, (ns) => ensureNamespace(admin, ns));
  const indexes = Array.from({ length: count }, (_, i) => i);
  let done = 0;
  await inParallel(indexes, inFlight, async (i) => {
    await admin.create(Pods, unrelatedPod(namespaces[Math.floor(i / perNamespace)], i));
    if (++done % 5_000 === 0) progress(`${done}/${count} unrelated pods created`);
  });
}
