/**
 * Snapshot safety: the one gate for every registry tag delete (gate.ts), the claimants it weighs
 * (claims.ts) and the cache's VM-name index it finds them through (vm_index.ts).
 *
 * @module
 */
export { actorDerives } from "./gate.ts";
export type { GateDeps, RefusalKind, Verdict } from "./gate.ts";
export { actingRefusal, deleteTagIfAllowed, mayDeleteTag } from "./gate.ts";
export type { Actor, Claim, ClaimHolder, ClaimSources, CollisionMoment, SetAge } from "./claims.ts";
export {
  cachedTagClaims,
  cameFirst,
  collisionClaims,
  describeClaims,
  setFlowOnVM,
  tagClaims,
} from "./claims.ts";
export {
  cachedVMNameIndex,
  managerVMNameIndex,
  registerVMNameIndex,
  scannedVMNameIndex,
  setToolboxNames,
  VM_NAME_INDEX,
  type VMNameIndex,
} from "./vm_index.ts";
