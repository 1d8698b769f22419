/**
 * Wires the CocoonHibernation reconciler into a manager: the podRef index, the watches (every
 * change of the CR; pod create/delete/annotation changes mapped back to the requests naming the
 * pod) and the worker count.
 *
 * @module
 */
import { CocoonHibernations } from "../common/apis/v1/mod.ts";
import { controllerManagedBy, enqueueFromMap, Pods } from "../kube/mod.ts";
import type { Manager } from "../kube/mod.ts";
import { managerVMNameIndex, registerVMNameIndex } from "../snapshotgate/mod.ts";
import { HibernationReconciler, type HibernationReconcilerDeps } from "./reconciler.ts";
import {
  hibernationsTargetingPod,
  POD_REF_INDEX,
  podRefIndexValues,
  targetPodEvents,
} from "./watch.ts";

/** The controller's name in logs and metrics. */
export const HIBERNATION_CONTROLLER = "cocoonhibernation";

/** What setup needs beyond the manager; client, apiReader and recorder default to the manager's. */
export type HibernationSetupDeps =
  & Omit<HibernationReconcilerDeps, "client" | "apiReader" | "recorder">
  & Partial<Pick<HibernationReconcilerDeps, "client" | "apiReader" | "recorder">>;

/**
 * Registers the reconciler on mgr with concurrency workers and returns it. Throws when
 * concurrency is not a positive integer: one worker would let a slow registry stall every request,
 * zero would never reconcile. The clock, when given, also drives the controller's requeue timers.
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
    mgr.indexField(CocoonHibernations, POD_REF_INDEX, podRefIndexValues);
  }
  controllerManagedBy(mgr)
    .named(HIBERNATION_CONTROLLER)
    .for(CocoonHibernations)
    .watches(
      Pods,
      enqueueFromMap((pod) =>
        hibernationsTargetingPod((index, value) => requests.byIndex(index, value), pod)
      ),
      { predicates: [targetPodEvents()] },
    )
    .withOptions({
      maxConcurrentReconciles: concurrency,
      ...(deps.clock ? { clock: deps.clock } : {}),
    })
    .complete(reconciler);
  return reconciler;
}
