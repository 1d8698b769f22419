/**
 * The wake step: withdraw the hibernate request from the pod, wait until vk-cocoon runs the VM
 * again, then drop the VM's `:hibernate` tag.
 *
 * "Running again" means a running container AND a VM id on the pod: vk-cocoon clears the id when
 * it hibernates a VM and writes a fresh one once the restore succeeded, while container statuses
 * can briefly show running during a pod recreate. The tag goes only after both, so the snapshot
 * survives until the VM it restores is live. Nor does a pod count whose lifecycle-state says
 * `hibernating`: vk-cocoon pushes the snapshot before it tears the VM down and clears the id, so
 * until then the VM the pod shows is the one going away, and the snapshot is what restores it.
 *
 * @module
 */
import {
  CocoonHibernationPhaseActive,
  CocoonHibernationPhaseWaking,
} from "../common/apis/v1/mod.ts";
import { patchHibernateState } from "../common/k8s/client_patch.ts";
import { readHibernateState } from "../common/meta/hibernate.ts";
import { LifecycleStateHibernating, readLifecycleState } from "../common/meta/lifecycle.ts";
import { isContainerRunning } from "../common/meta/pod.ts";
import { parseVMRuntime } from "../common/meta/vmruntime.ts";
import type { Pod } from "../kube/core.ts";
import { wrapError } from "../kube/errors.ts";
import type { Result } from "../kube/reconcile.ts";
import type { Pass, StepDeps } from "./pass.ts";
import { dropHibernateTag } from "./tag.ts";
import { phaseDeadlineExceeded, REQUEUE_INTERVAL_MS, WAKE_TIMEOUT_MS } from "./status.ts";

/**
 * Whether the pod runs a restored VM: a running container and a VM id, on a VM vk-cocoon is not
 * hibernating.
 */
export function vmLive(pod: Pod): boolean {
  return isContainerRunning(pod) && parseVMRuntime(pod).vmID !== "" &&
    readLifecycleState(pod) !== LifecycleStateHibernating;
}

/**
 * One wake pass: Active once the VM is live (the tag dropped first), Failed past the 5-minute
 * deadline, otherwise Waking with a look again in 5 s. A failed tag delete does not hold the
 * wake back; it is logged at error level because a persistent one leaks every snapshot.
 */
export async function reconcileWake(deps: StepDeps, pass: Pass): Promise<Result> {
  const { hib, pod, vmName, signal } = pass;
  if (readHibernateState(pod)) {
    try {
      await patchHibernateState(deps.client, pod, false, signal);
    } catch (err) {
      throw wrapError(`clear hibernate annotation on pod ${pod.metadata.name}`, err);
    }
  }
  if (vmLive(pod)) {
    await dropHibernateTag(deps.registry, vmName, hib, signal);
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
