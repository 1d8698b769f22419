/** The hibernate request annotation and the two one-way marks that accompany hibernation. */
import type { Pod } from "../../kube/core.ts";
import { annotation, ensureAnnotations } from "./annotations.ts";
import {
  ANNOTATION_HIBERNATE,
  ANNOTATION_KEEP_SNAPSHOT_ON_DELETE,
  ANNOTATION_RESTORE_FROM_HIBERNATE,
  ANNOTATION_TRUE,
} from "./keys.ts";

/** true = "hibernate this VM". */
export type HibernateState = boolean;

/** Writes the state: true sets the annotation to "true", false removes it altogether. */
export function applyHibernateState(state: HibernateState, pod: Pod): void {
  if (!state) {
    delete pod.metadata.annotations?.[ANNOTATION_HIBERNATE];
    return;
  }
  ensureAnnotations(pod)[ANNOTATION_HIBERNATE] = ANNOTATION_TRUE;
}

/** Reads the state; only the exact value "true" counts. */
export function readHibernateState(pod: Pod): HibernateState {
  return annotation(pod, ANNOTATION_HIBERNATE) === ANNOTATION_TRUE;
}

/** Whether the pod must restore its VM from the :hibernate snapshot rather than the image. */
export function readRestoreFromHibernate(pod: Pod): boolean {
  return annotation(pod, ANNOTATION_RESTORE_FROM_HIBERNATE) === ANNOTATION_TRUE;
}

/** Marks the pod to restore its VM from the :hibernate snapshot rather than the image. */
export function markRestoreFromHibernate(pod: Pod): void {
  ensureAnnotations(pod)[ANNOTATION_RESTORE_FROM_HIBERNATE] = ANNOTATION_TRUE;
}

/** Whether the pod's deletion is a seat release (node-local snapshot kept). */
export function readKeepSnapshotOnDelete(pod: Pod): boolean {
  return annotation(pod, ANNOTATION_KEEP_SNAPSHOT_ON_DELETE) === ANNOTATION_TRUE;
}

/** Marks the pod's deletion as a seat release (node-local snapshot kept). */
export function markKeepSnapshotOnDelete(pod: Pod): void {
  ensureAnnotations(pod)[ANNOTATION_KEEP_SNAPSHOT_ON_DELETE] = ANNOTATION_TRUE;
}
