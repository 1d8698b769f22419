/**
 * Snapshot safety: the single gate for every registry tag delete (gate.ts) and the claimant
 * table it evaluates (claims.ts). Both reconcilers import this module; it imports only common/,
 * snapshot/ and kube/.
 *
 * @module
 */
export { type Actor, actorDerives } from "./actor.ts";
export type { Claim, ClaimHolder } from "./claims.ts";
export { describeClaims, tagClaims } from "./claims.ts";
export type { GateDeps, RefusalKind, Verdict } from "./gate.ts";
export { actingRefusal, deleteTagIfAllowed, mayDeleteTag } from "./gate.ts";
export { setFlowOnVM } from "./set_flow.ts";
export { cameFirst, type SetAge } from "./first_comer.ts";
