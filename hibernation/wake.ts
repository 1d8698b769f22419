/**
 * The wake step (docs/hibernation.md, "What a request does", `Wake`): withdraw the hibernate
 * request from the pod, wait until vk-cocoon runs the VM again, then drop the VM's `:hibernate`
 * tag.
 *
 * "Running again" is common/meta vmLive: a VM id and a running container, on a VM vk-cocoon is not
 * hibernating (it pushes the snapshot before it tears the VM down and clears the id, so until then
 * the VM the pod shows is the one going away). The tag goes only then, and only when this wake
 * saw the VM down first (phase Waking): the vk-cocoon of today writes no lifecycle annotations,
 * so a VM that was pushed and is about to be removed and restored shows live until its removal.
 * A wake that finds the VM live from the start drops only a tag the pod's orphan mark says its VM
 * came back from since.
 *
 * @module
 */
import {
  COCOON_HIBERNATION_PHASE_ACTIVE,
  COCOON_HIBERNATION_PHASE_WAKING,
} from "../common/apis/v1/mod.ts";
import { patchClearOrphanTag, patchHibernateState } from "../common/k8s/pod_patch.ts";
import { readHibernateState } from "../common/meta/hibernate.ts";
import { orphanTagDropDue } from "../common/meta/orphan_tag.ts";
import { vmLive, wakeBroughtVMBack } from "../common/meta/vm_liveness.ts";
import { isNotFound, Pods, wrapError } from "../kube/mod.ts";
import type { Pod, Result } from "../kube/mod.ts";
import type { RequestPass, StepDeps } from "./pass.ts";
import { dropHibernateTag } from "./tag.ts";
import type { Verdict } from "../snapshotgate/mod.ts";
import { phaseDeadlineExceeded, REQUEUE_INTERVAL_MS, WAKE_TIMEOUT_MS } from "./timers.ts";

/** The one thing a wake pass does, decided by wakeOutcome. */
export type WakeOutcome =
  /** The VM is live again after this wake saw it down: drop the tag, then enter Active. */
  | "active-drop-tag"
  /** The VM is live but this wake never saw it down: enter Active and leave the tag. */
  | "active-keep-tag"
  /** Waking for longer than its deadline: Failed, `WakeTimedOut`. */
  | "timed-out"
  /** The VM is not live yet: Waking, look again in 5 s. */
  | "waking";

/** What a wake pass decides on. */
export interface WakeSignals {
  /** vmLive on the pod: a VM id and a running container, not being hibernated. */
  live: boolean;
  /** wakeBroughtVMBack: live, and this wake saw the VM down first (it was Waking). */
  broughtBack: boolean;
  /** Waking for longer than its deadline. */
  expired: boolean;
}

/** The outcome of a wake pass; a live VM wins even past the deadline. */
export function wakeOutcome(s: WakeSignals): WakeOutcome {
  if (s.live) return s.broughtBack ? "active-drop-tag" : "active-keep-tag";
  return s.expired ? "timed-out" : "waking";
}

/**
 * One wake pass: Active once the VM is live (the tag dropped first when this wake brought it
 * back), Failed past the 5-minute deadline, otherwise Waking with a look again in 5 s
 * (wakeOutcome). A failed or refused tag delete does not hold the wake back; it is logged (a
 * failure at error level, because a persistent one leaks every snapshot).
 */
export async function reconcileWake(deps: StepDeps, pass: RequestPass): Promise<Result> {
  const { hib, pod, vmName, signal } = pass;
  if (readHibernateState(pod)) {
    try {
      await patchHibernateState(deps.client, pod, false, signal);
    } catch (err) {
      throw wrapError(`clear hibernate annotation on pod ${pod.metadata.name}`, err);
    }
  }
  // Only a wake that saw the VM down (it entered Waking for that) drops the tag: a VM live from
  // the start may be the one vk-cocoon pushed and is about to remove (vm_liveness.ts).
  const sawDown = hib.status?.phase === COCOON_HIBERNATION_PHASE_WAKING;
  const outcome = wakeOutcome({
    live: vmLive(pod),
    broughtBack: wakeBroughtVMBack(pod, sawDown),
    expired: phaseDeadlineExceeded(
      hib,
      COCOON_HIBERNATION_PHASE_WAKING,
      WAKE_TIMEOUT_MS,
      deps.clock.now(),
    ),
  });
  switch (outcome) {
    case "active-drop-tag":
      await settleOrphanMark(deps, pod, await dropHibernateTag(deps, vmName, hib, signal), signal);
      await deps.transitions.enter(hib, COCOON_HIBERNATION_PHASE_ACTIVE, vmName, signal);
      return {};
    case "active-keep-tag":
      await dropOrphanedTag(deps, pass);
      await deps.transitions.enter(hib, COCOON_HIBERNATION_PHASE_ACTIVE, vmName, signal);
      return {};
    case "timed-out":
      await deps.transitions.timedOut(hib, COCOON_HIBERNATION_PHASE_WAKING, vmName, signal);
      return {};
    case "waking":
      await deps.transitions.enter(hib, COCOON_HIBERNATION_PHASE_WAKING, vmName, signal);
      return { requeueAfter: REQUEUE_INTERVAL_MS };
  }
}

/**
 * A wake that never saw the VM down may still know it came back: the pod's orphan mark (left by
 * a deleted request, common/meta orphan_tag.ts) records the VM id it showed then, and a live VM
 * under another id was brought back since. The orphaned tag then goes, through the gate, and the
 * mark with it. This is how the mark is settled on a pod no CocoonSet watches; the stored pod
 * decides, as a lagging copy could miss a new hibernate request.
 */
async function dropOrphanedTag(deps: StepDeps, pass: RequestPass): Promise<void> {
  const { hib, pod, vmName, signal } = pass;
  if (!orphanTagDropDue(pod)) return;
  let stored: Pod;
  try {
    stored = await deps.reader.get(Pods, pod.metadata.namespace ?? "", pod.metadata.name ?? "", {
      signal,
    });
  } catch (err) {
    if (isNotFound(err)) return;
    throw wrapError(`read pod ${pod.metadata.name} before dropping its orphaned tag`, err);
  }
  if (stored.metadata.uid !== pod.metadata.uid || !orphanTagDropDue(stored)) return;
  await settleOrphanMark(deps, stored, await dropHibernateTag(deps, vmName, hib, signal), signal);
}

/**
 * Removes the pod's orphan mark once its tag is dealt with (dropped, or under a name the request
 * may not delete); a claimant that keeps the tag, or a registry failure, keeps the mark for a
 * later look, as the CocoonSet's step does. A pod gone took its mark along.
 */
async function settleOrphanMark(
  deps: StepDeps,
  pod: Pod,
  verdict: Verdict | undefined,
  signal: AbortSignal,
): Promise<void> {
  if (!verdict || (!verdict.allowed && verdict.kind === "claimed")) return;
  try {
    await patchClearOrphanTag(deps.client, pod, signal);
  } catch (err) {
    if (isNotFound(err)) return;
    throw wrapError(`clear orphan mark on pod ${pod.metadata.name}`, err);
  }
}
