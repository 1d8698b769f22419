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
  LifecycleStateHibernated,
  LifecycleStateHibernating,
  readCocoonSetGeneration,
  readLifecycleObservedGeneration,
  readLifecycleState,
} from "./lifecycle.ts";
import { isContainerRunning } from "./pod.ts";
import { parseVMRuntime } from "./vmruntime.ts";

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
  return vmUp(pod) && readLifecycleState(pod) !== LifecycleStateHibernating;
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
    return state === LifecycleStateHibernated &&
      readLifecycleObservedGeneration(pod) >= minGeneration;
  }
  return readHibernateState(pod) && parseVMRuntime(pod).vmID === "" &&
    (pod.spec?.nodeName ?? "") !== "";
}
