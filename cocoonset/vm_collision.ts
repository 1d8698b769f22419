/**
 * VM names two namespaces share: `vk-<ns>-<pod>` reads the same for `team` / `x-prod-0` and
 * `team-x` / `prod-0`, and vk-cocoon keeps one VM (and one set of tags) per name. A pod whose VM
 * name another namespace holds is not created: the first comer keeps the name, the second gets
 * Ready=False `VMNameConflict` and a Warning naming both, and the rest of the set goes on.
 *
 * A name is held by a pod of another namespace that derives or runs it, or by a CocoonSet of
 * another namespace that derives it and came first (snapshotgate first_comer.ts), so a set with
 * no pod right now (a released seat, a migration between delete and create) keeps its names.
 * The cache's VM-name index names the candidates; only their namespaces are read past the cache.
 */
import { CONDITION_TYPE_READY } from "../common/k8s/condition.ts";
import { parseVMSpec } from "../common/meta/mod.ts";
import type { Pod } from "../kube/mod.ts";
import { collisionClaims } from "../snapshotgate/mod.ts";
import { claimSources, emit, podRef, type SetPass, type StatusProblem } from "./pass.ts";
import { setActor } from "./tag_gate.ts";

/** Ready=False reason and Warning reason: another namespace already holds the slot's VM name. */
export const REASON_VM_NAME_CONFLICT = "VMNameConflict";

/** How often a set that lost a VM name looks again (the holder may go away). */
export const REQUEUE_VM_NAME_COLLISION_MS = 30_000;

/**
 * Checks pod (about to be created as `what`) against other namespaces' VM names. When its name is
 * held, records the problem and its Warning and returns it: the caller creates nothing.
 */
export async function refuseCollidingCreate(
  pass: SetPass,
  pod: Pod,
  what: string,
): Promise<StatusProblem | undefined> {
  const vmName = parseVMSpec(pod).vmName;
  if (vmName === "") return undefined;
  const claims = await collisionClaims(
    claimSources(pass),
    vmName,
    setActor(pass.cs),
    "create",
    pass.signal,
  );
  const holders = [
    ...new Set(
      claims.flatMap((c) =>
        c.holder === "Pod" || c.holder === "CocoonSet"
          ? [`${c.holder === "Pod" ? "pod" : "CocoonSet"} ${c.namespace}/${c.name}`]
          : []
      ),
    ),
  ];
  if (holders.length === 0) return undefined;
  const problem: StatusProblem = {
    condition: CONDITION_TYPE_READY,
    reason: REASON_VM_NAME_CONFLICT,
    message: `${what} ${podRef(pod)} is not created: its VM name ${vmName} is already held by ` +
      `${holders.join(", ")} (CocoonSet ${pass.cs.metadata.namespace}/${pass.cs.metadata.name} ` +
      `came second)`,
  };
  pass.problems.push(problem);
  emit(pass, "Warning", REASON_VM_NAME_CONFLICT, problem.message);
  pass.log.warn("not creating {pod}: {reason}", { pod: podRef(pod), reason: problem.message });
  return problem;
}
