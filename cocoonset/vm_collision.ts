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
 * Cheap on the common path: the cache (which holds every labelled pod and every CocoonSet of
 * all namespaces) is asked first; only a possible holder there is confirmed past the cache.
 *
 * @module
 */
import type { CocoonSet } from "../common/apis/v1/cocoonset_types.ts";
import { CocoonSets } from "../common/apis/v1/resources.ts";
import { CONDITION_TYPE_READY } from "../common/k8s/condition.ts";
import { parseVMSpec, setDerivesVMName, vmNameSplits } from "../common/meta/mod.ts";
import { isForbidden, isNotFound, Pods, wrapError } from "../kube/mod.ts";
import type { Pod, Reader } from "../kube/mod.ts";
import { cameFirst, type SetAge } from "../snapshotgate/mod.ts";
import { emit, podRef, type SetPass } from "./pass.ts";
import type { StatusProblem } from "./problem.ts";

/** Ready=False reason and Warning reason: another namespace already holds the slot's VM name. */
export const REASON_VM_NAME_CONFLICT = "VMNameConflict";

/** How often a set that lost a VM name looks again (the holder may go away). */
export const REQUEUE_VM_NAME_COLLISION_MS = 30_000;

function setToolboxNames(cs: CocoonSet): string[] {
  return [
    ...(cs.spec?.toolboxes ?? []).map((t) => t.name),
    ...(cs.status?.toolboxes ?? []).map((t) => t.name),
  ].filter((n): n is string => typeof n === "string" && n !== "");
}

function ageOf(cs: CocoonSet): SetAge {
  return {
    namespace: cs.metadata.namespace ?? "",
    name: cs.metadata.name ?? "",
    creationTimestamp: cs.metadata.creationTimestamp,
  };
}

async function readOrUndefined<T>(read: () => Promise<T>, what: string): Promise<T | undefined> {
  try {
    return await read();
  } catch (err) {
    if (isNotFound(err) || isForbidden(err)) return undefined;
    throw wrapError(what, err);
  }
}

/** The holders of vmName in namespaces other than cs's, as reader shows them. */
async function holdersVia(
  reader: Reader,
  cs: CocoonSet,
  vmName: string,
  signal: AbortSignal,
): Promise<string[]> {
  const own = cs.metadata.namespace ?? "";
  const out: string[] = [];
  for (const { namespace, rest } of vmNameSplits(vmName)) {
    if (namespace === own) continue;
    const pod: Pod | undefined = await readOrUndefined(
      () => reader.get(Pods, namespace, rest, { signal }),
      `read pod ${namespace}/${rest} for VM name ${vmName}`,
    );
    const runs = pod ? parseVMSpec(pod).vmName : "";
    if (pod && (runs === "" || runs === vmName)) out.push(`pod ${podRef(pod)}`);
    const sets = await readOrUndefined(
      () => reader.list(CocoonSets, { namespace, signal }),
      `list cocoonsets in ${namespace} for VM name ${vmName}`,
    );
    for (const other of sets?.items ?? []) {
      const name = other.metadata.name ?? "";
      if (!setDerivesVMName(namespace, name, setToolboxNames(other), vmName)) continue;
      if (cameFirst(ageOf(other), ageOf(cs))) out.push(`CocoonSet ${namespace}/${name}`);
    }
  }
  return out;
}

/**
 * Who of another namespace already holds vmName, confirmed past the cache; [] when nobody does.
 * The cache is asked first, so a name nobody else derives costs no API request.
 */
export async function vmNameHolders(pass: SetPass, vmName: string): Promise<string[]> {
  const cached = await holdersVia(pass.deps.client, pass.cs, vmName, pass.signal);
  if (cached.length === 0) return [];
  return await holdersVia(pass.deps.apiReader, pass.cs, vmName, pass.signal);
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
