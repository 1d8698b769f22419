/**
 * Watches: owned pods pass only on changes the reconciler acts on (vk-cocoon rewrites pod status
 * often); a deleted CocoonHibernation wakes the set of its pod; a node's arrival, departure or
 * relabelling wakes the sets whose spec.nodeName names it, found through a cache index.
 */
import {
  type CompletePredicate,
  funcs,
  jsonEqual,
  labelChanged,
  type Node,
  type Pod,
  type Request,
} from "../kube/mod.ts";
import type { CocoonSet } from "../common/apis/v1/cocoonset_types.ts";
import type { CocoonHibernation } from "../common/apis/v1/mod.ts";
import { cocoonSetOwnerName, isPodReady } from "../common/meta/mod.ts";

/**
 * Passes creates, deletes, and updates that start a deletion, change the phase, readiness,
 * labels or annotations, or flip Unschedulable (so a released-seat wake sees missing capacity
 * at once, not at its next poll).
 */
export function podRelevantChange(): CompletePredicate<Pod> {
  return funcs<Pod>({
    generic: () => false,
    update: (oldPod, newPod) =>
      (!oldPod.metadata.deletionTimestamp && !!newPod.metadata.deletionTimestamp) ||
      oldPod.status?.phase !== newPod.status?.phase ||
      isPodReady(oldPod) !== isPodReady(newPod) ||
      !jsonEqual(oldPod.metadata.labels ?? {}, newPod.metadata.labels ?? {}) ||
      !jsonEqual(oldPod.metadata.annotations ?? {}, newPod.metadata.annotations ?? {}) ||
      isUnschedulable(oldPod) !== isUnschedulable(newPod),
  });
}

/** Whether the scheduler reports the pod as Unschedulable (PodScheduled=False). */
export function isUnschedulable(pod: Pod): boolean {
  return unschedulableCondition(pod) !== undefined;
}

/** The scheduler's message when the pod is Unschedulable, else "". */
export function unschedulableMessage(pod: Pod): string {
  return unschedulableCondition(pod)?.message ?? "";
}

function unschedulableCondition(pod: Pod) {
  return pod.status?.conditions?.find((c) =>
    c.type === "PodScheduled" && c.status === "False" && c.reason === "Unschedulable"
  );
}

/**
 * The set whose pod a deleted CocoonHibernation targeted: only a pass of that set clears the ask
 * the request leaves, and a set at rest has no requeue of its own.
 */
export function setOfRequestTarget(
  storedPod: (namespace: string, name: string) => Pod | undefined,
  hib: CocoonHibernation,
): Request[] {
  const namespace = hib.metadata.namespace ?? "";
  const pod = storedPod(namespace, hib.spec?.podRef?.name ?? "");
  const owner = cocoonSetOwnerName(pod?.metadata.ownerReferences);
  return owner === "" ? [] : [{ namespace, name: owner }];
}

/** Only a request's deletion concerns the set; its own flow handles every other change. */
export function requestDeleted(): CompletePredicate<CocoonHibernation> {
  return funcs({ create: () => false, update: () => false, generic: () => false });
}

/** Cache index of CocoonSets by the node spec.nodeName pins their main to. */
export const NODE_NAME_INDEX = "spec.nodeName";

/** The index values of a set: its spec.nodeName, none when unpinned. */
export function nodeNameIndexValues(cs: CocoonSet): string[] {
  return cs.spec?.nodeName ? [cs.spec.nodeName] : [];
}

/** Requests for every CocoonSet whose spec.nodeName names node, found by lookup (byIndex). */
export function setsTargetingNode(
  lookup: (index: string, value: string) => CocoonSet[],
  node: Node,
): Request[] {
  return lookup(NODE_NAME_INDEX, node.metadata.name ?? "").map((cs) => ({
    namespace: cs.metadata.namespace ?? "",
    name: cs.metadata.name ?? "",
  }));
}

/** Node events that can change whether a node fits a set: create, delete, label changes. */
export function nodePlacementEvents(): CompletePredicate<Node> {
  return { ...labelChanged<Node>(), generic: () => false };
}
