/**
 * Dropping a VM's `:hibernate` tag once nothing needs it (a woken VM, a deleted last request).
 * Best effort: a failure is logged at error level (a registry that refuses deletes leaks
 * snapshots and someone should know) but never fails the step that asked for it.
 */
import { getLogger } from "@logtape/logtape";
import type { CocoonHibernation } from "../common/apis/v1/cocoonhibernation_types.ts";
import { HibernateSnapshotTag } from "../common/meta/keys.ts";
import { errorMessage } from "../kube/errors.ts";
import type { Registry } from "../snapshot/registry.ts";

const log = getLogger(["cocoon-operator", "hibernation"]);

/** Deletes `<vmName>:hibernate`, logging (not throwing) a failure; an abort still throws. */
export async function dropHibernateTag(
  registry: Registry,
  vmName: string,
  hib: CocoonHibernation,
  signal: AbortSignal,
): Promise<void> {
  try {
    await registry.deleteManifest(vmName, HibernateSnapshotTag, signal);
  } catch (err) {
    signal.throwIfAborted();
    log.error("delete hibernate snapshot {vm}:{tag}: {error}", {
      vm: vmName,
      tag: HibernateSnapshotTag,
      error: errorMessage(err),
      hibernation: `${hib.metadata.namespace}/${hib.metadata.name}`,
    });
  }
}
