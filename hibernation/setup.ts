/**
 * Wires the reconciler into a manager (docs/hibernation.md, "Watches"): every change of a
 * request, and every event of a pod mapped to the requests naming it, status-only updates
 * included (as the Go operator's filter lets through): one completes a wake.
 *
 * @module
 */
import { type CocoonHibernation, CocoonHibernations } from "../common/apis/v1/mod.ts";
import { controllerManagedBy, enqueueFromMap, Pods } from "../kube/mod.ts";
import type { Manager, Pod } from "../kube/mod.ts";
import { managerVMNameIndex, registerVMNameIndex } from "../snapshotgate/mod.ts";
import { HibernationReconciler, type HibernationReconcilerDeps } from "./reconciler.ts";

/** The controller's name in logs and metrics. */
export const HIBERNATION_CONTROLLER = "cocoonhibernation";

/** Cache index of CocoonHibernations by target pod name. */
export const POD_REF_INDEX = "spec.podRef.name";

/** What setup needs beyond the manager; client, apiReader and recorder default to the manager's. */
export type HibernationSetupDeps =
  & Omit<HibernationReconcilerDeps, "client" | "apiReader" | "recorder">
  & Partial<Pick<HibernationReconcilerDeps, "client" | "apiReader" | "recorder">>;

/**
 * Registers the reconciler on mgr with concurrency workers (a positive integer, else throws)
 * and returns it. The clock, when given, also drives the controller's requeue timers.
 */
export function setupHibernationController(
  mgr: Manager,
  deps: HibernationSetupDeps,
  concurrency: number,
): HibernationReconciler {
  if (!Number.isInteger(concurrency) || concurrency < 1) {
    throw new Error(`hibernation concurrency must be at least 1, got ${concurrency}`);
  }
  const reconciler = new HibernationReconciler({
    client: deps.client ?? mgr.client,
    apiReader: deps.apiReader ?? mgr.apiReader,
    recorder: deps.recorder ?? mgr.recorder,
    vmNameIndex: deps.vmNameIndex ?? managerVMNameIndex(mgr),
    registry: deps.registry,
    clock: deps.clock,
  });
  registerVMNameIndex(mgr);
  const requests = mgr.cache.informerFor(CocoonHibernations);
  // Another controller may already file requests under the same index.
  if (!requests.hasIndex(POD_REF_INDEX)) {
    mgr.indexField(CocoonHibernations, POD_REF_INDEX, (h: CocoonHibernation) => [
      h.spec?.podRef?.name ?? "",
    ]);
  }
  const namingPod = enqueueFromMap((pod: Pod) => {
    const namespace = pod.metadata.namespace ?? "";
    return requests.byIndex(POD_REF_INDEX, pod.metadata.name ?? "")
      .filter((h) => (h.metadata.namespace ?? "") === namespace)
      .map((h) => ({ namespace, name: h.metadata.name ?? "" }));
  });
  controllerManagedBy(mgr)
    .named(HIBERNATION_CONTROLLER)
    .for(CocoonHibernations)
    .watches(Pods, namingPod)
    .withOptions({
      maxConcurrentReconciles: concurrency,
      ...(deps.clock ? { clock: deps.clock } : {}),
    })
    .complete(reconciler);
  return reconciler;
}
