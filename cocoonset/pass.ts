/**
 * What one reconcile pass of a CocoonSet works with (SetPass), and the one contract of its steps
 * (Step): every file of this folder reads as a function of "this pass".
 */
import { getLogger, type Logger } from "@logtape/logtape";
import {
  type Client,
  type Clock,
  type EventRecorder,
  type EventType,
  ignoreNotFound,
  isNotFound,
  type KubeObject,
  type Pod,
  Pods,
  type Reader,
  type ResourceType,
  type Result,
  wrapError,
} from "../kube/mod.ts";
import type { CocoonSet, CocoonSetStatus } from "../common/apis/v1/cocoonset_types.ts";
import type { CONDITION_TYPE_PROGRESSING } from "../common/apis/v1/conditions.ts";
import type { CocoonSetPhase } from "../common/apis/v1/enums.ts";
import { CocoonSets } from "../common/apis/v1/resources.ts";
import type { CONDITION_TYPE_READY } from "../common/k8s/condition.ts";
import type { Registry } from "../snapshot/registry.ts";
import type { ClaimSources, VMNameIndex } from "../snapshotgate/mod.ts";
import type { ClassifiedPods } from "./pods.ts";

/** The reconciler's collaborators, and what it remembers between passes (by CocoonSet UID). */
export interface CocoonSetDeps {
  /** Cached reads, API writes. */
  client: Client;
  /** Uncached reads, for the moments a stale cache would mislead. */
  apiReader: Reader;
  /** Where the snapshot gate and the name checks find every namespace's users of a VM name. */
  vmNameIndex: VMNameIndex;
  registry?: Registry;
  recorder: EventRecorder;
  clock: Clock;
  limits: SetLimits;
  /** The last generation checked (validate.ts): the parts it refused, none when it passed. */
  specChecks: Map<string, { generation: number; refused: string[] }>;
  /** Pod shapes the server accepted, shared by sets with one spec (validate.ts shapeKey). */
  verifiedShapes: Set<string>;
  /** Shape key → whether the dry-run in flight for it was accepted, shared by the workers. */
  dryRunsInFlight: Map<string, Promise<boolean>>;
  /** The pods this process deleted tearing a set down: one DELETE each, cache lag or not. */
  teardownDeletes: Map<string, Set<string>>;
  /** The status this process last wrote (kube updateStatusLocked). */
  writtenStatuses: Map<string, CocoonSetStatus>;
  /** "set UID vm:tag" → the last SnapshotDeleteDeferred Warning, to rate-limit it (tag_gate.ts). */
  deferredDropEvents: Map<string, { message: string; atMs: number }>;
  /** Whether the operator's role lets it read nodes now (nodes.ts). */
  nodeChecks: () => boolean;
}

/**
 * Per-set bounds (validate.ts overLimit): a status lists every pod in one etcd object and every
 * pass walks the pods, so one huge set would stall the process for every tenant.
 */
export interface SetLimits {
  /** Largest `spec.agent.replicas` acted on (the main is not counted). */
  maxReplicas: number;
  maxToolboxes: number;
}

/**
 * How often a pass that waits on vk-cocoon, the scheduler or a terminating pod looks again (ms):
 * a main not Ready, a suspend, a wake, a migration, a teardown.
 */
export const POLL_MS = 5_000;

/**
 * What a step decides: go on, or stop the pass with when to look again, the phase the status is
 * written with ("" derives it; none: no status write) and the error the pass then fails with. A
 * stop with an `effect` writes its phase first; the effect runs only once that write succeeded.
 */
export type Step =
  | { stop: false }
  | { stop: true; result: Result; phase?: CocoonSetPhase | ""; error?: Error }
  | { stop: true; phase: CocoonSetPhase; effect: () => Promise<Stop> };

/** A step's decision to end the pass. */
export type Stop = Exclude<Step, { stop: false }>;

/** The pass goes on. */
export const GO_ON: Step = { stop: false };

/** Ends the pass with result; the status is written when phase is given, then error is thrown. */
export function stop(result: Result, phase?: CocoonSetPhase | "", error?: Error): Stop {
  return { stop: true, result, phase, error };
}

/** Ends the pass: the status with phase is stored first, and only then effect runs. */
export function afterStatus(phase: CocoonSetPhase, effect: () => Promise<Stop>): Stop {
  return { stop: true, phase, effect };
}

/** Something that keeps the set from converging: the condition it turns False, and why. */
export interface StatusProblem {
  condition: typeof CONDITION_TYPE_READY | typeof CONDITION_TYPE_PROGRESSING;
  reason: string;
  message: string;
}

/** Which parts of the spec no pod can be built from: "<what>: <server message>" per part. */
export interface SpecVerdict {
  main?: string;
  subAgents?: string;
  /** Toolbox name → its problem. */
  toolboxes: Map<string, string>;
}

/** One reconcile pass. */
export interface SetPass {
  deps: CocoonSetDeps;
  /** As read at the start of the pass, refreshed in place by its own writes. */
  cs: CocoonSet;
  classified: ClassifiedPods;
  signal: AbortSignal;
  /** The namespace's pods that restore from a snapshot when recreated (restore.ts), read once. */
  restorable?: Promise<ReadonlySet<string>>;
  log: Logger;
  problems: StatusProblem[];
  /** The dry-run verdict, once a step needed it; mainChecked: the main's shape was part of it. */
  specCheck?: { verdict: SpecVerdict; mainChecked: boolean };
}

const baseLog = getLogger(["cocoon-operator", "cocoonset"]);

/** A logger that names the CocoonSet on every line. */
export function logFor(cs: CocoonSet): Logger {
  return baseLog.with({ namespace: cs.metadata.namespace, cocoonset: cs.metadata.name });
}

/** Where the snapshot gate and the name checks read: the index, and past the cache. */
export function claimSources(pass: SetPass): ClaimSources {
  return { reader: pass.deps.apiReader, index: pass.deps.vmNameIndex };
}

/** The labels of the set's metric series. */
export function setLabels(cs: CocoonSet): { namespace: string; cocoonset: string } {
  return { namespace: cs.metadata.namespace ?? "", cocoonset: cs.metadata.name ?? "" };
}

/** Records an Event on the pass's CocoonSet. */
export function emit(pass: SetPass, type: EventType, reason: string, message: string): void {
  pass.deps.recorder.event({ object: pass.cs, resource: CocoonSets }, type, reason, message);
}

/** "namespace/name" of a pod, for messages. */
export function podRef(pod: { metadata: { namespace?: string; name?: string } }): string {
  return `${pod.metadata.namespace ?? ""}/${pod.metadata.name ?? ""}`;
}

/** Awaits p; a failure is rethrown naming what was being done. */
export async function doing<T>(what: string, p: Promise<T>): Promise<T> {
  try {
    return await p;
  } catch (err) {
    throw wrapError(what, err);
  }
}

/** obj as stored (read past the cache unless reader says otherwise); undefined when it is gone. */
export async function readStored<T extends KubeObject>(
  pass: SetPass,
  rt: ResourceType<T>,
  obj: { metadata: { namespace?: string; name?: string } },
  what: string,
  reader: Reader = pass.deps.apiReader,
): Promise<T | undefined> {
  const { namespace = "", name = "" } = obj.metadata;
  const get = reader.get(rt, namespace, name, { signal: pass.signal }).catch(ignoreNotFound);
  return await doing(`${what} ${namespace}/${name}`, get);
}

/** The stored copy of pod, past the cache; undefined when it is gone or replaced by another. */
export async function readSamePod(pass: SetPass, pod: Pod, what: string): Promise<Pod | undefined> {
  const stored = await readStored(pass, Pods, pod, what);
  return stored?.metadata.uid === pod.metadata.uid ? stored : undefined;
}

/** Deletes an owned pod; whether a delete was issued (a pod already gone is fine). */
export async function deletePod(pass: SetPass, pod: Pod, what: string): Promise<boolean> {
  const { namespace = "", name = "" } = pod.metadata;
  try {
    await pass.deps.client.delete(Pods, namespace, name, { signal: pass.signal });
    return true;
  } catch (err) {
    if (isNotFound(err)) return false;
    throw wrapError(`delete ${what} ${podRef(pod)}`, err);
  }
}
