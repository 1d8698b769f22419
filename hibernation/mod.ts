/**
 * The CocoonHibernation reconciler: hibernate or wake the VM behind one pod on request.
 *
 * @module
 */
export { HIBERNATION_FINALIZER } from "./finalizer.ts";
export { HibernationReconciler, type HibernationReconcilerDeps } from "./reconciler.ts";
export {
  HIBERNATION_CONTROLLER,
  type HibernationSetupDeps,
  POD_REF_INDEX,
  setupHibernationController,
} from "./setup.ts";
export {
  HIBERNATE_TIMEOUT_MS,
  REASON_HIBERNATION_CONFLICT,
  REQUEUE_INTERVAL_MS,
  WAKE_TIMEOUT_MS,
} from "./status.ts";
