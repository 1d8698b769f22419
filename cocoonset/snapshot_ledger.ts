/**
 * The snapshot ledger (docs/cocoonset.md, "Teardown"): which registry tags the VMs of a set may
 * have, kept on the set, so that teardown deletes only tags that can exist. It records every
 * snapshot policy the set's pods may carry (vk-cocoon pushes `:latest` on a pod's delete by that
 * pod's own policy) and the VMs that may hold `:hibernate` (pushed only on a hibernate request),
 * each before the pass that could make it true. A set without a readable ledger is unknown and
 * gets what the Go operator deleted; an unknown ledger is never started later, as it could not
 * cover older pods. Writes are optimistically locked: the ledger only grows.
 */
import { patchObject, type Pod } from "../kube/mod.ts";
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
import { doing, type SetPass } from "./pass.ts";
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
 * Starts the ledger (in place, for the finalizer patch) of a set never reconciled: pods come only
 * after the finalizer, so nothing predates it. A set with a status stays unknown.
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
 * Records the spec's policy and what the pods show (terminating ones too), before the pass may
 * create a pod under that policy or clear a hibernate request it saw.
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

/** The policy vk-cocoon applies when it deletes pod: anything but never and main-only is always. */
export function podSnapshotPolicy(pod: Pod): SnapshotPolicy {
  const p = pod.metadata.annotations?.[ANNOTATION_SNAPSHOT_POLICY];
  return p === SNAPSHOT_POLICY_NEVER || p === SNAPSHOT_POLICY_MAIN_ONLY
    ? p
    : SNAPSHOT_POLICY_ALWAYS;
}

/** Records that the VMs (or EVERY_VM) may hold `:hibernate`, before they are asked to. */
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

/** Merges addition into a known ledger and patches it when it changed. */
async function recordInLedger(pass: SetPass, add: LedgerAddition): Promise<void> {
  const current = readLedger(pass.cs);
  if (!current) return;
  const next = addToLedger(current, add);
  if (!next) return;
  await doing(
    "record snapshot ledger",
    patchObject(pass.deps.client, CocoonSets, pass.cs, (c) => {
      c.metadata.annotations = {
        ...c.metadata.annotations,
        [ANNOTATION_SNAPSHOT_LEDGER]: encodeLedger(next),
      };
    }, { optimisticLock: true, signal: pass.signal }),
  );
}

/** Whether pod shows its VM may have pushed `:hibernate` (request, lifecycle, restore). */
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
 * current policy does not keep it and a recorded one may have pushed it. An unknown ledger gives
 * what the Go operator deleted.
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

/** Whether teardown keeps vmName's `:latest` under the current policy (main-only: slot 0's). */
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

/** vk-cocoon's main-only rule in the build it pins: a trailing `-<integer>` of 0 (`x-0` too). */
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
