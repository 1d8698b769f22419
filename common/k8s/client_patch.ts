/**
 * The old name of common/k8s/pod_patch.ts, kept while cocoonset/ and hibernation/ still import
 * it (issue 22: the lead switches those imports and deletes this file).
 *
 * @module
 */
export {
  patchCocoonSetGeneration,
  patchHibernateAsk,
  patchHibernateState,
  patchKeepSnapshotOnDelete,
} from "./pod_patch.ts";
