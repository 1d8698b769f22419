/**
 * The tenancy check of a pass (docs/hibernation.md, "One pass", and Differences 13): a request
 * acts only under the VM name it derives from its own namespace and target pod,
 * `vk-<ns>-<podRef.name>`, and never under a name another namespace derives too. The rule itself
 * is the snapshot gate's (snapshotgate/gate.ts `actingRefusal`); this turns its answer into a
 * problem the pass records (problem.ts: a `VMNameRefused` Warning, then Failed).
 *
 * @module
 */
import type { CocoonHibernation } from "../common/apis/v1/mod.ts";
import { actingRefusal, type ClaimSources } from "../snapshotgate/mod.ts";
import type { RequestProblem } from "./problem.ts";
import { requestActor } from "./tag.ts";

/**
 * The name-refused problem of hib acting under vmName, or undefined when it may. `decision`:
 * the pass is about to act under vmName for the first time (the request has not recorded it),
 * so the other namespaces the name could come from are read past the cache; otherwise the
 * cache's VM-name index decides, and a collision it shows is confirmed past the cache (a
 * refusal fails the request, so it is never made on a stale copy). snapshotgate actingRefusal.
 */
export async function tenancyProblem(
  sources: ClaimSources,
  hib: CocoonHibernation,
  vmName: string,
  decision: boolean,
  signal: AbortSignal,
): Promise<RequestProblem | undefined> {
  const refusal = await actingRefusal(sources, requestActor(hib), vmName, decision, signal);
  return refusal ? { problem: "name-refused", message: refusal.message } : undefined;
}
