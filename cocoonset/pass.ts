/**
 * What one reconcile pass of a CocoonSet works with: the reconciler's collaborators, the
 * CocoonSet as read at the start of the pass (refreshed in place by its own writes), its
 * classified pods, the pass's abort signal and logger. Every step of the loop takes a SetPass, so
 * each file of this folder reads as a function of "this pass".
 */
import type { CONDITION_TYPE_PROGRESSING } from "../common/apis/v1/conditions.ts";
import type { CONDITION_TYPE_READY } from "../common/k8s/condition.ts";
import { getLogger, type Logger } from "@logtape/logtape";
import {
  type Client,
  type Clock,
  type EventRecorder,
  type EventType,
  isNotFound,
  type Pod,
  Pods,
  type Reader,
  type Result,
  wrapError,
} from "../kube/mod.ts";
import type { CocoonSet, CocoonSetStatus } from "../common/apis/v1/cocoonset_types.ts";
import type { CocoonSetPhase } from "../common/apis/v1/enums.ts";
import { CocoonSets } from "../common/apis/v1/resources.ts";
import type { Registry } from "../snapshot/registry.ts";
import type { ClaimSources, VMNameIndex } from "../snapshotgate/mod.ts";
import type { ClassifiedPods } from "./pods.ts";
import type { SetLimits } from "./limits.ts";

/** The reconciler's collaborators. */
export interface CocoonSetDeps {
  /** Cached reads, API writes (the manager's client). */
  client: Client;
  /** Uncached reads, for the few places where a stale cache would mislead. */
  apiReader: Reader;
  /**
   * The cache's VM-name index (snapshotgate/vm_index.ts): where the snapshot gate and the name
   * checks find the objects of every namespace that share a VM name.
   */
  vmNameIndex: VMNameIndex;
  /** The snapshot registry; absent only in tests of the paths that tolerate its absence. */
  registry?: Registry;
  recorder: EventRecorder;
  clock: Clock;
  /** Per-set bounds on sub-agents and toolboxes (limits.ts). */
  limits: SetLimits;
  /** CocoonSet UID → the generation whose pod shapes passed the dry-run check (validate.ts). */
  validGenerations: Map<string, number>;
  /**
   * Pod shapes (shape_key.ts) the API server accepted in a dry-run or a create, so sets with the
   * same spec share one check (validate.ts). Optional: a reconciler built without it shares none.
   */
  verifiedShapes?: Set<string>;
  /**
   * CocoonSet UID → UIDs of the pods this process deleted tearing it down (teardown.ts), so a cache
   * that has not shown a deletion yet never causes a second DELETE.
   */
  teardownDeletes: Map<string, Set<string>>;
  /**
   * CocoonSet UID → the status this process last wrote (status.ts), so a cached copy that has
   * not caught up with that write is noticed even when nothing differs from it.
   */
  writtenStatuses: Map<string, CocoonSetStatus>;
  /**
   * "set UID vm:tag" → when this process last emitted the Warning of a tag delete the gate
   * deferred, and its message (tag_gate.ts): one Event per requeue interval, not one per pass.
   */
  deferredDropEvents: Map<string, { message: string; atMs: number }>;
  /**
   * Whether the node checks run now (nodes.ts): false while the operator's role may not list
   * and watch nodes, and the set's spec.nodeName and pool are then taken as given.
   */
  nodeChecks: () => boolean;
}

/**
 * How often to look again while the main is not Ready, a wake's restore pod is being created or
 * a stale cache settles (ms).
 */
export const REQUEUE_WAIT_FOR_MAIN_MS = 5_000;

/**
 * What a step decides: go on with the pass, or stop it. A stop says when to look again, the phase
 * the status is written with ("" derives it; absent: no status write) and the error the pass then
 * fails with (retried with backoff). A stop with an `effect` stores its phase first and runs the
 * effect only once that status write succeeded: the effect depends on the phase being stored.
 */
export type Step =
  | { stop: false }
  | { stop: true; result: Result; phase?: CocoonSetPhase | ""; error?: Error }
  | { stop: true; phase: CocoonSetPhase; effect: () => Promise<Stop> };

/** A step's decision to end the pass. */
export type Stop = Exclude<Step, { stop: false }>;

/** The pass goes on. */
export const GO_ON: Step = { stop: false };

/** Ends the pass with result, writing the status when phase is given, then failing with error. */
export function stop(result: Result, phase?: CocoonSetPhase | "", error?: Error): Stop {
  return { stop: true, result, phase, error };
}

/** Ends the pass: the status with phase is written first, and only then effect runs. */
export function afterStatus(phase: CocoonSetPhase, effect: () => Promise<Stop>): Stop {
  return { stop: true, phase, effect };
}

/** Pod names that must restore when recreated; resolved at most once per pass. */
export type RestoreIntent = () => Promise<ReadonlySet<string>>;

/** Which parts of the spec no pod can be built from: "<what>: <server message>" per part. */
export interface SpecVerdict {
  main?: string;
  subAgents?: string;
  /** Toolbox name → its problem. */
  toolboxes: Map<string, string>;
}

/** What a pass learned about its spec (SetPass.specCheck). */
export interface SpecCheck {
  verdict: SpecVerdict;
  /** The main's shape was part of the check (not when the caller creates the main for real). */
  mainChecked: boolean;
}

/** One reconcile pass. */
export interface SetPass {
  deps: CocoonSetDeps;
  cs: CocoonSet;
  classified: ClassifiedPods;
  signal: AbortSignal;
  /** The namespace's pods that must restore from a snapshot when recreated (loaded lazily). */
  intent: RestoreIntent;
  log: Logger;
  /** What keeps the set from converging, for the status conditions written by this pass. */
  problems: StatusProblem[];
  /** The dry-run verdict on the spec's pod shapes, once this pass needed it (validate.ts). */
  specCheck?: SpecCheck;
}

const baseLog = getLogger(["cocoon-operator", "cocoonset"]);

/** A logger that names the CocoonSet on every line. */
export function logFor(cs: CocoonSet): Logger {
  return baseLog.with({ namespace: cs.metadata.namespace, cocoonset: cs.metadata.name });
}

/** Where the snapshot gate and the name checks of a pass read: the index, and past the cache. */
export function claimSources(pass: SetPass): ClaimSources {
  return { reader: pass.deps.apiReader, index: pass.deps.vmNameIndex };
}

/** Records an Event on the pass's CocoonSet. */
export function emit(pass: SetPass, type: EventType, reason: string, message: string): void {
  pass.deps.recorder.event({ object: pass.cs, resource: CocoonSets }, type, reason, message);
}

/** The pass's clock as a Date source (condition timestamps). */
export function nowOf(pass: SetPass): () => Date {
  return () => new Date(pass.deps.clock.now());
}

/** "namespace/name" of a pod, for messages. */
export function podRef(pod: { metadata: { namespace?: string; name?: string } }): string {
  return `${pod.metadata.namespace ?? ""}/${pod.metadata.name ?? ""}`;
}

/**
 * Reads a pod from the API server, past the cache (which may lag this process's own writes or
 * not hold the pod at all); undefined when it does not exist. The error names what was read.
 */
export async function readStoredPod(
  pass: SetPass,
  namespace: string,
  name: string,
  what: string,
): Promise<Pod | undefined> {
  try {
    return await pass.deps.apiReader.get(Pods, namespace, name, { signal: pass.signal });
  } catch (err) {
    if (isNotFound(err)) return undefined;
    throw wrapError(`${what} ${namespace}/${name}`, err);
  }
}

/**
 * Deletes an owned pod; a pod already gone is fine. Returns whether a delete was issued. The
 * error names what was deleted and why.
 */
export async function deletePod(pass: SetPass, pod: Pod, what: string): Promise<boolean> {
  try {
    await pass.deps.client.delete(Pods, pod.metadata.namespace ?? "", pod.metadata.name ?? "", {
      signal: pass.signal,
    });
    return true;
  } catch (err) {
    if (isNotFound(err)) return false;
    throw wrapError(`delete ${what} ${podRef(pod)}`, err);
  }
}

/**
 * Something that keeps the set from converging and that the status must say: the condition it
 * turns False, with a reason and a message naming the cause (InvalidSpec, NameConflict, a
 * failed main, a dead-lettered sub-agent).
 */
export interface StatusProblem {
  condition: typeof CONDITION_TYPE_READY | typeof CONDITION_TYPE_PROGRESSING;
  reason: string;
  message: string;
}
