/**
 * Whether the VM a pod shows runs, read from what vk-cocoon writes (the VM id, the container
 * state, the lifecycle annotation). Two questions with different answers while vk-cocoon
 * hibernates a VM: it pushes `:hibernate` first, then removes the VM, then clears the id, so for
 * that whole stretch the pod still shows the old VM up, but the snapshot is the only copy that
 * will survive it.
 *
 * Not part of cocoon-common: both reconcilers of this operator decide on these.
 *
 * @module
 */
import type { Pod } from "../../kube/core.ts";
import { readHibernateState } from "./hibernate.ts";
import {
  LIFECYCLE_STATE_HIBERNATED,
  LIFECYCLE_STATE_HIBERNATING,
  readCocoonSetGeneration,
  readLifecycleObservedGeneration,
  readLifecycleState,
} from "./lifecycle.ts";
import { isContainerRunning } from "./pod.ts";
import { parseVMRuntime } from "./vmruntime.ts";

/**
 * The VM id the pod showed when this operator last asked it to hibernate (set with the hibernate
 * annotation, never cleared). Not part of the vk-cocoon contract: only this operator reads it.
 */
export const ANNOTATION_HIBERNATE_ASKED_VMID = "cocoonset.cocoonstack.io/hibernate-asked-vm-id";

/** Records on pod (in place) the VM id it shows now as the one asked to hibernate. */
export function recordHibernateAsk(pod: Pod): void {
  const vmID = parseVMRuntime(pod).vmID;
  if (vmID === "") return;
  pod.metadata.annotations = {
    ...pod.metadata.annotations,
    [ANNOTATION_HIBERNATE_ASKED_VMID]: vmID,
  };
}

/**
 * Whether the VM the pod shows is the very one that was asked to hibernate last: with the
 * vk-cocoon of today (no lifecycle annotations; save → push → remove) it may have pushed its
 * `:hibernate` and be about to be removed even though the ask was withdrawn since, so a tag found
 * now may be its only copy. A VM restored (or booted) since shows a new id.
 */
export function vmMayBeLeaving(pod: Pod): boolean {
  const asked = pod.metadata.annotations?.[ANNOTATION_HIBERNATE_ASKED_VMID] ?? "";
  return asked !== "" && asked === parseVMRuntime(pod).vmID;
}

/**
 * Whether the pod still shows a VM: vk-cocoon wrote its id and a container runs (a container can
 * show running for a moment before the restore wrote the id). False means the VM is down.
 */
export function vmUp(pod: Pod): boolean {
  return parseVMRuntime(pod).vmID !== "" && isContainerRunning(pod);
}

/**
 * Whether the pod's VM is up and not being hibernated: only then may a `:hibernate` tag it was
 * restored from go, or a restore in flight count as done.
 */
export function vmLive(pod: Pod): boolean {
  return vmUp(pod) && readLifecycleState(pod) !== LIFECYCLE_STATE_HIBERNATING;
}

/**
 * Whether the VM itself confirmed the hibernation the pod asks for, so its `:hibernate` tag is
 * final: the one rule behind a migration's delete of the old main, a retain/release suspend's
 * Suspended and a CocoonHibernation's Hibernated.
 *
 * A vk-cocoon that writes lifecycle annotations confirms with `hibernated` observed at
 * `minGeneration` or later (by default the pod's own generation stamp; vk writes the state and
 * the generation together, so an older round's pair never passes). The vk-cocoon of today writes
 * none and hibernates as save → push → remove, clearing the VM id only after the removal (a
 * failed removal rolls the pushed tag back and keeps the id), so there the hibernate request plus
 * a cleared id on a pod bound to a node is the confirmation — which is also how vk-cocoon itself
 * tracks a hibernated pod. An unbound pod never had a VM, so its missing id proves nothing. The
 * tag alone never is: it exists from the push on, while the VM still runs and may still roll it
 * back.
 */
export function vmHibernationConfirmed(
  pod: Pod,
  minGeneration: number = readCocoonSetGeneration(pod),
): boolean {
  const state = readLifecycleState(pod);
  if (state !== "") {
    return state === LIFECYCLE_STATE_HIBERNATED &&
      readLifecycleObservedGeneration(pod) >= minGeneration;
  }
  return readHibernateState(pod) && parseVMRuntime(pod).vmID === "" &&
    (pod.spec?.nodeName ?? "") !== "";
}

/**
 * Whether a wake brought the VM back, so the `:hibernate` tag it restored from may go: the VM is
 * live and the waker saw it down since it asked for the wake. A live VM alone is no proof with
 * the vk-cocoon of today: it writes no lifecycle annotations, and between its push and its
 * removal a VM whose hibernate request was withdrawn still shows its old id and a running
 * container, although it is about to go and be restored from that very tag. Only a waker that
 * watched the VM go down knows that the VM it sees now is the restored one; any other waker
 * leaves the tag (a leftover the set's flows, or a later request's, drop; never a lost state).
 */
export function wakeBroughtVMBack(pod: Pod, sawVMDown: boolean): boolean {
  return sawVMDown && vmLive(pod);
}
