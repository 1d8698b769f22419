/**
 * Snapshot safety: the single gate for every registry tag delete (gate.ts), the claimant
 * table it evaluates (claims.ts) and the cache's VM-name index it finds claimants through
 * (vm_index.ts). Both reconcilers import this module; it imports only common/,
 * snapshot/ and kube/.
 *
 * @module
 */
export { type Actor, actorDerives } from "./actor.ts";
export type { Claim, ClaimHolder, ClaimSources, CollisionMoment } from "./claims.ts";
export { collisionClaims, describeClaims, tagClaims } from "./claims.ts";
export type { GateDeps, RefusalKind, Verdict } from "./gate.ts";
export { actingRefusal, deleteTagIfAllowed, mayDeleteTag } from "./gate.ts";
export { setFlowOnVM } from "./set_flow.ts";
export { cameFirst, type SetAge } from "./first_comer.ts";
export {
  cachedVMNameIndex,
  managerVMNameIndex,
  registerVMNameIndex,
  scannedVMNameIndex,
  setToolboxNames,
  VM_NAME_INDEX,
  type VMNameIndex,
} from "./vm_index.ts";
