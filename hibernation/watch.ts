/**
 * Which pod events reach which CocoonHibernations. Requests are filed in the cache under their
 * spec.podRef.name, so a pod event wakes exactly the requests naming that pod in its namespace —
 * a pod that appears after its request resumes it without any edit. Every pod event of such a pod
 * is passed on, status-only updates included: vk-cocoon reports the running container that
 * completes a wake in a status update of its own, after writing the VM id annotation.
 *
 * @module
 */
import type { CocoonHibernation } from "../common/apis/v1/mod.ts";
import { annotationChanged, funcs, or } from "../kube/mod.ts";
import type { CompletePredicate, Pod, Request } from "../kube/mod.ts";

/** Cache index of CocoonHibernations by target pod name. */
export const POD_REF_INDEX = "spec.podRef.name";

/** The index values of a request: the name of the pod it targets. */
export function podRefIndexValues(hib: CocoonHibernation): string[] {
  return [hib.spec?.podRef?.name ?? ""];
}

/** Looks up stored requests under an index value (the informer's byIndex). */
export type IndexLookup = (index: string, value: string) => CocoonHibernation[];

/** Requests for every CocoonHibernation in pod's namespace whose podRef names pod. */
export function hibernationsTargetingPod(lookup: IndexLookup, pod: Pod): Request[] {
  const namespace = pod.metadata.namespace ?? "";
  return lookup(POD_REF_INDEX, pod.metadata.name ?? "")
    .filter((h) => (h.metadata.namespace ?? "") === namespace)
    .map((h) => ({ namespace, name: h.metadata.name ?? "" }));
}

/**
 * Pod events worth a look: all of them. This is the Go operator's filter as it behaves — "annotation
 * changed OR a create/delete filter" whose unset update and generic methods allow (predicate.Funcs)
 * — so the running container reaches a Waking request at once instead of at its next 5 s requeue.
 */
export function targetPodEvents(): CompletePredicate<Pod> {
  return or<Pod>(
    annotationChanged<Pod>(),
    funcs<Pod>({ create: () => true, delete: () => true }),
  );
}
