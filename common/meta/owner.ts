/** Ownership and toleration checks that mark a pod as cocoon's. */
import type { Toleration } from "../../kube/core.ts";
import type { OwnerReference } from "../../kube/object.ts";
import { KIND_COCOON_SET, TOLERATION_KEY } from "./keys.ts";

/** Whether any toleration has the virtual-kubelet provider key (operator/value/effect ignored). */
export function hasCocoonTolerationKey(tolerations: readonly Toleration[] | undefined): boolean {
  return tolerations?.some((t) => t.key === TOLERATION_KEY) ?? false;
}

/** Whether any owner reference is a CocoonSet. */
export function isOwnedByCocoonSet(ownerRefs: readonly OwnerReference[] | undefined): boolean {
  return cocoonSetOwnerName(ownerRefs) !== "";
}

/** The name of the first CocoonSet owner reference, or "". */
export function cocoonSetOwnerName(ownerRefs: readonly OwnerReference[] | undefined): string {
  return ownerRefs?.find((ref) => ref.kind === KIND_COCOON_SET)?.name ?? "";
}
