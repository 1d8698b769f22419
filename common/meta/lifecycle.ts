/**
 * The lifecycle contract vk-cocoon publishes on a pod: state, the CocoonSet generation it had
 * seen, and an optional message — plus the generation stamp the operator writes for it to echo.
 */
import type { Pod } from "../../kube/core.ts";
import { annotation, ensureAnnotations, parseGoInt } from "./annotations.ts";
import {
  AnnotationCocoonSetGeneration,
  AnnotationLifecycleObservedGeneration,
  AnnotationLifecycleState,
  AnnotationLifecycleStateMessage,
} from "./keys.ts";

export const LifecycleStateCreating = "creating";
export const LifecycleStateReady = "ready";
export const LifecycleStateHibernating = "hibernating";
export const LifecycleStateHibernated = "hibernated";
export const LifecycleStateFailed = "failed";

/** Lifecycle states; values outside this set (including "") can appear on a pod. */
export type LifecycleState =
  | typeof LifecycleStateCreating
  | typeof LifecycleStateReady
  | typeof LifecycleStateHibernating
  | typeof LifecycleStateHibernated
  | typeof LifecycleStateFailed
  | (string & Record<never, never>);

const terminalStates: ReadonlySet<string> = new Set([
  LifecycleStateReady,
  LifecycleStateHibernated,
  LifecycleStateFailed,
]);

/** Whether a client waiting on the VM would stop waiting at this state. */
export function isTerminalLifecycleState(state: string): boolean {
  return terminalStates.has(state);
}

/** The (state, observed generation, message) triple. */
export interface LifecycleStatus {
  state: LifecycleState;
  observedGeneration: number;
  message: string;
}

/** The triple as a merge-patch annotation map; null (empty message) deletes the key. */
export function lifecycleAnnotations(s: LifecycleStatus): Record<string, string | null> {
  return {
    [AnnotationLifecycleState]: s.state,
    [AnnotationLifecycleObservedGeneration]: String(s.observedGeneration),
    [AnnotationLifecycleStateMessage]: s.message === "" ? null : s.message,
  };
}

/**
 * Writes the triple onto the pod. An empty message removes the annotation so an old failure
 * reason does not linger into the next lifecycle.
 */
export function applyLifecycleStatus(s: LifecycleStatus, pod: Pod): void {
  const a = ensureAnnotations(pod);
  a[AnnotationLifecycleState] = s.state;
  a[AnnotationLifecycleObservedGeneration] = String(s.observedGeneration);
  if (s.message === "") delete a[AnnotationLifecycleStateMessage];
  else a[AnnotationLifecycleStateMessage] = s.message;
}

/** A comparison key for the triple; NUL separators keep adjacent fields from colliding. */
export function lifecycleSnapshot(s: LifecycleStatus): string {
  return `${s.state}\x00${s.observedGeneration}\x00${s.message}`;
}

/** Reads the triple from the pod. */
export function readLifecycleStatus(pod: Pod): LifecycleStatus {
  return {
    state: readLifecycleState(pod),
    observedGeneration: readLifecycleObservedGeneration(pod),
    message: annotation(pod, AnnotationLifecycleStateMessage),
  };
}

/** The lifecycle state, "" when absent. */
export function readLifecycleState(pod: Pod): LifecycleState {
  return annotation(pod, AnnotationLifecycleState);
}

/** The observed generation; absent or unparseable reads as 0. */
export function readLifecycleObservedGeneration(pod: Pod): number {
  return readInt64Annotation(pod, AnnotationLifecycleObservedGeneration);
}

/** The CocoonSet generation the operator stamped on the pod; absent or unparseable reads as 0. */
export function readCocoonSetGeneration(pod: Pod): number {
  return readInt64Annotation(pod, AnnotationCocoonSetGeneration);
}

/** Stamps the CocoonSet generation on the pod. */
export function stampCocoonSetGeneration(pod: Pod, generation: number): void {
  ensureAnnotations(pod)[AnnotationCocoonSetGeneration] = String(generation);
}

function readInt64Annotation(pod: Pod, key: string): number {
  const raw = annotation(pod, key);
  return raw === "" ? 0 : parseGoInt(raw, 64) ?? 0;
}
