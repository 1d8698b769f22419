/**
 * The orphan mark of a `:hibernate` tag: a pod's VM was hibernated for a hibernate request that
 * nobody owns any more (its CocoonHibernation was deleted while the VM still needed the tag, or a
 * released-seat wake withdrew an ask no one owned), so once the VM runs again nobody else drops
 * the tag — and vk-cocoon wakes a pod it tracks without a VM from whatever `<vm>:hibernate` holds,
 * so a tag older than the VM's last run can bring old state back later. The mark records the VM
 * id the pod showed when the tag was orphaned; the tag may go once the pod shows a live VM under
 * another id (a VM that went down and came back), not asked to hibernate again.
 *
 * Not part of cocoon-common or vk-cocoon: only this operator reads it, and the Go operator
 * ignores it (it drops the tag in the request's finalizer instead, see docs/hibernation.md).
 *
 * @module
 */
import type { Pod } from "../../kube/core.ts";
import { ensureAnnotations } from "./annotations.ts";
import { readHibernateState } from "./hibernate.ts";
import { vmLive, vmMayBeLeaving } from "./vm_liveness.ts";
import { parseVMRuntime } from "./vmruntime.ts";

/**
 * The VM id the pod showed when its VM's `:hibernate` tag lost its owner (empty: it showed none).
 * Present means "drop the tag once the VM runs again under another id".
 */
export const ANNOTATION_ORPHAN_HIBERNATE_TAG = "cocoonset.cocoonstack.io/orphan-hibernate-tag";

/** The VM id the mark recorded, or undefined when the pod carries no mark. */
export function readOrphanTagMark(pod: Pod): string | undefined {
  return pod.metadata.annotations?.[ANNOTATION_ORPHAN_HIBERNATE_TAG];
}

/** Marks (in place) the pod's `:hibernate` tag orphaned, recording the VM id it shows now. */
export function markOrphanTag(pod: Pod): void {
  ensureAnnotations(pod)[ANNOTATION_ORPHAN_HIBERNATE_TAG] = parseVMRuntime(pod).vmID;
}

/** Removes (in place) the orphan mark. */
export function clearOrphanTagMark(pod: Pod): void {
  delete pod.metadata.annotations?.[ANNOTATION_ORPHAN_HIBERNATE_TAG];
}

/**
 * Whether the orphaned tag of a marked pod may go now: its VM is live under an id other than the
 * one the mark recorded, so it went down and was brought back (vk-cocoon writes a new id for
 * every VM it boots or restores), and it is not asked to hibernate again nor possibly leaving
 * after an ask this operator made (vmMayBeLeaving). Until then the tag may be what the VM comes
 * back from.
 */
export function orphanTagDropDue(pod: Pod): boolean {
  const recorded = readOrphanTagMark(pod);
  if (recorded === undefined || !vmLive(pod)) return false;
  return parseVMRuntime(pod).vmID !== recorded && !readHibernateState(pod) &&
    !vmMayBeLeaving(pod);
}
