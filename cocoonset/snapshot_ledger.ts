/**
 * The snapshot ledger: which registry tags the VMs of a CocoonSet may have, kept on the set
 * itself so that teardown deletes only tags that can exist (one DELETE per tag that may be
 * there, none for tags that cannot be).
 *
 * Who pushes what (the contract: cocoon-common meta.ShouldSnapshotVM, vk-cocoon's delete and
 * hibernate paths):
 * - `:latest` is pushed by vk-cocoon when it deletes a pod whose VM exists and whose own
 *   `cocoonset.cocoonstack.io/snapshot-policy` annotation snapshots it: `never` none,
 *   `main-only` the main only (v0.3.0 decides by role; the vk-cocoon build in use by the VM
 *   name's trailing number being 0, which a toolbox named `x-0` also matches), anything else
 *   (`always`, absent, unknown) every VM. A pod carries the policy of the spec it was built from
 *   unless someone edits the annotation (which also drifts it, so it is deleted), so a VM can have
 *   `:latest` only if some pod of the set carried a policy that snapshots it — including pods
 *   long gone (drift, scale-down, rebuilds, a person's `kubectl delete`).
 * - `:hibernate` is pushed only when a pod of the VM is asked to hibernate
 *   (`vm.cocoonstack.io/hibernate=true`: suspend, migration, a CocoonHibernation). The flows that
 *   wake a VM drop it again, but a retain unsuspend and a pod deleted while hibernated leave it.
 *
 * So the ledger records (a) every snapshot policy pods of the set carried: written with the
 * finalizer before the first pod, again whenever the spec's policy is new, always before the
 * pass that may create pods under it, and whenever a pass sees a pod carrying another one (an
 * edited annotation), before that pass may delete it; and (b) the VMs that may hold `:hibernate`:
 * written before this operator asks a pod to hibernate (suspend records every VM as `*`, a
 * migration the main), and whenever a pass sees a pod showing that someone else did (the
 * hibernate request, a hibernating/hibernated lifecycle, a restore from `:hibernate`). Teardown
 * adds what its last look at the pods and at the namespace's CocoonHibernations shows, before
 * any pod is deleted.
 *
 * A set without a ledger (created by an operator version without it, or whose annotation was
 * edited into something unreadable) is unknown: teardown then deletes what the Go operator
 * deleted. An unknown ledger is never started later, because it could not cover pods created
 * before it.
 *
 * Writes use the optimistic lock: the ledger only grows, and a write from a stale cached copy
 * would otherwise drop what a previous pass added.
 *
 * @module
 */
import { patchObject, type Pod, wrapError } from "../kube/mod.ts";
import type { CocoonSet } from "../common/apis/v1/cocoonset_types.ts";
import { CocoonSets } from "../common/apis/v1/resources.ts";
import {
  isValidSnapshotPolicy,
  SNAPSHOT_POLICY_ALWAYS,
  SNAPSHOT_POLICY_MAIN_ONLY,
  SNAPSHOT_POLICY_NEVER,
  type SnapshotPolicy,
  snapshotPolicyOrDefault,
} from "../common/apis/v1/enums.ts";
import {
  ANNOTATION_SNAPSHOT_POLICY,
  extractAgentSlot,
  LIFECYCLE_STATE_HIBERNATED,
  LIFECYCLE_STATE_HIBERNATING,
  parseVMSpec,
  readHibernateState,
  readLifecycleState,
  readRestoreFromHibernate,
} from "../common/meta/mod.ts";
import type { SetPass } from "./pass.ts";
import { DEFAULT_SNAPSHOT_TAG, HIBERNATE_SNAPSHOT_TAG } from "../snapshot/registry.ts";

/** CocoonSet annotation holding the ledger as JSON: `{"policies":[…],"hibernated":[…]}`. */
export const ANNOTATION_SNAPSHOT_LEDGER = "cocoonset.cocoonstack.io/snapshot-ledger";
/** The `hibernated` entry standing for every VM of the set (a suspend hibernates them all). */
export const EVERY_VM = "*";

/** What the ledger knows. */
export interface SnapshotLedger {
  /** Snapshot policies (as vk-cocoon reads them) some pod of the set may have carried; sorted. */
  policies: SnapshotPolicy[];
  /** VMs that may hold `:hibernate`, or EVERY_VM; sorted. */
  hibernated: string[];
}

/** The ledger of cs, or undefined when it is unknown (absent or unreadable). */
export function readLedger(cs: CocoonSet): SnapshotLedger | undefined {
  const raw = cs.metadata.annotations?.[ANNOTATION_SNAPSHOT_LEDGER];
  if (raw === undefined) return undefined;
  let parsed: unknown;
  try {
    parsed = JSON.parse(raw);
  } catch {
    return undefined;
  }
  if (typeof parsed !== "object" || parsed === null) return undefined;
  const { policies, hibernated } = parsed as Record<string, unknown>;
  if (!Array.isArray(policies) || !policies.every(isValidSnapshotPolicy)) return undefined;
  if (!Array.isArray(hibernated) || !hibernated.every((h) => typeof h === "string")) {
    return undefined;
  }
  return normalize({ policies, hibernated });
}

/** The annotation value of a ledger (canonical: sorted, no duplicates). */
export function encodeLedger(l: SnapshotLedger): string {
  const n = normalize(l);
  return JSON.stringify({ policies: n.policies, hibernated: n.hibernated });
}

/** The ledger of a set no pod was created for yet: its current policy, nothing hibernated. */
export function newLedger(cs: CocoonSet): SnapshotLedger {
  return { policies: [snapshotPolicyOrDefault(cs.spec.snapshotPolicy)], hibernated: [] };
}

/**
 * Starts the ledger of a set that is getting its finalizer, if it has none and was never
 * reconciled (no status): pods are created only after the finalizer, so nothing can predate it.
 * A set reconciled before (an earlier operator version) stays unknown. Mutates cs in place, for
 * the finalizer patch.
 */
export function startLedger(cs: CocoonSet): void {
  if (cs.metadata.annotations?.[ANNOTATION_SNAPSHOT_LEDGER] !== undefined) return;
  if (cs.status?.observedGeneration || cs.status?.phase) return;
  cs.metadata.annotations = {
    ...cs.metadata.annotations,
    [ANNOTATION_SNAPSHOT_LEDGER]: encodeLedger(newLedger(cs)),
  };
}

/**
 * Adds the spec's current policy and what the given pods show (ledgerEvidence), and writes the
 * ledger when that changes it. A pass calls this before it may create or delete a pod.
 */
export async function syncLedger(pass: SetPass, pods: readonly Pod[]): Promise<void> {
  const seen = ledgerEvidence(pods);
  await recordInLedger(pass, {
    policies: [snapshotPolicyOrDefault(pass.cs.spec.snapshotPolicy), ...seen.policies],
    hibernated: seen.hibernated,
  });
}

/** What pods show for the ledger: the policies they carry, the VMs that may hold `:hibernate`. */
export function ledgerEvidence(pods: readonly Pod[]): Required<LedgerAddition> {
  return { policies: pods.map(podSnapshotPolicy), hibernated: hibernatedVMsOf(pods) };
}

/**
 * The policy vk-cocoon applies when it deletes pod: its snapshot-policy annotation, where
 * anything but `never` and `main-only` (absent included) snapshots every VM.
 */
export function podSnapshotPolicy(pod: Pod): SnapshotPolicy {
  const p = pod.metadata.annotations?.[ANNOTATION_SNAPSHOT_POLICY];
  return p === SNAPSHOT_POLICY_NEVER || p === SNAPSHOT_POLICY_MAIN_ONLY
    ? p
    : SNAPSHOT_POLICY_ALWAYS;
}

/**
 * Records that the given VMs (or EVERY_VM) may hold `:hibernate`; called before the hibernate
 * request is sent, so a crash in between leaves the ledger on the safe side.
 */
export async function recordHibernation(pass: SetPass, vms: readonly string[]): Promise<void> {
  await recordInLedger(pass, { hibernated: vms });
}

/** What to add to a ledger. */
export interface LedgerAddition {
  policies?: readonly SnapshotPolicy[];
  hibernated?: readonly string[];
}

/** The ledger with addition merged in, or undefined when nothing is new. */
export function addToLedger(l: SnapshotLedger, add: LedgerAddition): SnapshotLedger | undefined {
  const policies = new Set(l.policies);
  const hibernated = new Set(l.hibernated);
  let changed = false;
  for (const p of add.policies ?? []) {
    if (policies.has(p)) continue;
    policies.add(p);
    changed = true;
  }
  if (!hibernated.has(EVERY_VM)) {
    for (const vm of add.hibernated ?? []) {
      if (vm === "" || hibernated.has(vm)) continue;
      hibernated.add(vm);
      changed = true;
    }
  }
  if (!changed) return undefined;
  return normalize({ policies: [...policies], hibernated: [...hibernated] });
}

/** Merges addition into the set's ledger and patches it when it changed; unknown stays unknown. */
async function recordInLedger(pass: SetPass, add: LedgerAddition): Promise<void> {
  const current = readLedger(pass.cs);
  if (!current) return;
  const next = addToLedger(current, add);
  if (!next) return;
  try {
    await patchObject(pass.deps.client, CocoonSets, pass.cs, (c) => {
      c.metadata.annotations = {
        ...c.metadata.annotations,
        [ANNOTATION_SNAPSHOT_LEDGER]: encodeLedger(next),
      };
    }, { optimisticLock: true, signal: pass.signal });
  } catch (err) {
    throw wrapError("record snapshot ledger", err);
  }
}

/**
 * Whether a pod shows that its VM may have pushed `:hibernate`: a hibernate request, a
 * hibernating or hibernated lifecycle, or a restore from the snapshot.
 */
export function showsHibernation(pod: Pod): boolean {
  if (readHibernateState(pod) || readRestoreFromHibernate(pod)) return true;
  const state = readLifecycleState(pod);
  return state === LIFECYCLE_STATE_HIBERNATING || state === LIFECYCLE_STATE_HIBERNATED;
}

/** The VM names of the pods that show hibernate evidence. */
export function hibernatedVMsOf(pods: readonly Pod[]): string[] {
  const out: string[] = [];
  for (const pod of pods) {
    if (!showsHibernation(pod)) continue;
    const vm = parseVMSpec(pod).vmName;
    if (vm) out.push(vm);
  }
  return out;
}

/**
 * The tags teardown deletes for vmName: `:hibernate` when the VM may hold it, `:latest` when the
 * current policy does not keep it and some recorded policy may have pushed it. An unknown ledger
 * (undefined) gives what the Go operator deleted.
 */
export function teardownTags(
  cs: CocoonSet,
  ledger: SnapshotLedger | undefined,
  vmName: string,
): string[] {
  const tags: string[] = [];
  if (!ledger || ledger.hibernated.includes(EVERY_VM) || ledger.hibernated.includes(vmName)) {
    tags.push(HIBERNATE_SNAPSHOT_TAG);
  }
  if (!shouldKeepLatestTag(cs, vmName) && (!ledger || mayHoldLatest(cs, ledger, vmName))) {
    tags.push(DEFAULT_SNAPSHOT_TAG);
  }
  return tags;
}

/** Whether a pod created under one of the ledger's policies may have pushed vmName's `:latest`. */
export function mayHoldLatest(cs: CocoonSet, ledger: SnapshotLedger, vmName: string): boolean {
  return ledger.policies.some((p) => {
    switch (p) {
      case "always":
        return true;
      case "main-only":
        return isMainVM(cs, vmName) || trailingNumberIsZero(vmName);
      default:
        return false;
    }
  });
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
      return isMainVM(cs, vmName);
    default:
      return true;
  }
}

function isMainVM(cs: CocoonSet, vmName: string): boolean {
  return extractAgentSlot(cs.metadata.namespace ?? "", cs.metadata.name ?? "", vmName) === 0;
}

/**
 * vk-cocoon's main-only rule in the build it pins (an earlier cocoon-common): the VM name's
 * trailing `-<integer>` is 0. It also matches a toolbox whose name ends in `-0`.
 */
function trailingNumberIsZero(vmName: string): boolean {
  const dash = vmName.lastIndexOf("-");
  if (dash < 0) return false;
  const tail = vmName.slice(dash + 1);
  return /^[+-]?[0-9]+$/.test(tail) && Number(tail) === 0;
}

function normalize(l: SnapshotLedger): SnapshotLedger {
  const hibernated = l.hibernated.includes(EVERY_VM) ? [EVERY_VM] : [...new Set(l.hibernated)];
  return {
    policies: [...new Set(l.policies)].sort(),
    hibernated: hibernated.sort(),
  };
}
