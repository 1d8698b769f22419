/**
 * Opposing requests (docs/hibernation.md, "One pass" step 5, and Differences 1): other
 * CocoonHibernations that reach the same VM and would drive it the other way. Nothing in the API
 * stops two requests from naming one pod (cocoon-webhook does, when installed); the earliest sets
 * the direction, and a request opposing it is refused (problem.ts) and touches nothing.
 *
 * A request reaches a VM through its pod reference or through the VM name its status recorded.
 * Requests being deleted no longer count.
 *
 * @module
 */
import { type CocoonHibernation, isValidHibernationDesire } from "../common/apis/v1/mod.ts";
import { compareCreation } from "../common/meta/creation_order.ts";
import { direction } from "./direction.ts";
import type { RequestProblem } from "./problem.ts";

function live(h: CocoonHibernation): boolean {
  return !h.metadata.deletionTimestamp;
}

/**
 * The request hib must give way to, or undefined when hib may act. Among the live requests with a
 * valid desire that reach the VM (hib's pod, or vmName), the earliest sets the direction — its
 * desire, or the transition it still finishes after a reversal (direction.ts); a request that
 * would drive the VM the other way is refused until that one is deleted or turns its way.
 * Requests going the earliest's way act together (they are serialized per VM).
 */
export function opposingRequest(
  hib: CocoonHibernation,
  namespaceRequests: readonly CocoonHibernation[],
  vmName: string,
): CocoonHibernation | undefined {
  const podName = hib.spec.podRef.name;
  const contenders = namespaceRequests.filter((o) =>
    o.metadata.uid !== hib.metadata.uid && live(o) && isValidHibernationDesire(o.spec?.desire) &&
    (o.spec?.podRef?.name === podName || (o.status?.vmName ?? "") === vmName)
  );
  // The operator's one creation order: the requests share a namespace, so their names break ties.
  const earliest = [hib, ...contenders].sort((a, b) => compareCreation(a.metadata, b.metadata))[0];
  if (earliest === hib || direction(earliest) === direction(hib)) return undefined;
  return earliest;
}

/** The opposing problem of hib on vmName among namespaceRequests, or undefined when it may act. */
export function opposingProblem(
  hib: CocoonHibernation,
  namespaceRequests: readonly CocoonHibernation[],
  vmName: string,
): RequestProblem | undefined {
  const earlier = opposingRequest(hib, namespaceRequests, vmName);
  return earlier ? { problem: "opposing", earlier, vmName } : undefined;
}
