/**
 * Shared fixtures of the CocoonSet unit tests (private to this folder): a CocoonSet builder,
 * pod state setters that play vk-cocoon and the kubelet on a built pod, and a test environment
 * wiring a CocoonSetReconciler to the in-memory API server, a fake registry, a recording Event
 * recorder and a manual clock. Nothing here talks to a real cluster.
 *
 * @module
 */
import type { Reader } from "../kube/client.ts";
import { type Pod, Pods } from "../kube/core.ts";
import { isNotFound } from "../kube/errors.ts";
import type { Result } from "../kube/reconcile.ts";
import type { ResourceType } from "../kube/resource.ts";
import { type FakeAction, FakeClient } from "../kube/testing/fake.ts";
import { FakeClock } from "../kube/testing/fake_clock.ts";
import { RecordingRecorder } from "../kube/testing/recorder.ts";
import type { CocoonSet } from "../common/apis/v1/cocoonset_types.ts";
import type { CocoonHibernation } from "../common/apis/v1/cocoonhibernation_types.ts";
import type { CocoonHibernationPhase, HibernationDesire } from "../common/apis/v1/enums.ts";
import { CocoonHibernations, CocoonSets } from "../common/apis/v1/resources.ts";
import type { Condition } from "../common/k8s/condition.ts";
import {
  AnnotationLifecycleState,
  AnnotationLifecycleStateMessage,
  AnnotationVMID,
  applyLifecycleStatus,
  LifecycleStateFailed,
  LifecycleStateHibernated,
  readCocoonSetGeneration,
} from "../common/meta/mod.ts";
import { FakeRegistry } from "../snapshot/fake.ts";
import { finalizerName } from "./delete.ts";
import { logFor, type Pass } from "./pass.ts";
import { classifyPods } from "./pods.ts";
import { CocoonSetReconciler } from "./reconciler.ts";
import { newRestoreIntent } from "./restore.ts";

/** The namespace every fixture lives in. */
export const testNamespace = "ns";
/** The agent image of newCocoonSet. */
export const testImage = "ghcr.io/cocoonstack/cocoon/ubuntu:24.04";
/** Where the manual clock starts (any fixed instant works; this one reads well in RFC 3339). */
export const testEpochMs = Date.parse("2025-06-01T12:00:00Z");

/**
 * A CocoonSet `name` in testNamespace with a fixed uid (so pods built from it are controlled by
 * it), generation 1, one agent image and no finalizer; mutate adjusts it before it is returned.
 */
export function newCocoonSet(name = "demo", mutate?: (cs: CocoonSet) => void): CocoonSet {
  const cs: CocoonSet = {
    apiVersion: "cocoonset.cocoonstack.io/v1",
    kind: "CocoonSet",
    metadata: { name, namespace: testNamespace, uid: `uid-${name}`, generation: 1 },
    spec: { agent: { image: testImage } },
  };
  mutate?.(cs);
  return cs;
}

/** Gives cs the operator's finalizer, as every set has after its first pass. */
export function withFinalizer(cs: CocoonSet): void {
  cs.metadata.finalizers = [finalizerName];
}

/** Marks the pod Running with Ready=True (kubelet view). */
export function readyPod(pod: Pod): Pod {
  pod.status = {
    ...pod.status,
    phase: "Running",
    conditions: [
      ...(pod.status?.conditions ?? []).filter((c) => c.type !== "Ready"),
      { type: "Ready", status: "True" },
    ],
  };
  return pod;
}

/** Gives the pod a VM id and a running container: vk-cocoon's "the VM is live". */
export function liveVM(pod: Pod, vmID: string): Pod {
  pod.metadata.annotations = { ...pod.metadata.annotations, [AnnotationVMID]: vmID };
  pod.status = {
    ...pod.status,
    containerStatuses: [{
      name: "agent",
      ready: true,
      restartCount: 0,
      image: "x",
      imageID: "x",
      state: { running: {} },
    }],
  };
  return pod;
}

/**
 * vk-cocoon's report that the VM hibernated, written as the pair it always writes together:
 * state and the generation stamp it saw on the pod.
 */
export function lifecycleHibernated(pod: Pod): Pod {
  applyLifecycleStatus({
    state: LifecycleStateHibernated,
    observedGeneration: readCocoonSetGeneration(pod),
    message: "",
  }, pod);
  return pod;
}

/** vk-cocoon's report that the VM failed, with an optional reason message. */
export function lifecycleFailed(pod: Pod, message = ""): Pod {
  const annotations: Record<string, string> = {
    ...pod.metadata.annotations,
    [AnnotationLifecycleState]: LifecycleStateFailed,
  };
  if (message) annotations[AnnotationLifecycleStateMessage] = message;
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
    metadata: { name: `h-${pod}`, namespace: testNamespace },
    spec: { podRef: { name: pod }, desire },
    ...(phase ? { status: { phase } } : {}),
  };
}

/** A reconciler on the fake API with every collaborator a test may look at. */
export interface TestEnv {
  fake: FakeClient;
  registry: FakeRegistry;
  recorder: RecordingRecorder;
  clock: FakeClock;
  reconciler: CocoonSetReconciler;
}

/** How newTestEnv deviates from the defaults. */
export interface TestEnvOptions {
  /** false: the reconciler has no registry (the paths that tolerate its absence). */
  registry?: FakeRegistry | false;
  /** Uncached reads; defaults to the same fake as the client. */
  apiReader?: Reader;
}

/**
 * A CocoonSetReconciler whose client and apiReader are one FakeClient (unless apiReader is
 * given), with a FakeRegistry, a RecordingRecorder and a FakeClock at testEpochMs.
 */
export function newTestEnv(opts: TestEnvOptions = {}): TestEnv {
  const clock = new FakeClock(testEpochMs);
  const fake = new FakeClient({ clock });
  const registry = opts.registry || new FakeRegistry();
  const recorder = new RecordingRecorder();
  const reconciler = new CocoonSetReconciler({
    client: fake,
    apiReader: opts.apiReader ?? fake,
    registry: opts.registry === false ? undefined : registry,
    recorder,
    clock,
  });
  return { fake, registry, recorder, clock, reconciler };
}

/** Stores cs and the pods as given (status kept); returns the stored CocoonSet. */
export function seedSet(env: TestEnv, cs: CocoonSet, pods: readonly Pod[] = []): CocoonSet {
  const stored = env.fake.seed(CocoonSets, cs);
  for (const pod of pods) env.fake.seed(Pods, pod);
  return stored;
}

/** One reconcile pass of the CocoonSet `name`. */
export function reconcileSet(env: TestEnv, name = "demo"): Promise<Result> {
  return env.reconciler.reconcile(
    { namespace: testNamespace, name },
    new AbortController().signal,
  );
}

/**
 * A Pass over cs and the given pods, for tests that call one step of the loop directly. The
 * pods are classified exactly as the reconciler would classify a list of them.
 */
export function newTestPass(env: TestEnv, cs: CocoonSet, pods: readonly Pod[] = []): Pass {
  const signal = new AbortController().signal;
  return {
    deps: env.reconciler.deps,
    cs,
    classified: classifyPods(pods),
    signal,
    intent: newRestoreIntent(env.reconciler.deps, cs.metadata.namespace ?? "", signal),
    log: logFor(cs),
    problems: [],
  };
}

/** The stored pod, or undefined when the API has none of that name. */
export async function findPod(env: TestEnv, name: string): Promise<Pod | undefined> {
  try {
    return await env.fake.get(Pods, testNamespace, name);
  } catch (err) {
    if (isNotFound(err)) return undefined;
    throw err;
  }
}

/** The stored CocoonSet, or undefined when it is gone. */
export async function findSet(env: TestEnv, name = "demo"): Promise<CocoonSet | undefined> {
  try {
    return await env.fake.get(CocoonSets, testNamespace, name);
  } catch (err) {
    if (isNotFound(err)) return undefined;
    throw err;
  }
}

/** Recorded API calls with this verb on this resource (and object name, when given). */
export function actionsOf(
  env: TestEnv,
  verb: FakeAction["verb"],
  rt: ResourceType,
  name?: string,
): FakeAction[] {
  return env.fake.actions.filter((a) =>
    a.verb === verb && a.resource === rt && (name === undefined || a.name === name)
  );
}

/** How many times the CocoonHibernations of the namespace were listed. */
export function hibernationLists(env: TestEnv): number {
  return actionsOf(env, "list", CocoonHibernations).length;
}

/** Forgets the recorded API calls, Events and registry calls (between the steps of a test). */
export function clearRecords(env: TestEnv): void {
  env.fake.actions.length = 0;
  env.recorder.clear();
  env.registry.calls.length = 0;
}

/** Reads the stored pod, lets edit change it (status included) and stores it back. */
export async function editPod(env: TestEnv, name: string, edit: (pod: Pod) => void): Promise<Pod> {
  const pod = await env.fake.get(Pods, testNamespace, name);
  edit(pod);
  return env.fake.seed(Pods, pod);
}

/** The condition of that type in the CocoonSet's status, if any. */
export function conditionOf(cs: CocoonSet | undefined, type: string): Condition | undefined {
  return cs?.status?.conditions?.find((c) => c.type === type);
}
