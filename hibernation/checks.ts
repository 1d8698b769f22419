/**
 * The checks before a pass acts (docs/hibernation.md, "One pass", steps 3 to 5): the spec, the
 * target pod and its VM name, tenancy, opposing requests. Each only reads and returns a problem.
 *
 * @module
 */
import {
  type CocoonHibernation,
  CocoonHibernations,
  type HibernationDesire,
  isValidHibernationDesire,
} from "../common/apis/v1/mod.ts";
import { compareCreation } from "../common/meta/creation_order.ts";
import { ANNOTATION_VM_NAME } from "../common/meta/keys.ts";
import { parseVMSpec } from "../common/meta/vmspec.ts";
import { isNotFound, Pods, wrapError } from "../kube/mod.ts";
import type { Pod } from "../kube/mod.ts";
import { actingRefusal, type Actor } from "../snapshotgate/mod.ts";
import type { Pass, TargetPass } from "./status.ts";

/** Why a pass stops before the hibernate or wake step; the reconciler records it. */
export interface RequestProblem {
  problem: "invalid-spec" | "target-missing" | "name-refused" | "opposing" | "yielded";
  message: string;
}

const MAX_POD_NAME_LENGTH = 253;
const DNS1123_SUBDOMAIN = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;
/** The CRD does not bound podRef.name, and a Ready message is capped: quote its start only. */
const MAX_QUOTED = 80;

function quoteStart(name: string): string {
  return name.length > MAX_QUOTED
    ? `${JSON.stringify(name.slice(0, MAX_QUOTED))}… (${name.length} characters)`
    : JSON.stringify(name);
}

/** Why name cannot be a pod's name (a DNS-1123 subdomain), or undefined when it can. */
export function podNameProblem(name: string): string | undefined {
  if (name.length > MAX_POD_NAME_LENGTH) {
    return `must be no more than ${MAX_POD_NAME_LENGTH} characters`;
  }
  if (!DNS1123_SUBDOMAIN.test(name)) {
    return "a pod name must consist of lower case alphanumeric characters, '-' or '.', and " +
      "must start and end with an alphanumeric character";
  }
  return undefined;
}

/**
 * Why hib's spec can never be acted on (a missing or invalid podRef, an unknown desire), or
 * undefined: waiting for such a pod would read as "not yet present" forever.
 */
export function specProblem(hib: CocoonHibernation): string | undefined {
  const podName = hib.spec?.podRef?.name ?? "";
  if (podName === "") return "spec.podRef.name is required";
  const bad = podNameProblem(podName);
  if (bad) return `spec.podRef.name ${quoteStart(podName)} is not a valid pod name: ${bad}`;
  const desire: unknown = hib.spec?.desire;
  if (!isValidHibernationDesire(desire)) return `unknown desire ${JSON.stringify(desire ?? "")}`;
  return undefined;
}

/**
 * The request's target pod from the cache, else from the API server (the pod cache holds only
 * CocoonSet pods, a request may target any); undefined when it does not exist.
 */
export async function readTargetPod(pass: Pass): Promise<Pod | undefined> {
  const { deps, hib, signal } = pass;
  const namespace = hib.metadata.namespace ?? "";
  const name = hib.spec.podRef.name;
  for (const reader of [deps.client, deps.apiReader]) {
    try {
      return await reader.get(Pods, namespace, name, { signal });
    } catch (err) {
      if (!isNotFound(err)) throw wrapError(`get target pod ${namespace}/${name}`, err);
    }
  }
  return undefined;
}

/**
 * Every request of the pass's namespace, from the cache and read only: the cache's own objects,
 * not a copy of each per pass.
 */
export async function namespaceRequests(pass: Pass): Promise<readonly CocoonHibernation[]> {
  const namespace = pass.hib.metadata.namespace ?? "";
  const list = await pass.deps.client.list(CocoonHibernations, {
    namespace,
    signal: pass.signal,
    unsafeDisableDeepCopy: true,
  });
  return list.items;
}

/** The target pod as stored, past the cache, while it is the same pod (uid). */
export async function readStoredPod(pass: TargetPass): Promise<Pod | undefined> {
  const { pod } = pass;
  const namespace = pod.metadata.namespace ?? "";
  const name = pod.metadata.name ?? "";
  try {
    const stored = await pass.deps.apiReader.get(Pods, namespace, name, { signal: pass.signal });
    return stored.metadata.uid === pod.metadata.uid ? stored : undefined;
  } catch (err) {
    if (isNotFound(err)) return undefined;
    throw wrapError(`read stored pod ${namespace}/${name}`, err);
  }
}

/** The target pod and the VM name vk-cocoon gave it, or the problem that one is missing. */
export async function findTarget(
  pass: Pass,
): Promise<{ pod: Pod; vmName: string } | RequestProblem> {
  const pod = await readTargetPod(pass);
  const target = `pod ${pass.hib.metadata.namespace ?? ""}/${pass.hib.spec.podRef.name}`;
  if (!pod) return { problem: "target-missing", message: `${target} not yet present` };
  const vmName = parseVMSpec(pod).vmName;
  if (!vmName) {
    const message = `${target} has no ${ANNOTATION_VM_NAME} annotation yet`;
    return { problem: "target-missing", message };
  }
  return { pod, vmName };
}

/** The gate's actor for a request: its namespace, name and target pod. */
export function requestActor(hib: CocoonHibernation): Actor {
  return {
    kind: "CocoonHibernation",
    namespace: hib.metadata.namespace ?? "",
    name: hib.metadata.name ?? "",
    uid: hib.metadata.uid,
    podName: hib.spec?.podRef?.name ?? "",
  };
}

/**
 * The refusal of the request acting under vmName: only `vk-<ns>-<podRef.name>`, and no name
 * another namespace derives too (the gate's actingRefusal). `decision`: the first action under
 * vmName, checked past the cache.
 */
export async function tenancyProblem(
  pass: Pass,
  vmName: string,
  decision: boolean,
): Promise<RequestProblem | undefined> {
  const actor = requestActor(pass.hib);
  const refusal = await actingRefusal(pass.deps.gate, actor, vmName, decision, pass.signal);
  return refusal ? { problem: "name-refused", message: refusal.message } : undefined;
}

/**
 * The way hib's passes move its VM: its desire, except that a reversed desire first finishes
 * the transition in flight, since the previous round's tag and lifecycle annotations would
 * otherwise read as the new round's completion.
 */
export function direction(hib: CocoonHibernation): HibernationDesire {
  const phase = hib.status?.phase;
  const hibernate = hib.spec.desire === "Hibernate" ? phase !== "Waking" : phase === "Hibernating";
  return hibernate ? "Hibernate" : "Wake";
}

/**
 * The problem of an earlier request driving the VM the other way. Among the live requests with a
 * valid desire that reach the VM (hib's pod, or the recorded vmName), the earliest by the
 * operator's creation order sets the direction; a request going against it waits.
 */
export function opposingProblem(
  hib: CocoonHibernation,
  namespaceRequests: readonly CocoonHibernation[],
  vmName: string,
): RequestProblem | undefined {
  const podName = hib.spec.podRef.name;
  const contenders = namespaceRequests.filter((o) =>
    o.metadata.uid !== hib.metadata.uid && !o.metadata.deletionTimestamp &&
    isValidHibernationDesire(o.spec?.desire) &&
    (o.spec?.podRef?.name === podName || (o.status?.vmName ?? "") === vmName)
  );
  const earlier = [hib, ...contenders].sort((a, b) => compareCreation(a.metadata, b.metadata))[0];
  const way = direction(earlier);
  if (earlier === hib || way === direction(hib)) return undefined;
  const first = `CocoonHibernation ${earlier.metadata.name} was created first`;
  const message = way === earlier.spec.desire
    ? `${first} and asks to ${way} VM ${vmName}; this request to ${hib.spec.desire} waits until ` +
      `that one is deleted or asks the same`
    : `${first} and is still finishing its ${way === "Wake" ? "wake" : "hibernation"} of VM ` +
      `${vmName} (it asks to ${earlier.spec.desire} next); this request to ${hib.spec.desire} ` +
      `waits until that one is done or deleted`;
  return { problem: "opposing", message };
}
