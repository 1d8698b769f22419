/**
 * The wake step: withdraw the hibernate request from the pod, wait until vk-cocoon runs the VM
 * again, then drop the VM's `:hibernate` tag.
 *
 * "Running again" is common/meta vmLive: a VM id and a running container, on a VM vk-cocoon is not
 * hibernating (it pushes the snapshot before it tears the VM down and clears the id, so until then
 * the VM the pod shows is the one going away). The tag goes only then, and only when this wake
 * saw the VM down first (phase Waking): the vk-cocoon of today writes no lifecycle annotations,
 * so a VM that was pushed and is about to be removed and restored shows live until its removal.
 *
 * @module
 */
import {
  CocoonHibernationPhaseActive,
  CocoonHibernationPhaseWaking,
} from "../common/apis/v1/mod.ts";
import { patchHibernateState } from "../common/k8s/client_patch.ts";
import { readHibernateState } from "../common/meta/hibernate.ts";
import { vmLive, wakeBroughtVMBack } from "../common/meta/vm_liveness.ts";
import { wrapError } from "../kube/errors.ts";
import type { Result } from "../kube/reconcile.ts";
import type { RequestPass, StepDeps } from "./pass.ts";
import { dropHibernateTag } from "./tag.ts";
import { phaseDeadlineExceeded, REQUEUE_INTERVAL_MS, WAKE_TIMEOUT_MS } from "./timers.ts";

/**
 * One wake pass: Active once the VM is live (the tag dropped first), Failed past the 5-minute
 * deadline, otherwise Waking with a look again in 5 s. A failed tag delete does not hold the
 * wake back; it is logged at error level because a persistent one leaks every snapshot.
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
  if (vmLive(pod)) {
    // Only a wake that saw the VM down (it entered Waking for that) drops the tag: a VM live
    // from the start may be the one vk-cocoon pushed and is about to remove (vm_liveness.ts).
    const sawDown = hib.status?.phase === CocoonHibernationPhaseWaking;
    if (wakeBroughtVMBack(pod, sawDown)) await dropHibernateTag(deps, vmName, hib, signal);
    await deps.transitions.enter(hib, CocoonHibernationPhaseActive, vmName, signal);
    return {};
  }
  if (phaseDeadlineExceeded(hib, CocoonHibernationPhaseWaking, WAKE_TIMEOUT_MS, deps.clock.now())) {
    await deps.transitions.timedOut(hib, CocoonHibernationPhaseWaking, vmName, signal);
    return {};
  }
  await deps.transitions.enter(hib, CocoonHibernationPhaseWaking, vmName, signal);
  return { requeueAfter: REQUEUE_INTERVAL_MS };
}
