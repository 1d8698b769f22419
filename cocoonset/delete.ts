/**
 * Teardown of a deleted CocoonSet: remember every VM name, delete the owned pods, wait until they
 * are all gone (vk-cocoon may still be pushing a final snapshot while a pod terminates), then drop
 * the registry tags the snapshot policy does not keep, and release the finalizer.
 */
import type { Result } from "../kube/reconcile.ts";
import type { Pod } from "../kube/core.ts";
import { patchObject } from "../kube/client_patch.ts";
import { removeFinalizer } from "../kube/controllerutil.ts";
import { isNotFound, wrapError } from "../kube/errors.ts";
import type { CocoonSet } from "../common/apis/v1/cocoonset_types.ts";
import { CocoonSets } from "../common/apis/v1/resources.ts";
import { snapshotPolicyOrDefault } from "../common/apis/v1/enums.ts";
import {
  DefaultSnapshotTag,
  extractAgentSlot,
  HibernateSnapshotTag,
  parseVMSpec,
} from "../common/meta/mod.ts";
import { deletePod, type Pass } from "./pass.ts";
import { listOwnedPods } from "./ownership.ts";
import { forgetSpecCheck } from "./validate.ts";

/** The CocoonSet's finalizer: held until its pods are gone and its registry tags cleaned. */
export const finalizerName = "cocoonset.cocoonstack.io/finalizer";
/**
 * CocoonSet annotation: the sorted, comma-joined VM names to clean from the registry. Written
 * before pods go away, so names survive a status that was never written or is emptied.
 */
export const AnnotationDeleteVMNames = "cocoonset.cocoonstack.io/delete-vm-names";
/** How often teardown checks whether the pods are gone (ms). */
export const requeueTeardownMs = 5_000;

/** Runs one teardown pass of a CocoonSet that has a deletionTimestamp. */
export async function reconcileDelete(pass: Pass): Promise<Result> {
  const { cs, deps, signal } = pass;
  if (!cs.metadata.finalizers?.includes(finalizerName)) return {};
  pass.log.info("tearing down cocoonset");
  let owned: Pod[];
  try {
    owned = await listOwnedPods(deps.client, cs, signal);
  } catch (err) {
    throw wrapError("list owned pods for delete", err);
  }
  try {
    await stashDeleteVMNames(pass, owned);
  } catch (err) {
    throw wrapError("stash vm names", err);
  }
  // One DELETE per pod; a pod already terminating needs none (its deletion is under way).
  for (const pod of owned) {
    signal.throwIfAborted();
    if (pod.metadata.deletionTimestamp) continue;
    await deletePod(pass, pod, "pod of deleted cocoonset");
  }
  // vk-cocoon may still be pushing a final snapshot while a pod terminates: the registry is
  // cleaned only once every pod is gone (a second look, as pods without a node go at once).
  const remaining = owned.length > 0 ? await listOwnedPods(deps.client, cs, signal) : owned;
  if (remaining.length > 0) {
    pass.log.info("waiting for {count} pods to terminate before registry cleanup", {
      count: remaining.length,
    });
    return { requeueAfter: requeueTeardownMs };
  }
  // A cached copy can still show the finalizer after another pass removed it; clean the registry
  // only when the live object still holds it, so each VM's tags are dropped once.
  if (!await stillFinalizing(pass)) return {};
  await cleanRegistry(pass);
  await patchObject(deps.client, CocoonSets, cs, (c) => {
    removeFinalizer(c, finalizerName);
  }, { optimisticLock: true, signal });
  forgetSpecCheck(pass);
  return {};
}

/** Whether the live CocoonSet still exists with our finalizer (an uncached read). */
async function stillFinalizing(pass: Pass): Promise<boolean> {
  const { cs, deps, signal } = pass;
  try {
    const live = await deps.apiReader.get(
      CocoonSets,
      cs.metadata.namespace ?? "",
      cs.metadata.name ?? "",
      { signal },
    );
    return live.metadata.uid === cs.metadata.uid &&
      (live.metadata.finalizers?.includes(finalizerName) ?? false);
  } catch (err) {
    if (isNotFound(err)) return false;
    throw wrapError("confirm cocoonset before registry cleanup", err);
  }
}

/**
 * Drops `:hibernate` of every stashed VM (nothing can restore from it any more) and `:latest`
 * unless the snapshot policy keeps it. Failures are logged at error level (a registry that
 * refuses deletes leaks snapshots) but never hold the CocoonSet's deletion.
 */
async function cleanRegistry(pass: Pass): Promise<void> {
  const { cs, deps, signal } = pass;
  const names = parseVMNamesAnnotation(cs.metadata.annotations?.[AnnotationDeleteVMNames]);
  if (!deps.registry) {
    if (names.length > 0) {
      pass.log.warn("no registry configured: {count} VMs keep their snapshots", {
        count: names.length,
      });
    }
    return;
  }
  for (const vm of names) {
    const tags = [HibernateSnapshotTag];
    if (!shouldKeepLatestTag(cs, vm)) tags.push(DefaultSnapshotTag);
    for (const tag of tags) {
      try {
        await deps.registry.deleteManifest(vm, tag, signal);
      } catch (err) {
        pass.log.error("delete snapshot {vm}:{tag} failed: {error}", {
          vm,
          tag,
          error: String(err),
        });
      }
    }
  }
}

/**
 * Records the union of the VM names in the status, in the previous annotation and on the live
 * pods, writing the annotation only when it changes.
 */
export async function stashDeleteVMNames(pass: Pass, owned: readonly Pod[]): Promise<void> {
  const { cs } = pass;
  const have = new Set<string>([
    ...statusVMNames(cs),
    ...parseVMNamesAnnotation(cs.metadata.annotations?.[AnnotationDeleteVMNames]),
  ]);
  for (const pod of owned) {
    const vm = parseVMSpec(pod).vmName;
    if (vm) have.add(vm);
  }
  if (have.size === 0) return;
  const joined = [...have].sort().join(",");
  if (cs.metadata.annotations?.[AnnotationDeleteVMNames] === joined) return;
  await patchObject(pass.deps.client, CocoonSets, cs, (c) => {
    c.metadata.annotations = { ...c.metadata.annotations, [AnnotationDeleteVMNames]: joined };
  }, { signal: pass.signal });
}

/** The non-empty VM names recorded in the status: agents, then toolboxes. */
export function statusVMNames(cs: CocoonSet): string[] {
  const names: string[] = [];
  for (const a of cs.status?.agents ?? []) if (a.vmName) names.push(a.vmName);
  for (const t of cs.status?.toolboxes ?? []) if (t.vmName) names.push(t.vmName);
  return names;
}

/**
 * Whether teardown keeps vmName's `:latest`: always under "always", never under "never", and
 * under "main-only" only for the main agent's VM (slot 0 of this set).
 */
export function shouldKeepLatestTag(cs: CocoonSet, vmName: string): boolean {
  switch (snapshotPolicyOrDefault(cs.spec.snapshotPolicy)) {
    case "never":
      return false;
    case "main-only":
      return extractAgentSlot(cs.metadata.namespace ?? "", cs.metadata.name ?? "", vmName) === 0;
    default:
      return true;
  }
}

/** Splits the annotation into trimmed, non-empty names. */
export function parseVMNamesAnnotation(raw: string | undefined): string[] {
  if (!raw) return [];
  return raw.split(",").map((s) => s.trim()).filter((s) => s !== "");
}
