/**
 * Teardown of a deleted CocoonSet: stash the VM names and ledger evidence, delete the pods (one
 * DELETE each), wait until they are gone (vk-cocoon may push while a pod terminates), drop the
 * tags that may exist and the policy does not keep, release the finalizer.
 */
import { containsFinalizer, errorText, patchObject, type Pod } from "../kube/mod.ts";
import type { CocoonSet } from "../common/apis/v1/cocoonset_types.ts";
import { CocoonSets } from "../common/apis/v1/resources.ts";
import { parseVMSpec, vmNameForPod } from "../common/meta/mod.ts";
import { deletePod, doing, POLL_MS, type SetPass, type Stop, stop } from "./pass.ts";
import { FINALIZER_NAME, releaseFinalizer, stillFinalizing } from "./finalizer.ts";
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
import { dropTag } from "./tag_gate.ts";

/** CocoonSet annotation: the comma-joined VM names to clean, kept before any pod goes away. */
export const ANNOTATION_DELETE_VM_NAMES = "cocoonset.cocoonstack.io/delete-vm-names";

/** The Teardown step of a CocoonSet that has a deletionTimestamp. */
export async function reconcileTeardown(pass: SetPass): Promise<Stop> {
  const { cs, deps, signal } = pass;
  const uid = cs.metadata.uid ?? "";
  // What the process remembers of a running set goes; teardown writes no status, checks no spec.
  deps.writtenStatuses.delete(uid);
  deps.specChecks.delete(uid);
  if (!containsFinalizer(cs, FINALIZER_NAME)) return forgetTeardown(pass);
  pass.log.info("tearing down cocoonset");
  // Read-only from here on: no copies of every pod on every pass.
  const list = () => listOwnedPods(deps.client, cs, signal, { unsafeDisableDeepCopy: true });
  const owned = await doing("list owned pods for delete", list());
  await doing("stash vm names", stashTeardown(pass, owned));
  let deleted = deps.teardownDeletes.get(uid);
  if (!deleted) deps.teardownDeletes.set(uid, deleted = new Set());
  for (const pod of owned) {
    signal.throwIfAborted();
    const podUid = pod.metadata.uid ?? "";
    if (pod.metadata.deletionTimestamp || deleted.has(podUid)) continue;
    await deletePod(pass, pod, "pod of deleted cocoonset");
    deleted.add(podUid);
  }
  // A second look: pods without a node go at once.
  const remaining = owned.length > 0 ? await list() : owned;
  if (remaining.length > 0) {
    pass.log.info("waiting for {count} pods to terminate before registry cleanup", {
      count: remaining.length,
    });
    return stop({ requeueAfter: POLL_MS });
  }
  // A cached copy can still show the finalizer another pass removed: each VM's tags go once.
  if (!await stillFinalizing(pass)) return forgetTeardown(pass);
  await cleanRegistry(pass);
  await releaseFinalizer(pass);
  return forgetTeardown(pass);
}

function forgetTeardown(pass: SetPass): Stop {
  pass.deps.teardownDeletes.delete(pass.cs.metadata.uid ?? "");
  return stop({});
}

/**
 * Stashes the VM names with what teardown can still see for a known ledger: the owned pods'
 * evidence (terminating ones too) and the pods the namespace's CocoonHibernations name.
 */
async function stashTeardown(pass: SetPass, owned: readonly Pod[]): Promise<void> {
  if (!readLedger(pass.cs)) return await stashDeleteVMNames(pass, owned);
  const ns = pass.cs.metadata.namespace ?? "";
  const seen = ledgerEvidence(owned);
  for (const pod of await hibernationPodNames(pass, () => true)) {
    seen.hibernated.push(vmNameForPod(ns, pod));
  }
  await stashDeleteVMNames(pass, owned, seen);
}

/**
 * Drops each stashed VM's tags that may exist and the policy does not keep; a failure is logged at
 * error level (it leaks a snapshot) but never holds the deletion.
 */
async function cleanRegistry(pass: SetPass): Promise<void> {
  const { cs, deps } = pass;
  const names = stashedVMNames(cs);
  const count = names.length;
  if (!deps.registry) {
    if (count > 0) {
      pass.log.warn("no registry configured: {count} VMs keep their snapshots", { count });
    }
    return;
  }
  const ledger = readLedger(cs);
  for (const vm of names) {
    for (const tag of teardownTags(cs, ledger, vm)) {
      try {
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
 * Records the union of the VM names in the status, the stash and the pods, with evidence for a
 * known ledger (for these VMs only), in one patch when something changed. Locked: both are unions,
 * so a write from an older copy would lose names whose tags then leak.
 */
export async function stashDeleteVMNames(
  pass: SetPass,
  owned: readonly Pod[],
  evidence: LedgerAddition = {},
): Promise<void> {
  const { cs } = pass;
  const have = new Set([
    ...(cs.status?.agents ?? []).map((a) => a.vmName),
    ...(cs.status?.toolboxes ?? []).map((t) => t.vmName),
    ...stashedVMNames(cs),
    ...owned.map((pod) => parseVMSpec(pod).vmName),
  ].filter((vm) => vm !== undefined && vm !== ""));
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

/** The names the delete-vm-names annotation holds (trimmed, non-empty). */
function stashedVMNames(cs: CocoonSet): string[] {
  const raw = cs.metadata.annotations?.[ANNOTATION_DELETE_VM_NAMES] ?? "";
  return raw.split(",").map((s) => s.trim()).filter((s) => s !== "");
}
