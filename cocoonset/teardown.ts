/**
 * Teardown of a deleted CocoonSet: remember every VM name and what the pods show about their
 * snapshots, delete the owned pods (one DELETE each), wait until they are all gone (vk-cocoon may
 * still be pushing a final snapshot while a pod terminates), then drop the registry tags that may
 * exist and the snapshot policy does not keep (snapshot_ledger.ts), and release the finalizer.
 */
import { errorText, patchObject, type Pod, wrapError } from "../kube/mod.ts";
import type { CocoonSet } from "../common/apis/v1/cocoonset_types.ts";
import { CocoonSets } from "../common/apis/v1/resources.ts";
import { parseVMSpec, vmNameForPod } from "../common/meta/mod.ts";
import { deletePod, type SetPass, type Stop, stop } from "./pass.ts";
import { holdsFinalizer, releaseFinalizer, stillFinalizing } from "./finalizer.ts";
import { listOwnedPods } from "./pods.ts";
import { hibernationPodNames } from "./restore.ts";
import {
  addToLedger,
  ANNOTATION_SNAPSHOT_LEDGER,
  encodeLedger,
  type LedgerAddition,
  ledgerEvidence,
  readLedger,
  teardownTags,
} from "./snapshot_ledger.ts";
import { forgetSpecCheck } from "./validate.ts";
import { dropTag } from "./tag_gate.ts";

/**
 * CocoonSet annotation: the sorted, comma-joined VM names to clean from the registry. Written
 * before pods go away, so names survive a status that was never written or is emptied.
 */
export const ANNOTATION_DELETE_VM_NAMES = "cocoonset.cocoonstack.io/delete-vm-names";
/** How often teardown checks whether the pods are gone (ms). */
export const REQUEUE_TEARDOWN_MS = 5_000;

/** Runs one teardown pass of a CocoonSet that has a deletionTimestamp. */
export async function reconcileTeardown(pass: SetPass): Promise<Stop> {
  const { cs, deps, signal } = pass;
  // A set being deleted gets no more status writes.
  deps.writtenStatuses.delete(cs.metadata.uid ?? "");
  if (!holdsFinalizer(pass)) {
    forgetTeardown(pass);
    return stop({});
  }
  pass.log.info("tearing down cocoonset");
  let owned: Pod[];
  try {
    // Read-only from here on: no copies of every pod on every pass.
    owned = await listOwnedPods(deps.client, cs, signal, { unsafeDisableDeepCopy: true });
  } catch (err) {
    throw wrapError("list owned pods for delete", err);
  }
  try {
    // An unknown ledger cleans every tag anyway: no evidence to gather.
    const evidence = readLedger(cs) ? await teardownEvidence(pass, owned) : {};
    await stashDeleteVMNames(pass, owned, evidence);
  } catch (err) {
    throw wrapError("stash vm names", err);
  }
  // One DELETE per pod: none for a pod already terminating, and none again for a pod this
  // process already deleted while the cache has not shown its deletion yet.
  const deleted = deletedBy(pass);
  for (const pod of owned) {
    signal.throwIfAborted();
    const uid = pod.metadata.uid ?? "";
    if (pod.metadata.deletionTimestamp || deleted.has(uid)) continue;
    await deletePod(pass, pod, "pod of deleted cocoonset");
    deleted.add(uid);
  }
  // vk-cocoon may still be pushing a final snapshot while a pod terminates: the registry is
  // cleaned only once every pod is gone (a second look, as pods without a node go at once).
  const remaining = owned.length > 0
    ? await listOwnedPods(deps.client, cs, signal, { unsafeDisableDeepCopy: true })
    : owned;
  if (remaining.length > 0) {
    pass.log.info("waiting for {count} pods to terminate before registry cleanup", {
      count: remaining.length,
    });
    return stop({ requeueAfter: REQUEUE_TEARDOWN_MS });
  }
  // A cached copy can still show the finalizer after another pass removed it; clean the registry
  // only when the live object still holds it, so each VM's tags are dropped once.
  if (!await stillFinalizing(pass)) {
    forgetTeardown(pass);
    return stop({});
  }
  await cleanRegistry(pass);
  await releaseFinalizer(pass);
  forgetSpecCheck(pass);
  forgetTeardown(pass);
  return stop({});
}

/** UIDs of the pods this process deleted while tearing the pass's CocoonSet down. */
function deletedBy(pass: SetPass): Set<string> {
  const uid = pass.cs.metadata.uid ?? "";
  let set = pass.deps.teardownDeletes.get(uid);
  if (!set) pass.deps.teardownDeletes.set(uid, set = new Set());
  return set;
}

function forgetTeardown(pass: SetPass): void {
  pass.deps.teardownDeletes.delete(pass.cs.metadata.uid ?? "");
}

/**
 * What teardown can still see for the ledger: the policies the owned pods (also terminating
 * ones) carry, the VMs they show a hibernation for, and the pods a CocoonHibernation of the
 * namespace names.
 */
async function teardownEvidence(pass: SetPass, owned: readonly Pod[]): Promise<LedgerAddition> {
  const ns = pass.cs.metadata.namespace ?? "";
  const named = await hibernationPodNames(pass.deps, ns, () => true, pass.signal);
  const seen = ledgerEvidence(owned);
  return {
    policies: seen.policies,
    hibernated: [...seen.hibernated, ...[...named].map((pod) => vmNameForPod(ns, pod))],
  };
}

/**
 * Drops, for every stashed VM, the tags that may exist and the snapshot policy does not keep
 * (snapshot_ledger.ts teardownTags). Failures are logged at error level (a registry that refuses
 * deletes leaks snapshots) but never hold the CocoonSet's deletion.
 */
async function cleanRegistry(pass: SetPass): Promise<void> {
  const { cs, deps } = pass;
  const names = parseVMNamesAnnotation(cs.metadata.annotations?.[ANNOTATION_DELETE_VM_NAMES]);
  if (!deps.registry) {
    if (names.length > 0) {
      pass.log.warn("no registry configured: {count} VMs keep their snapshots", {
        count: names.length,
      });
    }
    return;
  }
  const ledger = readLedger(cs);
  for (const vm of names) {
    for (const tag of teardownTags(cs, ledger, vm)) {
      try {
        // Only names the set derives itself: the stash is an editable annotation.
        await dropTag(pass, vm, tag);
      } catch (err) {
        pass.log.error("delete snapshot {vm}:{tag} failed: {error}", {
          vm,
          tag,
          error: errorText(err),
        });
      }
    }
  }
}

/**
 * Records the union of the VM names in the status, in the previous annotation and on the live
 * pods, and adds evidence (the policies pods carry, and those of its VMs that may hold
 * `:hibernate` that are among these names) to a known snapshot ledger, in one patch written only
 * when something changes, always under the optimistic lock: both are unions with what cs shows,
 * so a copy older than an earlier write would write less, and those VMs' tags would never be
 * cleaned.
 */
export async function stashDeleteVMNames(
  pass: SetPass,
  owned: readonly Pod[],
  evidence: LedgerAddition = {},
): Promise<void> {
  const { cs } = pass;
  const have = new Set<string>([
    ...statusVMNames(cs),
    ...parseVMNamesAnnotation(cs.metadata.annotations?.[ANNOTATION_DELETE_VM_NAMES]),
  ]);
  for (const pod of owned) {
    const vm = parseVMSpec(pod).vmName;
    if (vm) have.add(vm);
  }
  const ledger = readLedger(cs);
  const nextLedger = ledger && addToLedger(ledger, {
    policies: evidence.policies,
    hibernated: evidence.hibernated?.filter((vm) => have.has(vm)),
  });
  const joined = [...have].sort().join(",");
  const namesChanged = have.size > 0 &&
    cs.metadata.annotations?.[ANNOTATION_DELETE_VM_NAMES] !== joined;
  if (!namesChanged && !nextLedger) return;
  await patchObject(pass.deps.client, CocoonSets, cs, (c) => {
    c.metadata.annotations = {
      ...c.metadata.annotations,
      ...(namesChanged ? { [ANNOTATION_DELETE_VM_NAMES]: joined } : {}),
      ...(nextLedger ? { [ANNOTATION_SNAPSHOT_LEDGER]: encodeLedger(nextLedger) } : {}),
    };
  }, { signal: pass.signal, optimisticLock: true });
}

/** The non-empty VM names recorded in the status: agents, then toolboxes. */
export function statusVMNames(cs: CocoonSet): string[] {
  const names: string[] = [];
  for (const a of cs.status?.agents ?? []) if (a.vmName) names.push(a.vmName);
  for (const t of cs.status?.toolboxes ?? []) if (t.vmName) names.push(t.vmName);
  return names;
}

/** Splits the annotation into trimmed, non-empty names. */
export function parseVMNamesAnnotation(raw: string | undefined): string[] {
  if (!raw) return [];
  return raw.split(",").map((s) => s.trim()).filter((s) => s !== "");
}
