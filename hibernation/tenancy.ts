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
import type { Reader } from "../kube/mod.ts";
import { actingRefusal } from "../snapshotgate/mod.ts";
import type { RequestProblem } from "./problem.ts";
import { requestActor } from "./tag.ts";

/** The name-refused problem of hib acting under vmName, or undefined when it may. */
export async function tenancyProblem(
  reader: Reader,
  hib: CocoonHibernation,
  vmName: string,
  signal: AbortSignal,
): Promise<RequestProblem | undefined> {
  const refusal = await actingRefusal(reader, requestActor(hib), vmName, signal);
  return refusal ? { problem: "name-refused", message: refusal.message } : undefined;
}
