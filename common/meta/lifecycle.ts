/**
 * The lifecycle contract vk-cocoon publishes on a pod: state, the CocoonSet generation it had
 * seen, and an optional message — plus the generation stamp the operator writes for it to echo.
 */
import type { Pod } from "../../kube/core.ts";
import { annotation, ensureAnnotations, parseGoInt } from "./annotations.ts";
import {
  ANNOTATION_COCOON_SET_GENERATION,
  ANNOTATION_LIFECYCLE_OBSERVED_GENERATION,
  ANNOTATION_LIFECYCLE_STATE,
  ANNOTATION_LIFECYCLE_STATE_MESSAGE,
} from "./keys.ts";

export const LIFECYCLE_STATE_CREATING = "creating";
export const LIFECYCLE_STATE_READY = "ready";
export const LIFECYCLE_STATE_HIBERNATING = "hibernating";
export const LIFECYCLE_STATE_HIBERNATED = "hibernated";
export const LIFECYCLE_STATE_FAILED = "failed";

/** Lifecycle states; values outside this set (including "") can appear on a pod. */
export type LifecycleState =
  | typeof LIFECYCLE_STATE_CREATING
  | typeof LIFECYCLE_STATE_READY
  | typeof LIFECYCLE_STATE_HIBERNATING
  | typeof LIFECYCLE_STATE_HIBERNATED
  | typeof LIFECYCLE_STATE_FAILED
  | (string & Record<never, never>);

const terminalStates: ReadonlySet<string> = new Set([
  LIFECYCLE_STATE_READY,
  LIFECYCLE_STATE_HIBERNATED,
  LIFECYCLE_STATE_FAILED,
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
    [ANNOTATION_LIFECYCLE_STATE]: s.state,
    [ANNOTATION_LIFECYCLE_OBSERVED_GENERATION]: String(s.observedGeneration),
    [ANNOTATION_LIFECYCLE_STATE_MESSAGE]: s.message === "" ? null : s.message,
  };
}

/**
 * Writes the triple onto the pod. An empty message removes the annotation so an old failure
 * reason does not linger into the next lifecycle.
 */
export function applyLifecycleStatus(s: LifecycleStatus, pod: Pod): void {
  const a = ensureAnnotations(pod);
  a[ANNOTATION_LIFECYCLE_STATE] = s.state;
  a[ANNOTATION_LIFECYCLE_OBSERVED_GENERATION] = String(s.observedGeneration);
  if (s.message === "") delete a[ANNOTATION_LIFECYCLE_STATE_MESSAGE];
  else a[ANNOTATION_LIFECYCLE_STATE_MESSAGE] = s.message;
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
    message: annotation(pod, ANNOTATION_LIFECYCLE_STATE_MESSAGE),
  };
}

/** The lifecycle state, "" when absent. */
export function readLifecycleState(pod: Pod): LifecycleState {
  return annotation(pod, ANNOTATION_LIFECYCLE_STATE);
}

/** The observed generation; absent or unparseable reads as 0. */
export function readLifecycleObservedGeneration(pod: Pod): number {
  return readInt64Annotation(pod, ANNOTATION_LIFECYCLE_OBSERVED_GENERATION);
}

/** The CocoonSet generation the operator stamped on the pod; absent or unparseable reads as 0. */
export function readCocoonSetGeneration(pod: Pod): number {
  return readInt64Annotation(pod, ANNOTATION_COCOON_SET_GENERATION);
}

/** Stamps the CocoonSet generation on the pod. */
export function stampCocoonSetGeneration(pod: Pod, generation: number): void {
  ensureAnnotations(pod)[ANNOTATION_COCOON_SET_GENERATION] = String(generation);
}

function readInt64Annotation(pod: Pod, key: string): number {
  const raw = annotation(pod, key);
  return raw === "" ? 0 : parseGoInt(raw, 64) ?? 0;
}
