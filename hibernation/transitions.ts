/**
 * Status writes of the CocoonHibernation reconciler, and what each transition announces: Events
 * on the CR and the phase-duration histograms.
 *
 * Every status write is a merge patch carrying the resourceVersion it was computed from. A pass
 * working from a cache copy that lags behind an earlier write of its own therefore gets a 409
 * Conflict (the reconciler retries it) instead of repeating a transition; and because the Events
 * and the histogram observation follow only a successful write, each transition is announced
 * exactly once. A write that would change nothing is not sent. The phase-duration histograms are
 * observed through metrics.ts, the Events recorded through events.ts.
 *
 * @module
 */
import {
  COCOON_HIBERNATION_PHASE_ACTIVE,
  COCOON_HIBERNATION_PHASE_FAILED,
  COCOON_HIBERNATION_PHASE_HIBERNATED,
  COCOON_HIBERNATION_PHASE_HIBERNATING,
  COCOON_HIBERNATION_PHASE_PENDING,
  COCOON_HIBERNATION_PHASE_WAKING,
  type CocoonHibernation,
  CocoonHibernations,
  HIBERNATION_DESIRE_HIBERNATE,
  HIBERNATION_DESIRE_WAKE,
} from "../common/apis/v1/mod.ts";
import { patchStatus } from "../kube/mod.ts";
import type { Clock, EventRecorder, EventType, Writer } from "../kube/mod.ts";
import { direction } from "./direction.ts";
import {
  REASON_HIBERNATE_TIMED_OUT,
  REASON_HIBERNATED,
  REASON_HIBERNATION_CONFLICT,
  REASON_RETRY_REQUESTED,
  REASON_WAKE_TIMED_OUT,
  REASON_WOKEN_ACTIVE,
  recordRequestEvent,
} from "./events.ts";
import { type LeftPhase, observePhaseExit } from "./metrics.ts";
import { nextStatus, type PhaseChange, phaseEnteredAt, sameStatus } from "./status.ts";
import { goDuration, HIBERNATE_TIMEOUT_MS, WAKE_TIMEOUT_MS } from "./timers.ts";

/** What a transition needs: the API writer, the Event recorder and the time source. */
export interface TransitionDeps {
  client: Writer;
  recorder: EventRecorder;
  clock: Clock;
}

/** Writes phase changes and announces the transitions they make; see the module doc. */
export class PhaseTransitions {
  readonly #deps: TransitionDeps;

  constructor(deps: TransitionDeps) {
    this.#deps = deps;
  }

  /**
   * Moves hib to phase (Hibernating, Hibernated, Waking or Active) on vmName. Leaving Failed
   * announces `RetryRequested`; reaching Hibernated announces `Hibernated`, reaching Active
   * `WokenActive`, each with the time spent Hibernating/Waking when that is the phase left.
   */
  async enter(
    hib: CocoonHibernation,
    phase:
      | typeof COCOON_HIBERNATION_PHASE_HIBERNATING
      | typeof COCOON_HIBERNATION_PHASE_HIBERNATED
      | typeof COCOON_HIBERNATION_PHASE_WAKING
      | typeof COCOON_HIBERNATION_PHASE_ACTIVE,
    vmName: string,
    signal: AbortSignal,
  ): Promise<void> {
    const left = await this.#write(hib, { phase, vmName }, signal);
    // A rewrite within the same phase (a new generation, a repaired condition) announces nothing.
    if (!left || left.phase === phase) return;
    if (left.phase === COCOON_HIBERNATION_PHASE_FAILED) {
      const desire = phase === COCOON_HIBERNATION_PHASE_HIBERNATING ||
          phase === COCOON_HIBERNATION_PHASE_HIBERNATED
        ? HIBERNATION_DESIRE_HIBERNATE
        : HIBERNATION_DESIRE_WAKE;
      this.#event(hib, "Normal", REASON_RETRY_REQUESTED, `retrying ${desire} after prior failure`);
    }
    if (phase === COCOON_HIBERNATION_PHASE_HIBERNATED) {
      this.#observeExit(left, COCOON_HIBERNATION_PHASE_HIBERNATING, "ok");
      this.#event(hib, "Normal", REASON_HIBERNATED, `snapshot ${vmName} pushed to the registry`);
    } else if (phase === COCOON_HIBERNATION_PHASE_ACTIVE) {
      this.#observeExit(left, COCOON_HIBERNATION_PHASE_WAKING, "ok");
      const pod = `${hib.metadata.namespace}/${hib.spec.podRef.name}`;
      this.#event(hib, "Normal", REASON_WOKEN_ACTIVE, `pod ${pod} is running`);
    }
  }

  /**
   * Fails a Hibernating (or Waking) hib whose deadline passed: phase Failed, a `HibernateTimedOut`
   * (`WakeTimedOut`) Warning and a `timeout` observation of the phase's duration.
   */
  async timedOut(
    hib: CocoonHibernation,
    phase: typeof COCOON_HIBERNATION_PHASE_HIBERNATING | typeof COCOON_HIBERNATION_PHASE_WAKING,
    vmName: string,
    signal: AbortSignal,
  ): Promise<void> {
    const hibernating = phase === COCOON_HIBERNATION_PHASE_HIBERNATING;
    const limit = goDuration(hibernating ? HIBERNATE_TIMEOUT_MS : WAKE_TIMEOUT_MS);
    const message = hibernating
      ? `hibernate not confirmed within ${limit}`
      : `wake timed out after ${limit}; vk-cocoon never reported the container running`;
    const left = await this.#write(
      hib,
      { phase: COCOON_HIBERNATION_PHASE_FAILED, message },
      signal,
    );
    if (!left) return;
    this.#observeExit(left, phase, "timeout");
    if (hibernating) {
      this.#event(
        hib,
        "Warning",
        REASON_HIBERNATE_TIMED_OUT,
        `snapshot ${vmName} not confirmed in the registry within ${limit}`,
      );
    } else {
      this.#event(
        hib,
        "Warning",
        REASON_WAKE_TIMED_OUT,
        `vk-cocoon did not report the container running within ${limit}`,
      );
    }
  }

  /** Fails hib with message (a request that cannot be acted on). No Event. */
  async fail(hib: CocoonHibernation, message: string, signal: AbortSignal): Promise<void> {
    await this.#write(hib, { phase: COCOON_HIBERNATION_PHASE_FAILED, message }, signal);
  }

  /**
   * Parks hib on Pending with message while its pod (or the pod's VM name) is missing. Hibernated
   * and Waking are kept: they tell the CocoonSet to restore the VM from its snapshot when it
   * recreates the pod, and dropping them would let the pod boot fresh.
   */
  async pending(hib: CocoonHibernation, message: string, signal: AbortSignal): Promise<void> {
    const phase = hib.status?.phase;
    if (
      phase === COCOON_HIBERNATION_PHASE_HIBERNATED || phase === COCOON_HIBERNATION_PHASE_WAKING
    ) {
      return;
    }
    await this.#write(hib, { phase: COCOON_HIBERNATION_PHASE_PENDING, message }, signal);
  }

  /**
   * Refuses hib because earlier, an earlier request on the same VM, drives it the opposite way:
   * phase Failed, Ready reason `Conflict`, and a `Conflict` Warning naming earlier when the
   * refusal is first written (or names a different request).
   */
  async refuseOpposing(
    hib: CocoonHibernation,
    earlier: CocoonHibernation,
    vmName: string,
    signal: AbortSignal,
  ): Promise<void> {
    const way = direction(earlier);
    const message = way === earlier.spec.desire
      ? `CocoonHibernation ${earlier.metadata.name} was created first and asks to ${way} VM ` +
        `${vmName}; this request to ${hib.spec.desire} waits until that one is deleted or asks ` +
        `the same`
      : `CocoonHibernation ${earlier.metadata.name} was created first and is still finishing its ` +
        `${way === HIBERNATION_DESIRE_WAKE ? "wake" : "hibernation"} of VM ${vmName} (it asks to ` +
        `${earlier.spec.desire} next); this request to ${hib.spec.desire} waits until that one ` +
        `is done or deleted`;
    const left = await this.#write(
      hib,
      { phase: COCOON_HIBERNATION_PHASE_FAILED, reason: REASON_HIBERNATION_CONFLICT, message },
      signal,
    );
    if (left) this.#event(hib, "Warning", REASON_HIBERNATION_CONFLICT, message);
  }

  /** Patches the status to change; returns what was left, or undefined when nothing changed. */
  async #write(
    hib: CocoonHibernation,
    change: PhaseChange,
    signal: AbortSignal,
  ): Promise<LeftPhase | undefined> {
    const next = nextStatus(hib, change, this.#deps.clock.now());
    if (sameStatus(hib.status, next)) return undefined;
    const left = { phase: hib.status?.phase, enteredAtMs: phaseEnteredAt(hib) };
    await patchStatus(this.#deps.client, CocoonHibernations, hib, (h) => {
      h.status = next;
    }, { optimisticLock: true, signal });
    return left;
  }

  #observeExit(left: LeftPhase, phase: string, result: "ok" | "timeout"): void {
    observePhaseExit(left, phase, result, this.#deps.clock.now());
  }

  #event(hib: CocoonHibernation, type: EventType, reason: string, message: string): void {
    recordRequestEvent(this.#deps.recorder, hib, type, reason, message);
  }
}
