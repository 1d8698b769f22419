/**
 * The CocoonSet side of the snapshot gate (snapshotgate/): every tag this reconciler deletes goes
 * through dropTag, every hibernate ask through hibernateRefused; a refused drop gets a Warning and
 * the set's flow asks again on its next pass.
 */
import type { CocoonSet } from "../common/apis/v1/cocoonset_types.ts";
import type { Pod } from "../kube/mod.ts";
import { parseVMSpec } from "../common/meta/mod.ts";
import {
  actingRefusal,
  type Actor,
  deleteTagIfAllowed,
  setToolboxNames,
  type Verdict,
} from "../snapshotgate/mod.ts";
import { claimSources, emit, podRef, type SetPass } from "./pass.ts";

/** Warning reason: a tag was not deleted because the set cannot own its VM name. */
export const REASON_SNAPSHOT_DELETE_REFUSED = "SnapshotDeleteRefused";
/** Warning reason: a pod was not asked to hibernate because the set cannot own its VM name. */
export const REASON_HIBERNATE_REFUSED = "HibernateRefused";
/** Warning reason: a tag the set's flow drops is still needed by another claimant; retried. */
export const REASON_SNAPSHOT_DELETE_DEFERRED = "SnapshotDeleteDeferred";
/** The shortest gap between two SnapshotDeleteDeferred Events of one tag with one message. */
export const DEFERRED_DROP_EVENT_INTERVAL_MS = 5_000;
/** Remembered deferrals beyond which stale ones are forgotten (bounded memory). */
const DEFERRED_DROP_MEMORY = 1024;

/** The gate's actor for cs: its namespace, name and every toolbox name it knows. */
export function setActor(cs: CocoonSet): Actor {
  const { namespace = "", name = "", uid, creationTimestamp } = cs.metadata;
  return {
    kind: "CocoonSet",
    namespace,
    name,
    uid,
    toolboxNames: setToolboxNames(cs),
    creationTimestamp,
  };
}

/** Deletes `<vmName>:<tag>` when the gate allows it; registry errors propagate. */
export async function dropTag(pass: SetPass, vmName: string, tag: string): Promise<Verdict> {
  const sources = { ...claimSources(pass), registry: pass.deps.registry! };
  const verdict = await deleteTagIfAllowed(sources, setActor(pass.cs), vmName, tag, pass.signal);
  if (!verdict.allowed) {
    pass.log.warn("keeping {vm}:{tag}: {reason}", { vm: vmName, tag, reason: verdict.message });
    if (verdict.kind !== "claimed") {
      emit(pass, "Warning", REASON_SNAPSHOT_DELETE_REFUSED, verdict.message);
    } else if (deferralDue(pass, vmName, tag, verdict.message)) {
      emit(pass, "Warning", REASON_SNAPSHOT_DELETE_DEFERRED, verdict.message);
    }
  }
  return verdict;
}

/**
 * Whether the set must not ask pod's VM to hibernate: it does not derive the VM name, or another
 * namespace does too (the push would land where another tenant reads). Asked right before the
 * request, past the cache in the other namespaces; a refusal gets a Warning and the flow waits.
 */
export async function hibernateRefused(pass: SetPass, pod: Pod): Promise<boolean> {
  const vmName = parseVMSpec(pod).vmName;
  if (vmName === "") return false;
  const actor = setActor(pass.cs);
  const refusal = await actingRefusal(claimSources(pass), actor, vmName, true, pass.signal);
  if (!refusal) return false;
  pass.log.warn("not hibernating {pod}: {reason}", { pod: podRef(pod), reason: refusal.message });
  emit(pass, "Warning", REASON_HIBERNATE_REFUSED, `pod ${podRef(pod)}: ${refusal.message}`);
  return true;
}

/** Whether this deferral's Warning is due now, and if so records it as emitted. */
function deferralDue(pass: SetPass, vmName: string, tag: string, message: string): boolean {
  const seen = pass.deps.deferredDropEvents;
  const now = pass.deps.clock.now();
  const key = `${pass.cs.metadata.uid ?? pass.cs.metadata.name} ${vmName}:${tag}`;
  const recent = (at: number) => now - at < DEFERRED_DROP_EVENT_INTERVAL_MS;
  const last = seen.get(key);
  if (last?.message === message && recent(last.atMs)) return false;
  if (seen.size >= DEFERRED_DROP_MEMORY) {
    for (const [k, v] of seen) if (!recent(v.atMs)) seen.delete(k);
  }
  seen.set(key, { message, atMs: now });
  return true;
}
