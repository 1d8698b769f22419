/**
 * The CocoonSet side of the snapshot gate (snapshotgate/): every registry tag this reconciler
 * deletes goes through dropTag, on behalf of the set, so a tag goes only under a name the set
 * derives from its own namespace, name and toolboxes, shared with no other namespace, and needed
 * by no other claimant. A refusal is logged (a Warning Event for a name the set cannot own) and
 * the tag is left to its claimants, whose own flow drops it once done.
 */
import type { CocoonSet } from "../common/apis/v1/cocoonset_types.ts";
import { type Actor, deleteTagIfAllowed, type Verdict } from "../snapshotgate/mod.ts";
import { emit, type Pass } from "./pass.ts";

/** Warning reason: a tag was not deleted because the set cannot own its VM name. */
export const ReasonSnapshotDeleteRefused = "SnapshotDeleteRefused";

/** The gate's actor for cs: its namespace, name and every toolbox name it knows. */
export function setActor(cs: CocoonSet): Actor {
  const toolboxNames = [
    ...(cs.spec?.toolboxes ?? []).map((t) => t.name),
    ...(cs.status?.toolboxes ?? []).map((t) => t.name),
  ].filter((n): n is string => typeof n === "string" && n !== "");
  return {
    kind: "CocoonSet",
    namespace: cs.metadata.namespace ?? "",
    name: cs.metadata.name ?? "",
    uid: cs.metadata.uid,
    toolboxNames,
  };
}

/**
 * Deletes `<vmName>:<tag>` when the gate allows it. Registry errors propagate; a refusal is
 * logged, with a Warning Event when the name is not the set's (not derived, or shared with
 * another namespace), and returned.
 */
export async function dropTag(pass: Pass, vmName: string, tag: string): Promise<Verdict> {
  const { deps } = pass;
  const verdict = await deleteTagIfAllowed(
    { reader: deps.apiReader, registry: deps.registry! },
    setActor(pass.cs),
    vmName,
    tag,
    pass.signal,
  );
  if (!verdict.allowed) {
    pass.log.warn("keeping {vm}:{tag}: {reason}", {
      vm: vmName,
      tag,
      reason: verdict.message,
    });
    if (verdict.kind !== "claimed") {
      emit(pass, "Warning", ReasonSnapshotDeleteRefused, verdict.message);
    }
  }
  return verdict;
}
