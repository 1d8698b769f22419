/**
 * What every step works with (HibernationDeps, built once by the reconciler), the timers, and
 * the request's status: the Ready condition each phase implies, the phase clock the deadlines
 * run on, and the one way a phase is written and announced (docs/hibernation.md, "Status",
 * "Timers", "Events", "Metrics").
 *
 * A phase write carries the resourceVersion it was computed from, and its Event and histogram
 * observation follow only a successful write: a pass working from a lagging copy gets a 409
 * instead of announcing a transition twice.
 *
 * @module
 */
import {
  type CocoonHibernation,
  type CocoonHibernationPhase,
  CocoonHibernations,
  type CocoonHibernationStatus,
  REASON_HIBERNATION_DONE,
  REASON_HIBERNATION_FAILED,
  REASON_HIBERNATION_PENDING,
} from "../common/apis/v1/mod.ts";
import {
  type Condition,
  CONDITION_FALSE,
  CONDITION_TRUE,
  CONDITION_TYPE_READY,
  findStatusCondition,
  formatConditionTime,
  newReadyCondition,
  setStatusCondition,
} from "../common/k8s/condition.ts";
import { sameJson } from "../common/k8s/same_json.ts";
import { parseRfc3339, patchStatus } from "../kube/mod.ts";
import type { Client, Clock, EventRecorder, EventType, Pod, Reader } from "../kube/mod.ts";
import { hibernatePhaseDurationSeconds, wakePhaseDurationSeconds } from "../metrics/metrics.ts";
import type { Registry } from "../snapshot/registry.ts";
import type { GateDeps } from "../snapshotgate/mod.ts";
import type { StripedLock } from "./vm_lock.ts";

/** What every step of a pass works with. */
export interface HibernationDeps {
  /** Cached reads and API writes (the manager's client). */
  client: Client;
  /** Uncached reads: target pods outside the pod cache, and the moments that need fresh state. */
  apiReader: Reader;
  registry: Registry;
  recorder: EventRecorder;
  clock: Clock;
  /** The snapshot gate's sources: apiReader, the cache's VM-name index, the registry. */
  gate: GateDeps;
  /** Passes that reach one VM take turns on its stripe. */
  locks: StripedLock;
}

/** One reconcile pass over one request. */
export interface Pass {
  deps: HibernationDeps;
  hib: CocoonHibernation;
  signal: AbortSignal;
}

/** A pass whose target pod and VM are known, under that VM's lock. */
export interface TargetPass extends Pass {
  pod: Pod;
  vmName: string;
}

/** How often a request that waits on something is looked at again. */
export const REQUEUE_INTERVAL_MS = 5_000;
/** How long Hibernating may last before the request fails. */
export const HIBERNATE_TIMEOUT_MS = 3 * 60_000;
/** How long Waking may last before the request fails. */
export const WAKE_TIMEOUT_MS = 5 * 60_000;

// Event reasons (docs/hibernation.md, "Events"): API, never renamed.
export const REASON_HIBERNATED = "Hibernated";
export const REASON_WOKEN_ACTIVE = "WokenActive";
export const REASON_HIBERNATE_TIMED_OUT = "HibernateTimedOut";
export const REASON_WAKE_TIMED_OUT = "WakeTimedOut";
export const REASON_RETRY_REQUESTED = "RetryRequested";
/** Also the Ready reason of a request refused for an opposing one. */
export const REASON_HIBERNATION_CONFLICT = "Conflict";
export const REASON_VM_NAME_REFUSED = "VMNameRefused";

/** Records an Event on the pass's request. */
export function recordEvent(pass: Pass, type: EventType, reason: string, message: string): void {
  const object = { object: pass.hib, resource: CocoonHibernations };
  pass.deps.recorder.event(object, type, reason, message);
}

/** Whether a phase runs against a deadline (and so restarts its clock on entry). */
export function hasPhaseDeadline(phase: string | undefined): boolean {
  return phase === "Hibernating" || phase === "Waking";
}

/** When the current phase was entered (Ready.lastTransitionTime, epoch ms), if known. */
export function phaseEnteredAt(hib: CocoonHibernation): number | undefined {
  const ready = findStatusCondition(hib.status?.conditions, CONDITION_TYPE_READY);
  return parseRfc3339(ready?.lastTransitionTime);
}

/** Whether hib has been in phase for longer than timeoutMs at nowMs. */
export function phaseDeadlineExceeded(
  hib: CocoonHibernation,
  phase: CocoonHibernationPhase,
  timeoutMs: number,
  nowMs: number,
): boolean {
  if (hib.status?.phase !== phase) return false;
  const entered = phaseEnteredAt(hib);
  return entered !== undefined && nowMs - entered > timeoutMs;
}

/** A duration as Go prints whole seconds ("3m0s", "45s"), as the messages quote them. */
export function goDuration(ms: number): string {
  const total = Math.floor(ms / 1000);
  const h = Math.floor(total / 3600);
  const m = Math.floor((total % 3600) / 60);
  const s = total % 60;
  if (h > 0) return `${h}h${m}m${s}s`;
  if (m > 0) return `${m}m${s}s`;
  return `${s}s`;
}

/**
 * The Ready condition a phase implies: True/`Done` for Hibernated and Active, False/`Failed` for
 * Failed, False/`Pending` otherwise. The empty timestamp keeps the stored one when Ready does
 * not flip.
 */
export function readyCondition(
  phase: CocoonHibernationPhase,
  generation: number,
  override: { reason?: string; message?: string } = {},
): Condition {
  const done = phase === "Hibernated" || phase === "Active";
  const failed = phase === "Failed" ? REASON_HIBERNATION_FAILED : REASON_HIBERNATION_PENDING;
  const reason = override.reason ?? (done ? REASON_HIBERNATION_DONE : failed);
  const status = done ? CONDITION_TRUE : CONDITION_FALSE;
  return newReadyCondition(generation, status, reason, override.message ?? phase);
}

/** What a pass wants the status to say; an absent vmName keeps the stored one. */
export interface PhaseChange {
  phase: CocoonHibernationPhase;
  vmName?: string;
  reason?: string;
  message?: string;
}

/**
 * The status after change at nowMs. Entering Hibernating or Waking from another phase restarts
 * the phase clock even when Ready stays False, so a retry after Failed gets its full budget.
 */
export function nextStatus(
  hib: CocoonHibernation,
  change: PhaseChange,
  nowMs: number,
): CocoonHibernationStatus {
  const current = hib.status ?? {};
  const generation = hib.metadata.generation ?? 0;
  const conditions = structuredClone(current.conditions ?? []);
  const now = () => new Date(nowMs);
  setStatusCondition(conditions, readyCondition(change.phase, generation, change), now);
  if (hasPhaseDeadline(change.phase) && current.phase !== change.phase) {
    const ready = findStatusCondition(conditions, CONDITION_TYPE_READY)!;
    ready.lastTransitionTime = formatConditionTime(now());
  }
  const next: CocoonHibernationStatus = {
    ...structuredClone(current),
    observedGeneration: generation,
    phase: change.phase,
    conditions,
  };
  if (change.vmName !== undefined) next.vmName = change.vmName;
  return next;
}

/** The phase a written status left, and when it had been entered. */
interface LeftPhase {
  phase: string | undefined;
  enteredAtMs: number | undefined;
}

/** Patches the status to change; what was left, or undefined when nothing changed. */
async function writePhase(pass: Pass, change: PhaseChange): Promise<LeftPhase | undefined> {
  const { deps, hib, signal } = pass;
  const next = nextStatus(hib, change, deps.clock.now());
  if (sameJson(hib.status ?? {}, next)) return undefined;
  const left = { phase: hib.status?.phase, enteredAtMs: phaseEnteredAt(hib) };
  await patchStatus(deps.client, CocoonHibernations, hib, (h) => {
    h.status = next;
  }, { optimisticLock: true, signal });
  return left;
}

/** Observes the seconds spent in phase when left is that phase with a known clock. */
function observePhaseExit(pass: Pass, left: LeftPhase, phase: string, result: string): void {
  if (left.phase !== phase || left.enteredAtMs === undefined) return;
  const seconds = Math.max(0, (pass.deps.clock.now() - left.enteredAtMs) / 1000);
  const histogram = phase === "Hibernating"
    ? hibernatePhaseDurationSeconds
    : wakePhaseDurationSeconds;
  histogram.observe({ result }, seconds);
}

/**
 * Moves the request to phase on vmName. Leaving Failed announces `RetryRequested`; reaching
 * Hibernated or Active announces it, with the time spent Hibernating or Waking. A rewrite within
 * one phase announces nothing.
 */
export async function enterPhase(
  pass: Pass,
  phase: "Hibernating" | "Hibernated" | "Waking" | "Active",
  vmName: string,
): Promise<void> {
  const left = await writePhase(pass, { phase, vmName });
  if (!left || left.phase === phase) return;
  if (left.phase === "Failed") {
    const desire = phase === "Hibernating" || phase === "Hibernated" ? "Hibernate" : "Wake";
    recordEvent(pass, "Normal", REASON_RETRY_REQUESTED, `retrying ${desire} after prior failure`);
  }
  if (phase === "Hibernated") {
    observePhaseExit(pass, left, "Hibernating", "ok");
    const message = `snapshot ${vmName} pushed to the registry`;
    recordEvent(pass, "Normal", REASON_HIBERNATED, message);
  } else if (phase === "Active") {
    observePhaseExit(pass, left, "Waking", "ok");
    const { hib } = pass;
    const message = `pod ${hib.metadata.namespace}/${hib.spec.podRef.name} is running`;
    recordEvent(pass, "Normal", REASON_WOKEN_ACTIVE, message);
  }
}

/** Fails a request whose Hibernating (Waking) deadline passed, with a Warning and a histogram. */
export async function timeOut(
  pass: Pass,
  phase: "Hibernating" | "Waking",
  vmName: string,
): Promise<void> {
  const hibernating = phase === "Hibernating";
  const limit = goDuration(hibernating ? HIBERNATE_TIMEOUT_MS : WAKE_TIMEOUT_MS);
  const message = hibernating
    ? `hibernate not confirmed within ${limit}`
    : `wake timed out after ${limit}; vk-cocoon never reported the container running`;
  const left = await writePhase(pass, { phase: "Failed", message });
  if (!left) return;
  observePhaseExit(pass, left, phase, "timeout");
  if (hibernating) {
    const warning = `snapshot ${vmName} not confirmed in the registry within ${limit}`;
    recordEvent(pass, "Warning", REASON_HIBERNATE_TIMED_OUT, warning);
  } else {
    const warning = `vk-cocoon did not report the container running within ${limit}`;
    recordEvent(pass, "Warning", REASON_WAKE_TIMED_OUT, warning);
  }
}

/** Fails the request with message (and reason, default Failed's); true when written. */
export async function fail(pass: Pass, message: string, reason?: string): Promise<boolean> {
  return await writePhase(pass, { phase: "Failed", message, reason }) !== undefined;
}

/**
 * Parks the request on Pending while its pod (or the pod's VM name) is missing. Hibernated and
 * Waking are kept: they tell the CocoonSet to restore the VM from its snapshot when it recreates
 * the pod, and dropping them would let the pod boot fresh.
 */
export async function pending(pass: Pass, message: string): Promise<void> {
  const phase = pass.hib.status?.phase;
  if (phase === "Hibernated" || phase === "Waking") return;
  await writePhase(pass, { phase: "Pending", message });
}
