/**
 * Shared fixtures of the CocoonSet unit tests: a CocoonSet like the Go tests' newCocoonSet, pod
 * state helpers, a reconciler wired to the in-memory doubles, and a SetPass for tests that call one
 * step of the loop directly. Private to this folder's tests.
 *
 * @module
 */
import { isNotFound, Nodes, Pods } from "../kube/mod.ts";
import type { Client, KubeObject, Node, Pod, Reader, ResourceType, Result } from "../kube/mod.ts";
import {
  FakeClient,
  FakeClock,
  metricValue,
  RecordingRecorder,
  staleCache,
} from "../kube/testing/mod.ts";
import type { FakeAction } from "../kube/testing/mod.ts";
import type { CocoonSet } from "../common/apis/v1/cocoonset_types.ts";
import type { CocoonHibernation } from "../common/apis/v1/cocoonhibernation_types.ts";
import type { CocoonHibernationPhase, HibernationDesire } from "../common/apis/v1/enums.ts";
import { CocoonHibernations, CocoonSets } from "../common/apis/v1/resources.ts";
import type { Condition } from "../common/k8s/condition.ts";
import {
  ANNOTATION_LIFECYCLE_STATE,
  ANNOTATION_LIFECYCLE_STATE_MESSAGE,
  ANNOTATION_VMID,
  applyLifecycleStatus,
  DEFAULT_NODE_POOL,
  LABEL_NODE_POOL,
  LABEL_SNAPSHOT_COMPATIBILITY_CLASS,
  LIFECYCLE_STATE_FAILED,
  LIFECYCLE_STATE_HIBERNATED,
  readCocoonSetGeneration,
} from "../common/meta/mod.ts";
import { register as registerOperatorMetrics } from "../metrics/metrics.ts";
import { FakeRegistry } from "../snapshot/testing/fake.ts";
import { FINALIZER_NAME } from "./finalizer.ts";
import { type CocoonSetDeps, logFor, type SetPass, type Step } from "./pass.ts";
import { classifyPods } from "./pods.ts";
import { CocoonSetReconciler, finishPass } from "./reconciler.ts";

/** Namespace of every fixture. */
export const TEST_NAMESPACE = "ns";
/** UID of every fixture CocoonSet, so pods built from an unstored copy are still owned. */
export const TEST_UID = "test-uid";
/** Image of the default agent spec. */
export const TEST_IMAGE = "ghcr.io/cocoonstack/cocoon/ubuntu:24.04";

/** A CocoonSet in namespace "ns" with only an agent image set, then each modifier applied. */
export function newCocoonSet(name: string, ...modifiers: ((cs: CocoonSet) => void)[]): CocoonSet {
  const cs: CocoonSet = {
    apiVersion: "cocoonset.cocoonstack.io/v1",
    kind: "CocoonSet",
    metadata: { name, namespace: TEST_NAMESPACE, uid: TEST_UID },
    spec: { agent: { image: TEST_IMAGE } },
  };
  for (const m of modifiers) m(cs);
  return cs;
}

/** A modifier for newCocoonSet: spec.agent.replicas = n. */
export function withReplicas(n: number): (cs: CocoonSet) => void {
  return (cs) => {
    cs.spec.agent.replicas = n;
  };
}

/**
 * The value of an operator counter series, 0 while the series is absent. Metrics are process
 * wide: give each test its own set name, or compare against a value read before the step.
 */
export async function counterValue(name: string, labels: Record<string, string>): Promise<number> {
  registerOperatorMetrics();
  return (await metricValue(name, labels)) ?? 0;
}

/** Marks pod Running with Ready=True (in place) and returns it. */
export function readyPod(pod: Pod): Pod {
  pod.status = {
    ...pod.status,
    phase: "Running",
    conditions: [...(pod.status?.conditions ?? []), { type: "Ready", status: "True" }],
  };
  return pod;
}

/** Marks pod as a VM vk-cocoon runs: bound to node, Ready, with a VM id. Returns it. */
export function livePod(pod: Pod, node = "node-a"): Pod {
  pod.spec = { ...pod.spec!, nodeName: pod.spec?.nodeName || node };
  pod.metadata.annotations = {
    ...pod.metadata.annotations,
    [ANNOTATION_VMID]: `id-${pod.metadata.name}`,
  };
  return readyPod(pod);
}

/** The in-memory world one reconciler runs against. */
export interface TestEnv {
  fake: FakeClient;
  clock: FakeClock;
  recorder: RecordingRecorder;
  registry: FakeRegistry;
  reconciler: CocoonSetReconciler;
}

/** An object to seed, with its resource type. */
export interface Seed {
  rt: ResourceType;
  obj: KubeObject;
}

/** Seeds a pod. */
export function podSeed(pod: Pod): Seed {
  return { rt: Pods, obj: pod };
}

/** Seeds a CocoonSet; with finalizer (the default) the reconciler goes past the finalizer step. */
export function setSeed(cs: CocoonSet, withFinalizer = true): Seed {
  const copy = structuredClone(cs);
  if (withFinalizer && !copy.metadata.finalizers?.includes(FINALIZER_NAME)) {
    copy.metadata.finalizers = [...(copy.metadata.finalizers ?? []), FINALIZER_NAME];
  }
  return { rt: CocoonSets, obj: copy };
}

/** Nodes every test cluster has unless told otherwise: the fixtures' node-a…node-c. */
export const DEFAULT_TEST_NODES = ["node-a", "node-b", "node-c"];

/** A Node of the given pool (default `default`) and snapshot CPU class (none when ""). */
export function poolNode(name: string, pool = DEFAULT_NODE_POOL, cpuClass = ""): Node {
  return {
    apiVersion: "v1",
    kind: "Node",
    metadata: {
      name,
      labels: {
        [LABEL_NODE_POOL]: pool,
        "kubernetes.io/hostname": name,
        ...(cpuClass ? { [LABEL_SNAPSHOT_COMPATIBILITY_CLASS]: cpuClass } : {}),
      },
    },
  };
}

/** Deviations from the default wiring of newTestEnv. */
export interface TestEnvOptions {
  /** The cluster's nodes (default: DEFAULT_TEST_NODES, all in pool `default`). */
  nodes?: Node[];
  /** Leave the registry out (the paths that must cope without one); env.registry stays unused. */
  withoutRegistry?: boolean;
  /** A separate uncached reader (default: the same FakeClient), e.g. one showing a newer world. */
  apiReader?: Reader;
}

/**
 * A reconciler whose client and apiReader are one FakeClient seeded with the nodes (node-a…node-c
 * in pool `default` unless opts.nodes says otherwise) and objects (status kept),
 * with a FakeClock (start at clockStart ms), a RecordingRecorder and a FakeRegistry. Registers
 * the operator metrics on the runtime registry so metricValue can read them.
 */
export function newTestEnv(
  objects: Seed[] = [],
  clockStart = Date.UTC(2026, 4, 14),
  opts: TestEnvOptions = {},
): TestEnv {
  registerOperatorMetrics();
  const clock = new FakeClock(clockStart);
  const fake = new FakeClient({ clock });
  for (const node of opts.nodes ?? DEFAULT_TEST_NODES.map((n) => poolNode(n))) {
    fake.seed(Nodes, node);
  }
  for (const { rt, obj } of objects) fake.seed(rt, obj);
  const recorder = new RecordingRecorder();
  const registry = new FakeRegistry();
  const reconciler = new CocoonSetReconciler({
    client: fake,
    apiReader: opts.apiReader ?? fake,
    registry: opts.withoutRegistry ? undefined : registry,
    recorder,
    clock,
  });
  return { fake, clock, recorder, registry, reconciler };
}

/** The collaborators of env as a reconcile step takes them. */
export function depsOf(env: TestEnv): CocoonSetDeps {
  return env.reconciler.deps;
}

/**
 * A SetPass over cs and pods, for tests that call one step of the loop the way the reconciler
 * would after listing and classifying the owned pods.
 */
export function newTestPass(
  deps: CocoonSetDeps,
  cs: CocoonSet,
  pods: readonly Pod[] = [],
  signal: AbortSignal = new AbortController().signal,
): SetPass {
  return {
    deps,
    cs,
    classified: classifyPods(pods),
    signal,
    log: logFor(cs),
    problems: [],
  };
}

/**
 * Runs one step of the loop on pass and, when it stops the pass, ends the pass as the reconciler
 * does (status, then any effect, then the error is thrown); undefined when the pass goes on.
 */
export async function runStep(
  pass: SetPass,
  step: (pass: SetPass) => Promise<Step>,
): Promise<Result | undefined> {
  const decided = await step(pass);
  return decided.stop ? await finishPass(pass, decided) : undefined;
}

/** What a lagging cache still shows: a stale copy of the set, the pods as they were. */
export interface CacheLag {
  /** Every CocoonSet read answers with this copy. */
  set?: CocoonSet;
  /** Every pod list answers with these pods. */
  pods?: readonly Pod[];
}

/**
 * The fake as a cache that missed writes: reads of the set and lists of pods answer from lag (a
 * fresh copy each time), everything else (other reads, every write) reaches the fake.
 */
export function laggingCache(fake: FakeClient, lag: CacheLag): Client {
  // lag is read at each call, so a test may change what the cache shows as it goes.
  return staleCache(fake, {
    get: (rt) => rt === CocoonSets ? lag.set : undefined,
    list: (rt) => rt === Pods ? lag.pods : undefined,
  });
}

/** A reconciler like env's whose cached reads go through client (the uncached reader stays). */
export function reconcilerWith(env: TestEnv, client: Client): CocoonSetReconciler {
  return new CocoonSetReconciler({
    client,
    apiReader: env.fake,
    registry: env.registry,
    recorder: env.recorder,
    clock: env.clock,
  });
}

/** Runs one reconcile of ns/name. */
export function reconcileSet(
  env: TestEnv,
  name: string,
  signal: AbortSignal = new AbortController().signal,
): ReturnType<CocoonSetReconciler["reconcile"]> {
  return env.reconciler.reconcile({ namespace: TEST_NAMESPACE, name }, signal);
}

/** The stored pod, or undefined when it is gone. */
export async function getPod(fake: FakeClient, name: string): Promise<Pod | undefined> {
  try {
    return await fake.get(Pods, TEST_NAMESPACE, name);
  } catch (err) {
    if (isNotFound(err)) return undefined;
    throw err;
  }
}

/** The stored CocoonSet. */
export function getSet(fake: FakeClient, name: string): Promise<CocoonSet> {
  return fake.get(CocoonSets, TEST_NAMESPACE, name);
}

/** The stored CocoonSet, or undefined when it is gone. */
export async function findSet(fake: FakeClient, name: string): Promise<CocoonSet | undefined> {
  try {
    return await fake.get(CocoonSets, TEST_NAMESPACE, name);
  } catch (err) {
    if (isNotFound(err)) return undefined;
    throw err;
  }
}

/** Gives cs the operator's finalizer (a modifier for newCocoonSet, as setSeed does). */
export function withFinalizer(cs: CocoonSet): void {
  if (!cs.metadata.finalizers?.includes(FINALIZER_NAME)) {
    cs.metadata.finalizers = [...(cs.metadata.finalizers ?? []), FINALIZER_NAME];
  }
}

/** Stores cs and the pods as given (status kept); returns the stored CocoonSet. */
export function seedSet(env: TestEnv, cs: CocoonSet, pods: readonly Pod[] = []): CocoonSet {
  const stored = env.fake.seed(CocoonSets, cs);
  for (const pod of pods) env.fake.seed(Pods, pod);
  return stored;
}

/** Reads the stored pod, lets edit change it (status included) and stores it back. */
export async function editPod(env: TestEnv, name: string, edit: (pod: Pod) => void): Promise<Pod> {
  const pod = await env.fake.get(Pods, TEST_NAMESPACE, name);
  edit(pod);
  return env.fake.seed(Pods, pod);
}

/**
 * vk-cocoon's report that the VM hibernated, written as the pair it always writes together:
 * the state and the generation stamp it saw on the pod.
 */
export function lifecycleHibernated(pod: Pod): Pod {
  applyLifecycleStatus({
    state: LIFECYCLE_STATE_HIBERNATED,
    observedGeneration: readCocoonSetGeneration(pod),
    message: "",
  }, pod);
  return pod;
}

/** vk-cocoon's report that the VM failed, with an optional reason message. */
export function lifecycleFailed(pod: Pod, message = ""): Pod {
  const annotations: Record<string, string> = {
    ...pod.metadata.annotations,
    [ANNOTATION_LIFECYCLE_STATE]: LIFECYCLE_STATE_FAILED,
  };
  if (message) annotations[ANNOTATION_LIFECYCLE_STATE_MESSAGE] = message;
  pod.metadata.annotations = annotations;
  return pod;
}

/** A CocoonHibernation `h-<pod>` naming pod, with the given desire and (optional) phase. */
export function newHibernation(
  pod: string,
  desire: HibernationDesire,
  phase?: CocoonHibernationPhase,
): CocoonHibernation {
  return {
    apiVersion: "cocoonset.cocoonstack.io/v1",
    kind: "CocoonHibernation",
    metadata: { name: `h-${pod}`, namespace: TEST_NAMESPACE },
    spec: { podRef: { name: pod }, desire },
    ...(phase ? { status: { phase } } : {}),
  };
}

/** Recorded API calls with this verb on this resource (and object name, when given). */
export function actionsOf(
  env: TestEnv,
  verb: FakeAction["verb"],
  rt: ResourceType,
  name?: string,
): FakeAction[] {
  // Dry runs (the spec check before the first create of a generation) store nothing.
  return env.fake.actions.filter((a) =>
    a.verb === verb && a.resource === rt && (name === undefined || a.name === name) && !a.dryRun
  );
}

/**
 * How many times the CocoonHibernations of the fixtures' namespace were listed. The
 * cluster-wide lists of the VM-name index the fake stands in for (scannedVMNameIndex) are not
 * counted: in the operator that index is the informer cache's.
 */
export function hibernationLists(env: TestEnv): number {
  return actionsOf(env, "list", CocoonHibernations).filter((a) => a.namespace === TEST_NAMESPACE)
    .length;
}

/** The condition of that type in the CocoonSet's status, if any. */
export function conditionOf(cs: CocoonSet | undefined, type: string): Condition | undefined {
  return cs?.status?.conditions?.find((c) => c.type === type);
}

/** The teardown fixture: a set holding the finalizer and already marked for deletion. */
export async function seedDeletingSet(
  env: ReturnType<typeof newTestEnv>,
  cs: CocoonSet,
  pods: readonly Pod[] = [],
): Promise<void> {
  withFinalizer(cs);
  seedSet(env, cs, pods);
  await env.fake.delete(CocoonSets, TEST_NAMESPACE, cs.metadata.name ?? "");
  env.fake.actions.length = 0;
}
