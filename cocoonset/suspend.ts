/**
 * Suspend with the retain policy: every owned pod is asked to hibernate and keeps its seat, until
 * every VM confirmed it and its snapshot exists (Suspended). The Unsuspend step clears the asks.
 */
import type { Pod } from "../kube/mod.ts";
import { patchHibernateAsk, patchHibernateState } from "../common/k8s/pod_patch.ts";
import {
  parseVMSpec,
  readHibernateState,
  readLifecycleState,
  vmHibernationConfirmed,
} from "../common/meta/mod.ts";
import { hasHibernateSnapshot } from "../snapshot/registry.ts";
import { isPodFailed, podsByName } from "./pods.ts";
import { doing, podRef, POLL_MS, readSamePod, type SetPass, type Stop, stop } from "./pass.ts";
import { podsHibernatedByCR } from "./restore.ts";
import { EVERY_VM, recordHibernation } from "./snapshot_ledger.ts";
import { hibernateRefused } from "./tag_gate.ts";
import { createMainAgent } from "./create.ts";
import { SUSPEND_PHASES, withdrawUnownedAsk } from "./orphan_tags.ts";

/** The Suspend step (retain); a set without a main gets it back first (createMainAgent). */
export async function reconcileSuspend(pass: SetPass): Promise<Stop> {
  if (!pass.classified.main) return await createMainAgent(pass);
  await applySuspend(pass);
  return await allOwnedPodsHibernated(pass)
    ? stop({}, "Suspended")
    : stop({ requeueAfter: POLL_MS }, "Suspending");
}

/**
 * Whether every managed (static toolboxes have no VM), non-failed owned pod's VM confirmed its
 * hibernation at this generation, and then has its `:hibernate` snapshot: neither an earlier
 * round's tag nor a lagging cache ends the wait early. A registry error is thrown.
 */
export async function allOwnedPodsHibernated(pass: SetPass): Promise<boolean> {
  const generation = pass.cs.metadata.generation ?? 0;
  const confirmed: { pod: Pod; vmName: string }[] = [];
  for (const pod of podsByName(pass.classified)) {
    const spec = parseVMSpec(pod);
    if (!spec.managed || isPodFailed(pod)) continue;
    if (!spec.vmName || !vmHibernationConfirmed(pod, generation)) return false;
    confirmed.push({ pod, vmName: spec.vmName });
  }
  // The cache rules out a pass first, so the stored re-reads and registry probes run on the pass
  // that would complete rather than on every pass of the suspend (once per pod, not per pod×pass).
  if (confirmed.length === 0) return true;
  const registry = pass.deps.registry;
  if (!registry) return false;
  for (const { pod, vmName } of confirmed) {
    pass.signal.throwIfAborted();
    if (!await vmHibernationConfirmedStored(pass, pod, generation)) return false;
    if (!await hasHibernateSnapshot(registry, vmName, pass.signal)) return false;
  }
  return true;
}

/**
 * vmHibernationConfirmed on pod and, when it passes by a cleared VM id (no lifecycle annotations,
 * so no generation), on the stored pod too: a lagging cache could show the previous round's
 * hibernated pod while the VM runs again. One GET, only on the pass that would complete.
 */
export async function vmHibernationConfirmedStored(
  pass: SetPass,
  pod: Pod,
  generation?: number,
): Promise<boolean> {
  if (!vmHibernationConfirmed(pod, generation)) return false;
  if (readLifecycleState(pod) !== "") return true;
  const stored = await readSamePod(pass, pod, "re-read hibernated pod");
  return stored !== undefined && vmHibernationConfirmed(stored, generation);
}

/**
 * Asks every owned pod to hibernate, once the ledger records that every VM may hold `:hibernate`;
 * a pod whose VM name the set does not own alone keeps running (hibernateRefused).
 */
export async function applySuspend(pass: SetPass): Promise<void> {
  await recordHibernation(pass, [EVERY_VM]);
  for (const pod of podsByName(pass.classified)) {
    pass.signal.throwIfAborted();
    // The name check runs once per pod: only while the request is not on it yet.
    if (!readHibernateState(pod) && await hibernateRefused(pass, pod)) continue;
    await doing(
      `set hibernate on ${podRef(pod)}`,
      patchHibernateAsk(pass.deps.client, pod, pass.signal),
    );
  }
}

/**
 * The Unsuspend step: clears the hibernate request from owned pods a CocoonHibernation does not
 * hold. In a suspend phase this is the set's resume, which keeps its tags; any other request is
 * nobody's, and its tag is marked orphaned as it goes (orphan_tags.ts).
 */
export async function applyUnsuspend(pass: SetPass): Promise<void> {
  const hibernated = podsByName(pass.classified).filter((p) => readHibernateState(p));
  if (hibernated.length === 0) return;
  const ownedByCR = await podsHibernatedByCR(pass, hibernated.map((p) => p.metadata.name ?? ""));
  const resuming = SUSPEND_PHASES.has(pass.cs.status?.phase ?? "");
  for (const pod of hibernated) {
    pass.signal.throwIfAborted();
    if (ownedByCR.has(pod.metadata.name ?? "")) continue;
    if (!resuming) await withdrawUnownedAsk(pass, pod, "unsuspend");
    else {
      await doing(
        `clear hibernate on ${podRef(pod)}`,
        patchHibernateState(pass.deps.client, pod, false, pass.signal),
      );
    }
  }
}
