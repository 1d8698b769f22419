/**
 * Which owned-pod updates wake the CocoonSet reconciler. vk-cocoon rewrites pod status often
 * (condition heartbeats, container statuses); only changes the reconciler acts on pass.
 */
import { jsonEqual } from "../kube/mod.ts";
import type { CompletePredicate, Pod } from "../kube/mod.ts";
import { isPodReady } from "../common/meta/mod.ts";

/**
 * Passes creates and deletes, and updates that start a deletion, change the phase, flip
 * readiness, change labels or annotations — or flip whether the pod is Unschedulable (the
 * Go operator did not look at that, so a released-seat wake noticed missing capacity only at its
 * next 5 s poll). Generic events are dropped.
 */
export function podRelevantChange(): CompletePredicate<Pod> {
  return {
    create: () => true,
    delete: () => true,
    generic: () => false,
    update: (oldPod, newPod) =>
      (!oldPod.metadata.deletionTimestamp && !!newPod.metadata.deletionTimestamp) ||
      oldPod.status?.phase !== newPod.status?.phase ||
      isPodReady(oldPod) !== isPodReady(newPod) ||
      !jsonEqual(oldPod.metadata.labels ?? {}, newPod.metadata.labels ?? {}) ||
      !jsonEqual(oldPod.metadata.annotations ?? {}, newPod.metadata.annotations ?? {}) ||
      isUnschedulable(oldPod) !== isUnschedulable(newPod),
  };
}

/** Whether the scheduler reports the pod as Unschedulable (PodScheduled=False). */
export function isUnschedulable(pod: Pod): boolean {
  return unschedulableCondition(pod) !== undefined;
}

/**
 * The scheduler's message when the pod has PodScheduled=False with reason Unschedulable, else
 * "". A released-seat wake echoes it in its WakeNoCapacity Event.
 */
export function unschedulableMessage(pod: Pod): string {
  return unschedulableCondition(pod)?.message ?? "";
}

function unschedulableCondition(pod: Pod) {
  return pod.status?.conditions?.find((c) =>
    c.type === "PodScheduled" && c.status === "False" && c.reason === "Unschedulable"
  );
}
