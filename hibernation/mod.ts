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
  setupHibernationController,
} from "./setup.ts";
export { REASON_HIBERNATION_CONFLICT } from "./events.ts";
export { HIBERNATE_TIMEOUT_MS, REQUEUE_INTERVAL_MS, WAKE_TIMEOUT_MS } from "./timers.ts";
export { POD_REF_INDEX } from "./watch.ts";
