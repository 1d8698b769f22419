/**
 * CocoonSet builders and waits on API objects, Events and metrics for tests that run the whole
 * system on a stack (tests/harness/stack.ts): the end-to-end and the fault suites.
 *
 * @module
 */
import type { AgentSpec, CocoonSet, CocoonSetSpec } from "../../common/apis/v1/cocoonset_types.ts";
import { CocoonSets } from "../../common/apis/v1/resources.ts";
import { type Condition, findStatusCondition } from "../../common/k8s/condition.ts";
import { LABEL_COCOON_SET } from "../../common/meta/keys.ts";
import type { CoreEvent, Pod } from "../../kube/core.ts";
import { Pods } from "../../kube/core.ts";
import { isNotFound } from "../../kube/errors.ts";
import type { KubeObject } from "../../kube/object.ts";
import type { Stack } from "./stack.ts";
import { waitUntil } from "./wait.ts";

/** The image every test VM asks for (the simulator never pulls it). */
export const IMAGE = "ghcr.io/cocoonstack/cocoon/ubuntu:24.04";
/** How long a wait for the system to converge may take by default. */
export const CONVERGE_MS = 60_000;

/** `vk-<namespace>-<set>-<slot or toolbox>`: the VM name of a set's pod. */
export function vmOf(namespace: string, set: string, member: number | string): string {
  return `vk-${namespace}-${set}-${member}`;
}

/** A CocoonSet spec with the test image and anything given on top. */
export type SetSpec = Omit<Partial<CocoonSetSpec>, "agent"> & { agent?: Partial<AgentSpec> };

/** Creates a CocoonSet in namespace (created if needed). */
export async function createSet(
  stack: Stack,
  namespace: string,
  name: string,
  spec: SetSpec = {},
): Promise<CocoonSet> {
  await stack.namespace(namespace);
  return await stack.admin.create(CocoonSets, {
    apiVersion: "cocoonset.cocoonstack.io/v1",
    kind: "CocoonSet",
    metadata: { name, namespace },
    spec: { ...spec, agent: { image: IMAGE, ...spec.agent } },
  });
}

/** Merge-patches a CocoonSet's spec. */
export async function patchSpec(
  stack: Stack,
  cs: CocoonSet,
  spec: Record<string, unknown>,
): Promise<CocoonSet> {
  return await stack.admin.patch(
    CocoonSets,
    cs.metadata.namespace ?? "",
    cs.metadata.name ?? "",
    "merge",
    { spec },
  );
}

/** The stored CocoonSet. */
export function getSet(stack: Stack, cs: CocoonSet): Promise<CocoonSet> {
  return stack.admin.get(CocoonSets, cs.metadata.namespace ?? "", cs.metadata.name ?? "");
}

/** A status condition of a CocoonSet. */
export function conditionOf(cs: CocoonSet, type: string): Condition | undefined {
  return findStatusCondition(cs.status?.conditions, type);
}

/** Polls the CocoonSet until ok holds; returns it. */
export async function waitSet(
  stack: Stack,
  cs: CocoonSet,
  what: string,
  ok: (cs: CocoonSet) => boolean,
  timeoutMs = CONVERGE_MS,
): Promise<CocoonSet> {
  let last: CocoonSet | undefined;
  try {
    return await waitUntil(async () => {
      last = await getSet(stack, cs);
      return ok(last) ? last : undefined;
    }, {
      what: `${cs.metadata.namespace}/${cs.metadata.name} ${what}`,
      timeoutMs,
      intervalMs: 100,
    });
  } catch (err) {
    throw new Error(`${(err as Error).message}\nlast seen: ${JSON.stringify(last?.status)}`);
  }
}

/** Phase reached for the current generation (the status was written for this spec). */
export function inPhase(phase: string): (cs: CocoonSet) => boolean {
  return (cs) =>
    cs.status?.phase === phase && cs.status.observedGeneration === cs.metadata.generation;
}

/** The set's pods (labelled with its name), by name. */
export async function podsOf(stack: Stack, cs: CocoonSet): Promise<Pod[]> {
  const list = await stack.admin.list(Pods, {
    namespace: cs.metadata.namespace,
    labelSelector: { [LABEL_COCOON_SET]: cs.metadata.name ?? "" },
  });
  return list.items.sort((a, b) => (a.metadata.name ?? "").localeCompare(b.metadata.name ?? ""));
}

/** The live (not terminating) pods of the set, by name. */
export async function livePodsOf(stack: Stack, cs: CocoonSet): Promise<Map<string, Pod>> {
  const pods = await podsOf(stack, cs);
  return new Map(
    pods.filter((p) => !p.metadata.deletionTimestamp).map((p) => [p.metadata.name ?? "", p]),
  );
}

/** Polls a pod until ok holds; returns it. */
export async function waitPod(
  stack: Stack,
  namespace: string,
  name: string,
  what: string,
  ok: (p: Pod) => boolean,
  timeoutMs = CONVERGE_MS,
): Promise<Pod> {
  return await waitUntil(async () => {
    const pod = await stack.admin.get(Pods, namespace, name).catch((err) => {
      if (isNotFound(err)) return undefined;
      throw err;
    });
    return pod && ok(pod) ? pod : undefined;
  }, { what: `${namespace}/${name} ${what}`, timeoutMs, intervalMs: 100 });
}

/** Waits until reading the object answers NotFound. */
export async function waitGone(
  what: string,
  read: () => Promise<unknown>,
  timeoutMs = CONVERGE_MS,
): Promise<void> {
  await waitUntil(async () => {
    try {
      await read();
      return false;
    } catch (err) {
      if (isNotFound(err)) return true;
      throw err;
    }
  }, { what: `${what} gone`, timeoutMs, intervalMs: 100 });
}

/** Events about obj with the given reason (each aggregated Event once). */
export async function eventsWith(
  stack: Stack,
  obj: KubeObject,
  reason: string,
): Promise<CoreEvent[]> {
  return (await stack.events(obj)).filter((e) => e.reason === reason);
}

/** Waits for an Event about obj with this reason (and a message matching, if given). */
export async function waitEvent(
  stack: Stack,
  obj: KubeObject,
  reason: string,
  message?: RegExp,
  timeoutMs = CONVERGE_MS,
): Promise<CoreEvent> {
  return await waitUntil(async () => {
    const events = await eventsWith(stack, obj, reason);
    return events.find((e) => message === undefined || message.test(e.message ?? ""));
  }, { what: `${reason} Event on ${obj.metadata.name}`, timeoutMs, intervalMs: 100 });
}

/** How often an Event with reason was recorded about obj (aggregated counts added up). */
export async function eventCount(stack: Stack, obj: KubeObject, reason: string): Promise<number> {
  return (await eventsWith(stack, obj, reason)).reduce((n, e) => n + (e.count ?? 1), 0);
}

/** Waits until the metric (summed over live replicas) satisfies ok; returns its value. */
export async function waitMetric(
  stack: Stack,
  name: string,
  labels: Record<string, string>,
  ok: (v: number) => boolean,
  timeoutMs = CONVERGE_MS,
): Promise<number> {
  return await waitUntil(async () => {
    const v = await stack.metric(name, labels);
    return ok(v) ? v : undefined;
  }, { what: `${name}${JSON.stringify(labels)}`, timeoutMs, intervalMs: 200 });
}
