/**
 * The wake step (docs/hibernation.md, "What a request does"): withdraw the hibernate request,
 * wait until vk-cocoon runs the VM again (common/meta vmLive), then drop the `:hibernate` tag.
 * The tag goes only when this wake saw the VM down first (it was Waking): without lifecycle
 * annotations, a VM pushed and about to be removed and restored from that tag shows live until
 * its removal. A wake that finds the VM live from the start drops only a
 * tag the pod's orphan mark says its VM came back from since.
 *
 * @module
 */
import { patchClearOrphanTag, patchHibernateState } from "../common/k8s/pod_patch.ts";
import { readHibernateState } from "../common/meta/hibernate.ts";
import { orphanTagDropDue } from "../common/meta/orphan_tag.ts";
import { vmLive, wakeBroughtVMBack } from "../common/meta/vm_liveness.ts";
import { isNotFound, wrapError } from "../kube/mod.ts";
import type { Pod, Result } from "../kube/mod.ts";
import type { Verdict } from "../snapshotgate/mod.ts";
import { readStoredPod } from "./checks.ts";
import { dropHibernateTag } from "./finalizer.ts";
import {
  enterPhase,
  type Pass,
  phaseDeadlineExceeded,
  REQUEUE_INTERVAL_MS,
  type TargetPass,
  timeOut,
  WAKE_TIMEOUT_MS,
} from "./status.ts";

/** What a wake pass does: enter Active dropping the tag or leaving it, time out, or wait. */
export type WakeOutcome = "active-drop-tag" | "active-keep-tag" | "timed-out" | "waking";

/** What a wake pass decides on: vmLive, wakeBroughtVMBack (common/meta), the deadline. */
export interface WakeSignals {
  live: boolean;
  broughtBack: boolean;
  expired: boolean;
}

/** The outcome of a wake pass; a live VM wins even past the deadline. */
export function wakeOutcome(s: WakeSignals): WakeOutcome {
  if (s.live) return s.broughtBack ? "active-drop-tag" : "active-keep-tag";
  return s.expired ? "timed-out" : "waking";
}

/** One wake pass (wakeOutcome); a failed or refused tag drop does not hold it back. */
export async function reconcileWake(pass: TargetPass): Promise<Result> {
  const { deps, hib, pod, vmName, signal } = pass;
  if (readHibernateState(pod)) {
    try {
      await patchHibernateState(deps.client, pod, false, signal);
    } catch (err) {
      throw wrapError(`clear hibernate annotation on pod ${pod.metadata.name}`, err);
    }
  }
  const sawDown = hib.status?.phase === "Waking";
  const now = deps.clock.now();
  const outcome = wakeOutcome({
    live: vmLive(pod),
    broughtBack: wakeBroughtVMBack(pod, sawDown),
    expired: phaseDeadlineExceeded(hib, "Waking", WAKE_TIMEOUT_MS, now),
  });
  switch (outcome) {
    case "active-drop-tag":
      await settleOrphanMark(pass, pod, await dropHibernateTag(pass, vmName));
      await enterPhase(pass, "Active", vmName);
      return {};
    case "active-keep-tag":
      await dropOrphanedTag(pass);
      await enterPhase(pass, "Active", vmName);
      return {};
    case "timed-out":
      await timeOut(pass, "Waking", vmName);
      return {};
    case "waking":
      await enterPhase(pass, "Waking", vmName);
      return { requeueAfter: REQUEUE_INTERVAL_MS };
  }
}

/**
 * Drops the tag of a VM live from the start when the pod's orphan mark (common/meta
 * orphan_tag.ts) records another VM id than it runs now: the VM came back since. The stored pod
 * decides, as a lagging copy could miss a new hibernate request.
 */
async function dropOrphanedTag(pass: TargetPass): Promise<void> {
  const { pod, vmName } = pass;
  if (!orphanTagDropDue(pod)) return;
  const stored = await readStoredPod(pass);
  if (!stored || !orphanTagDropDue(stored)) return;
  await settleOrphanMark(pass, stored, await dropHibernateTag(pass, vmName));
}

/**
 * Removes the pod's orphan mark once its tag is dealt with (dropped, or under a name the request
 * may not delete); a claimant keeping the tag, or a registry failure, keeps the mark.
 */
async function settleOrphanMark(pass: Pass, pod: Pod, verdict?: Verdict): Promise<void> {
  if (!verdict || (!verdict.allowed && verdict.kind === "claimed")) return;
  try {
    await patchClearOrphanTag(pass.deps.client, pod, pass.signal);
  } catch (err) {
    if (isNotFound(err)) return;
    throw wrapError(`clear orphan mark on pod ${pod.metadata.name}`, err);
  }
}
