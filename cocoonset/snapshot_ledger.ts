/**
 * The snapshot ledger (docs/cocoonset.md, "Teardown"): every snapshot policy the set's pods may
 * carry and the VMs that may hold `:hibernate`, each recorded before the pass that could make it
 * true, so teardown deletes only tags that can exist. An unknown ledger (absent, unreadable) gets
 * what the Go operator deleted and is never started later. Writes are locked: it only grows.
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

/** What the ledger knows; both lists sorted. */
export interface SnapshotLedger {
  /** Snapshot policies (as vk-cocoon reads them) some pod of the set may have carried. */
  policies: SnapshotPolicy[];
  /** VMs that may hold `:hibernate`, or EVERY_VM. */
  hibernated: string[];
}

/** What to add to a ledger. */
export interface LedgerAddition {
  policies?: readonly SnapshotPolicy[];
  hibernated?: readonly string[];
}

/** The ledger of cs, or undefined when it is unknown (absent or unreadable). */
export function readLedger(cs: CocoonSet): SnapshotLedger | undefined {
  const raw = cs.metadata.annotations?.[ANNOTATION_SNAPSHOT_LEDGER];
  if (raw === undefined) return undefined;
  let parsed: { policies?: unknown; hibernated?: unknown } | null;
  try {
    parsed = JSON.parse(raw);
  } catch {
    return undefined;
  }
  const { policies, hibernated } = typeof parsed === "object" && parsed !== null ? parsed : {};
  const valid = Array.isArray(policies) && policies.every(isValidSnapshotPolicy) &&
    Array.isArray(hibernated) && hibernated.every((h) => typeof h === "string");
  return valid ? normalize({ policies, hibernated }) : undefined;
}

/** The annotation value of a ledger (canonical: sorted, no duplicates). */
export function encodeLedger(l: SnapshotLedger): string {
  const { policies, hibernated } = normalize(l);
  return JSON.stringify({ policies, hibernated });
}

/**
 * Starts the ledger (in place, for the finalizer patch, before any pod) of a set never reconciled;
 * a set with a status stays unknown.
 */
export function startLedger(cs: CocoonSet): void {
  if (cs.metadata.annotations?.[ANNOTATION_SNAPSHOT_LEDGER] !== undefined) return;
  if (cs.status?.observedGeneration || cs.status?.phase) return;
  const ledger = { policies: [snapshotPolicyOrDefault(cs.spec.snapshotPolicy)], hibernated: [] };
  cs.metadata.annotations = {
    ...cs.metadata.annotations,
    [ANNOTATION_SNAPSHOT_LEDGER]: encodeLedger(ledger),
  };
}

/** Records the spec's policy and what the pods show, before the pass may act on either. */
export async function syncLedger(pass: SetPass, pods: readonly Pod[]): Promise<void> {
  const seen = ledgerEvidence(pods);
  const policy = snapshotPolicyOrDefault(pass.cs.spec.snapshotPolicy);
  await recordInLedger(pass, { policies: [policy, ...seen.policies], hibernated: seen.hibernated });
}

/** Records that the VMs (or EVERY_VM) may hold `:hibernate`, before they are asked to. */
export async function recordHibernation(pass: SetPass, vms: readonly string[]): Promise<void> {
  await recordInLedger(pass, { hibernated: vms });
}

/** What pods show for the ledger: their policies, and the VMs that may have pushed `:hibernate`. */
export function ledgerEvidence(
  pods: readonly Pod[],
): { policies: SnapshotPolicy[]; hibernated: string[] } {
  return { policies: pods.map(podSnapshotPolicy), hibernated: hibernatedVMsOf(pods) };
}

/** The policy vk-cocoon applies when it deletes pod: anything but never and main-only is always. */
export function podSnapshotPolicy(pod: Pod): SnapshotPolicy {
  const p = pod.metadata.annotations?.[ANNOTATION_SNAPSHOT_POLICY];
  return p === SNAPSHOT_POLICY_NEVER || p === SNAPSHOT_POLICY_MAIN_ONLY
    ? p
    : SNAPSHOT_POLICY_ALWAYS;
}

/** The VMs of pods with a hibernate request, a hibernating/hibernated lifecycle or a restore. */
export function hibernatedVMsOf(pods: readonly Pod[]): string[] {
  return pods.filter((pod) => {
    const state = readLifecycleState(pod);
    return readHibernateState(pod) || readRestoreFromHibernate(pod) ||
      state === LIFECYCLE_STATE_HIBERNATING || state === LIFECYCLE_STATE_HIBERNATED;
  }).map((pod) => parseVMSpec(pod).vmName).filter((vm) => vm !== "");
}

/** The ledger with addition merged in, or undefined when nothing is new. */
export function addToLedger(l: SnapshotLedger, add: LedgerAddition): SnapshotLedger | undefined {
  const next = normalize({
    policies: [...l.policies, ...add.policies ?? []],
    hibernated: l.hibernated.includes(EVERY_VM)
      ? l.hibernated
      : [...l.hibernated, ...(add.hibernated ?? []).filter((vm) => vm !== "")],
  });
  return encodeLedger(next) === encodeLedger(l) ? undefined : next;
}

/** Merges addition into a known ledger and patches it when it changed. */
async function recordInLedger(pass: SetPass, add: LedgerAddition): Promise<void> {
  const current = readLedger(pass.cs);
  const next = current && addToLedger(current, add);
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

/**
 * The tags teardown deletes for vmName: `:hibernate` when the VM may hold it, `:latest` when the
 * policy does not keep it and a recorded one may have pushed it (unknown ledger: Go's choice).
 */
export function teardownTags(
  cs: CocoonSet,
  ledger: SnapshotLedger | undefined,
  vmName: string,
): string[] {
  const isMain =
    extractAgentSlot(cs.metadata.namespace ?? "", cs.metadata.name ?? "", vmName) === 0;
  const policy = snapshotPolicyOrDefault(cs.spec.snapshotPolicy);
  const keepLatest = policy === "main-only" ? isMain : policy !== "never";
  // vk-cocoon's main-only rule in the build it pins: a trailing `-<integer>` of 0 (`x-0` too).
  const tail = vmName.includes("-") ? vmName.slice(vmName.lastIndexOf("-") + 1) : "";
  const mainOnlyPushes = isMain || (/^[+-]?[0-9]+$/.test(tail) && Number(tail) === 0);
  const mayHoldLatest = !ledger ||
    ledger.policies.some((p) => p === "always" || (p === "main-only" && mainOnlyPushes));
  const mayHoldHibernate = !ledger || ledger.hibernated.includes(EVERY_VM) ||
    ledger.hibernated.includes(vmName);
  return [
    ...(mayHoldHibernate ? [HIBERNATE_SNAPSHOT_TAG] : []),
    ...(!keepLatest && mayHoldLatest ? [DEFAULT_SNAPSHOT_TAG] : []),
  ];
}

function normalize(l: SnapshotLedger): SnapshotLedger {
  const hibernated = l.hibernated.includes(EVERY_VM) ? [EVERY_VM] : [...new Set(l.hibernated)];
  return { policies: [...new Set(l.policies)].sort(), hibernated: hibernated.sort() };
}
