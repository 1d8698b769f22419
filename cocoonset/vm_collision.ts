/**
 * VM names that two namespaces share: `vk-<ns>-<pod>` reads the same for `team` / `x-prod-0`
 * and `team-x` / `prod-0`, and vk-cocoon keeps one VM (and one set of tags) per name. Before any
 * create, a pod whose VM name another namespace already holds is refused: the first comer keeps
 * the name, the second gets Ready=False (VMNameConflict) and a Warning naming both objects, and
 * nothing is created for that slot; the rest of the set goes on.
 *
 * Who holds a name: a pod of another namespace that derives it (or runs it, as vk-cocoon wrote
 * it), in any state; or a CocoonSet of another namespace that derives it and came first (older
 * creationTimestamp, ties broken by "namespace/name": snapshotgate/first_comer.ts), so a first comer that has no pod right
 * now (suspended with its seat released, between a migration's delete and recreate) keeps its
 * name too, and two sets created together never both lose.
 *
 * Cheap on the common path: the cache's VM-name index (every labelled pod, every CocoonSet and
 * CocoonHibernation of all namespaces) is asked first; only the namespaces it names are read past
 * the cache.
 *
 * @module
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
 * Who of another namespace already holds vmName; [] when nobody does. The cache's VM-name index
 * names the candidates, so a name nobody else derives costs no API request; the namespaces it
 * names are read past the cache before the answer (snapshotgate collisionClaims at the `create`
 * moment, with this set as the actor: a set of another namespace holds the name only when it
 * came first). A pod outside the pod cache (one no CocoonSet owns) is not looked for here; the
 * set's first hibernate ask under the name is (tag_gate.ts hibernateRefused). Requests there hold nothing of their own: a request
 * counts only in a namespace whose pod or first-comer set is already named.
 */
export async function vmNameHolders(pass: SetPass, vmName: string): Promise<string[]> {
  const claims = await collisionClaims(
    claimSources(pass),
    vmName,
    setActor(pass.cs),
    "create",
    pass.signal,
  );
  const holders = claims.flatMap((c) =>
    c.holder === "Pod"
      ? [`pod ${c.namespace}/${c.name}`]
      : c.holder === "CocoonSet"
      ? [`CocoonSet ${c.namespace}/${c.name}`]
      : []
  );
  return [...new Set(holders)];
}

/**
 * Checks pod (about to be created as `what`) against the VM names of other namespaces. When its
 * name is held, records the problem (Ready=False, a Warning naming both) and returns it: the
 * caller creates nothing. undefined when the create may go ahead.
 */
export async function refuseCollidingCreate(
  pass: SetPass,
  pod: Pod,
  what: string,
): Promise<StatusProblem | undefined> {
  const vmName = parseVMSpec(pod).vmName;
  if (vmName === "") return undefined;
  const holders = await vmNameHolders(pass, vmName);
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
