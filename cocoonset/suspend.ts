/**
 * Suspend with the retain policy: every owned pod is asked to hibernate and keeps its seat; the
 * set reads Suspended only once every managed VM has confirmed, for the current generation, that
 * it hibernated and its snapshot is in the registry. Unsuspend clears the request again, except
 * on pods a CocoonHibernation is hibernating.
 */
import { type Pod, wrapError } from "../kube/mod.ts";
import { patchHibernateAsk, patchHibernateState } from "../common/k8s/pod_patch.ts";
import {
  parseVMSpec,
  readHibernateState,
  readLifecycleState,
  vmHibernationConfirmed,
} from "../common/meta/mod.ts";
import { hasHibernateSnapshot } from "../snapshot/registry.ts";
import { buildAgentPod, isPodFailed, podsByName } from "./pods.ts";
import { podRef, readStoredPod, type SetPass, type Stop, stop } from "./pass.ts";
import { markRestoreIfHibernated, podsHibernatedByCR } from "./restore.ts";
import { EVERY_VM, recordHibernation } from "./snapshot_ledger.ts";
import { hibernateRefused } from "./tag_gate.ts";
import { ensureSpecBuildable } from "./validate.ts";
import { createMainPod } from "./create_main.ts";
import { SUSPEND_PHASES, withdrawUnownedAsk } from "./orphan_tags.ts";

/** How often a suspending set looks again (ms). */
export const REQUEUE_SUSPEND_POLL_MS = 5_000;

/** Drives a retain-policy suspend. */
export async function reconcileSuspend(pass: SetPass): Promise<Stop> {
  if (!pass.classified.main) return await createMainBeforeSuspend(pass);
  await applySuspend(pass);
  return await allOwnedPodsHibernated(pass)
    ? stop({}, "Suspended")
    : stop({ requeueAfter: REQUEUE_SUSPEND_POLL_MS }, "Suspending");
}

/**
 * A set suspended with no main (never booted, or the main was deleted) gets its main back first,
 * restoring from its snapshot when there is one, and is hibernated on the next pass. A pod of
 * another owner holding the main's name is a name clash (status, Warning, retry with backoff).
 */
async function createMainBeforeSuspend(pass: SetPass): Promise<Stop> {
  const buildable = await ensureSpecBuildable(pass, { creatingMain: true });
  if (buildable.stop) return buildable;
  const pod = buildAgentPod(pass.cs, 0);
  // Suspend means the VM's state matters: restore whenever a snapshot exists.
  await markRestoreIfHibernated(pass.deps, pod, true, pass.signal);
  const created = await createMainPod(pass, pod, {
    phase: "Suspending",
    clashWaitMs: REQUEUE_SUSPEND_POLL_MS,
    context: "create main agent before suspend",
  });
  if (created.stop) return created;
  pass.log.info("created main agent {pod} ahead of suspend", { pod: podRef(pod) });
  return stop({ requeue: true });
}

/**
 * Whether every managed, non-terminal owned pod has hibernated for this generation and has its
 * `:hibernate` snapshot. The VM's own confirmation (vmHibernationConfirmed: the lifecycle pair at
 * this generation, or with a vk-cocoon that writes none the hibernate request and a cleared VM
 * id — both written only after this round's push) is checked before the registry, so neither a
 * tag left by an earlier cycle nor a lagging cache can end the wait early. Static toolboxes have no VM lifecycle and are skipped;
 * a terminal pod has no VM to snapshot. A registry error is thrown, never read as "absent".
 */
export async function allOwnedPodsHibernated(pass: SetPass): Promise<boolean> {
  const generation = pass.cs.metadata.generation ?? 0;
  for (const pod of podsByName(pass.classified)) {
    pass.signal.throwIfAborted();
    const spec = parseVMSpec(pod);
    if (!spec.managed || isPodFailed(pod)) continue;
    if (!spec.vmName) return false;
    if (!await vmHibernationConfirmedStored(pass, pod, generation)) return false;
    if (!pass.deps.registry) return false;
    if (!await hasHibernateSnapshot(pass.deps.registry, spec.vmName, pass.signal)) return false;
  }
  return true;
}

/**
 * vmHibernationConfirmed on pod, and — when the cached copy passes by the cleared VM id of a
 * vk-cocoon that writes no lifecycle annotations — on the stored pod too. That signal carries no
 * generation: a lagging cache can still show the previous round's hibernated pod (id cleared,
 * hibernate request set) after the VM was woken and asked to hibernate again, and that pass would
 * end the suspend or delete the main over the older tag while the VM runs on. The lifecycle pair
 * needs no re-read: its generation already tells the rounds apart. One GET per pod, only on the
 * pass that would complete.
 */
export async function vmHibernationConfirmedStored(
  pass: SetPass,
  pod: Pod,
  generation?: number,
): Promise<boolean> {
  if (!vmHibernationConfirmed(pod, generation)) return false;
  if (readLifecycleState(pod) !== "") return true;
  const stored = await readStoredPod(
    pass,
    pod.metadata.namespace ?? "",
    pod.metadata.name ?? "",
    "re-read hibernated pod",
  );
  if (!stored || stored.metadata.uid !== pod.metadata.uid) return false;
  return vmHibernationConfirmed(stored, generation);
}

/**
 * Asks every owned pod (static toolboxes included) to hibernate, after recording in the snapshot
 * ledger that every VM of the set may now hold `:hibernate`. A pod whose VM name the set does not
 * own alone (tag_gate.ts hibernateRefused) is left running with a Warning, which holds the
 * suspend in Suspending: nothing is pushed, and a release never deletes its pods.
 */
export async function applySuspend(pass: SetPass): Promise<void> {
  await recordHibernation(pass, [EVERY_VM]);
  for (const pod of podsByName(pass.classified)) {
    pass.signal.throwIfAborted();
    // The name check runs once per pod: only when the request is not on it yet.
    if (!readHibernateState(pod) && await hibernateRefused(pass, pod)) continue;
    try {
      await patchHibernateAsk(pass.deps.client, pod, pass.signal);
    } catch (err) {
      throw wrapError(`set hibernate on ${podRef(pod)}`, err);
    }
  }
}

/**
 * Clears the hibernate request from owned pods that carry it, except pods a CocoonHibernation
 * wants hibernated (desire Hibernate, or still Hibernating): that controller owns them. While
 * the phase still shows the set's own suspend, this is its resume, which keeps its tags (as the
 * Go operator does). Any other request is nobody's (its CocoonHibernation deleted, a person's, a
 * stale pass's): its tag is marked orphaned as the request goes, to be dropped once the VM is
 * back (orphan_tags.ts).
 */
export async function applyUnsuspend(pass: SetPass): Promise<void> {
  const hibernated = podsByName(pass.classified).filter((p) => readHibernateState(p));
  if (hibernated.length === 0) return;
  const ownedByCR = await podsHibernatedByCR(
    pass.deps,
    pass.cs.metadata.namespace ?? "",
    hibernated.map((p) => p.metadata.name ?? ""),
    pass.signal,
  );
  const resuming = SUSPEND_PHASES.has(pass.cs.status?.phase ?? "");
  for (const pod of hibernated) {
    pass.signal.throwIfAborted();
    if (ownedByCR.has(pod.metadata.name ?? "")) continue;
    if (!resuming) {
      await withdrawUnownedAsk(pass, pod, "unsuspend");
      continue;
    }
    try {
      await patchHibernateState(pass.deps.client, pod, false, pass.signal);
    } catch (err) {
      throw wrapError(`clear hibernate on ${podRef(pod)}`, err);
    }
  }
}
