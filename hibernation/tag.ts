/**
 * Dropping a VM's `:hibernate` tag on behalf of a CocoonHibernation (a woken VM, a deleted
 * request), always through the snapshot gate (snapshotgate/): the tag goes only when the request
 * derives the VM name from its own namespace and target pod and no other claimant still needs it.
 * A refusal is logged with the claimants (who keep the tag and drop it in their own flow);
 * a registry failure is logged at error level (a registry that refuses deletes leaks snapshots)
 * but never fails the step that asked for it.
 */
import { getLogger } from "@logtape/logtape";
import type { CocoonHibernation } from "../common/apis/v1/cocoonhibernation_types.ts";
import { errorMessage } from "../kube/mod.ts";
import {
  type Actor,
  deleteTagIfAllowed,
  type GateDeps,
  type Verdict,
} from "../snapshotgate/mod.ts";
import { HIBERNATE_SNAPSHOT_TAG } from "../snapshot/registry.ts";

const log = getLogger(["cocoon-operator", "hibernation"]);

/** What a gated tag drop reads and deletes with (the gate's uncached reads, index, registry). */
export type TagDeps = GateDeps;

/** The gate's actor for a request: its namespace, name and target pod. */
export function requestActor(hib: CocoonHibernation): Actor {
  return {
    kind: "CocoonHibernation",
    namespace: hib.metadata.namespace ?? "",
    name: hib.metadata.name ?? "",
    uid: hib.metadata.uid,
    podName: hib.spec?.podRef?.name ?? "",
  };
}

/**
 * Deletes `<vmName>:hibernate` when the gate allows it, logging (not throwing) a refusal or a
 * failure; an abort still throws. The verdict is returned (undefined after a registry failure).
 */
export async function dropHibernateTag(
  deps: TagDeps,
  vmName: string,
  hib: CocoonHibernation,
  signal: AbortSignal,
): Promise<Verdict | undefined> {
  const hibernation = `${hib.metadata.namespace}/${hib.metadata.name}`;
  try {
    const verdict = await deleteTagIfAllowed(
      deps,
      requestActor(hib),
      vmName,
      HIBERNATE_SNAPSHOT_TAG,
      signal,
    );
    if (!verdict.allowed) {
      log.warn("CocoonHibernation {hibernation} keeps {vm}:{tag}: {reason}", {
        vm: vmName,
        tag: HIBERNATE_SNAPSHOT_TAG,
        reason: verdict.message,
        hibernation,
      });
    }
    return verdict;
  } catch (err) {
    signal.throwIfAborted();
    log.error("delete hibernate snapshot {vm}:{tag} for CocoonHibernation {hibernation}: {error}", {
      vm: vmName,
      tag: HIBERNATE_SNAPSHOT_TAG,
      error: errorMessage(err),
      hibernation,
    });
    return undefined;
  }
}
