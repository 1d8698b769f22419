/**
 * The CocoonHibernation reconciler: hibernate or wake the VM behind one pod on request.
 *
 * @module
 */
export {
  HIBERNATION_FINALIZER,
  HibernationReconciler,
  type HibernationReconcilerDeps,
} from "./reconciler.ts";
export {
  HIBERNATION_CONTROLLER,
  type HibernationSetupDeps,
  setupHibernationController,
} from "./setup.ts";
export {
  HIBERNATE_TIMEOUT_MS,
  ReasonHibernationConflict,
  REQUEUE_INTERVAL_MS,
  WAKE_TIMEOUT_MS,
} from "./status.ts";
export { POD_REF_INDEX } from "./watch.ts";
