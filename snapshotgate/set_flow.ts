/**
 * The CocoonSet flows that own a VM outright: teardown, a migration of its main, a released seat
 * and the wake of one. While one runs, a CocoonHibernation on that VM yields to the set
 * (hibernation/precedence.ts) and, for the same reason, holds no claim on the tag that flow
 * drops at its end (claims.ts): the request waits for the flow, and a request that hibernates
 * the VM afterwards makes vk-cocoon push a fresh `:hibernate` from the VM then running, so the
 * flow's old tag is no state it will ever read back. One rule for both places, so a request is
 * never told to wait for a flow that in turn waits for the request.
 *
 * @module
 */
import type { CocoonSet } from "../common/apis/v1/cocoonset_types.ts";
import { ANNOTATION_HIBERNATED_ON_NODE, extractAgentSlot } from "../common/meta/mod.ts";

/**
 * What cs's own flow is doing with vmName (a VM cs derives) that no request may cross, in a
 * few words; "" when no such flow runs.
 */
export function setFlowOnVM(cs: CocoonSet, vmName: string): string {
  const main = extractAgentSlot(cs.metadata.namespace ?? "", cs.metadata.name ?? "", vmName) === 0;
  const phase = cs.status?.phase ?? "";
  if (cs.metadata.deletionTimestamp) return "is being deleted";
  if (phase === "Migrating") return "is migrating its main";
  if (phase === "Waking") return "is waking its released seat";
  if (main && (cs.metadata.annotations?.[ANNOTATION_HIBERNATED_ON_NODE] ?? "") !== "") {
    return "has released its seat";
  }
  return "";
}
