/**
 * Suspend with the release policy, and the wake that follows it (docs/cocoonset.md, "Release").
 * Each phase is stored with or before the effect that depends on it (Suspended with the deletes,
 * Waking before the restore pod): a restarted operator resumes, never boots over a snapshot.
 */
import { errorText, patchAnnotations, type Pod, Pods } from "../kube/mod.ts";
import type { CocoonHibernation } from "../common/apis/v1/mod.ts";
import { CocoonSets } from "../common/apis/v1/resources.ts";
import { patchKeepSnapshotOnDelete } from "../common/k8s/pod_patch.ts";
import {
  ANNOTATION_HIBERNATED_ON_NODE,
  markRestoreFromHibernate,
  parseVMSpec,
  readHibernateState,
  readRestoreFromHibernate,
  vmLive,
  vmNameForDeployment,
} from "../common/meta/mod.ts";
import { hasHibernateSnapshot, HIBERNATE_SNAPSHOT_TAG } from "../snapshot/registry.ts";
import {
  slotReleasePodsDeletedTotal,
  slotReleaseWakeTotal,
  slotReleaseWakeUnschedulableTotal,
} from "../metrics/metrics.ts";
import { stashDeleteVMNames } from "./teardown.ts";
import { buildAgentPod, hostnameAffinity, isPodFailed, podsByName } from "./pods.ts";
import { warnIfPoolEmpty } from "./nodes.ts";
import {
  afterStatus,
  deletePod,
  doing,
  emit,
  GO_ON,
  podRef,
  POLL_MS,
  readStored,
  setLabels,
  type SetPass,
  type Step,
  type Stop,
  stop,
} from "./pass.ts";
import { unschedulableMessage } from "./predicate.ts";
import { allOwnedPodsHibernated, applySuspend } from "./suspend.ts";
import { ensureSpecBuildable } from "./validate.ts";
import { createMainPod } from "./create.ts";
import { dropTag } from "./tag_gate.ts";
import { withdrawUnownedAsk } from "./orphan_tags.ts";
import { holdsHibernated, podsHibernatedByCR } from "./restore.ts";

/** Warning reason: the woken main cannot be scheduled (no free seat in its pool). */
export const REASON_WAKE_NO_CAPACITY = "WakeNoCapacity";
/** Warning reason: the restore pod's hibernate request had no owner and was withdrawn. */
export const REASON_ORPHAN_HIBERNATE_WITHDRAWN = "OrphanHibernateWithdrawn";
/** Normal reason: a node hint older than the main's run in place was cleared. */
export const REASON_STALE_HINT_CLEARED = "StaleNodeHintCleared";

/** The Suspend step under the release policy. */
export async function reconcileSuspendRelease(pass: SetPass): Promise<Stop> {
  const { cs, classified } = pass;
  if (!pass.deps.registry) {
    throw new Error(
      `hibernatePolicy release on ${cs.metadata.namespace}/${cs.metadata.name} needs a registry`,
    );
  }
  // Seat already released, or suspended before the first boot: nothing to snapshot.
  if (classified.allByName.size === 0) return stop({}, "Suspended");
  await applySuspend(pass);
  if (!await allOwnedPodsHibernated(pass)) return stop({ requeueAfter: POLL_MS }, "Suspending");
  const generation = cs.metadata.generation;
  // Before the first delete: teardown needs the VM names, the wake the node.
  await doing(
    "stash vm names before releasing the seat",
    stashDeleteVMNames(pass, podsByName(classified)),
  );
  const node = classified.main?.spec?.nodeName;
  if (node) await setNodeHint(pass, node);
  // The writes answer with the stored set: release only for the spec that was checked, as a pass
  // that sees an unsuspend before the hint boots the main fresh.
  if (cs.metadata.generation !== generation) return stop({ requeue: true });
  for (const pod of podsByName(classified)) {
    pass.signal.throwIfAborted();
    // A failed pod has no VM state to keep; it stays for triage after the wake.
    if (isPodFailed(pod)) continue;
    pass.log.info("releasing seat: deleting hibernated pod {pod} on {node}", {
      pod: podRef(pod),
      node: pod.spec?.nodeName ?? "",
    });
    try {
      // Best effort: without the mark the wake pulls from the registry instead.
      await patchKeepSnapshotOnDelete(pass.deps.client, pod, pass.signal);
    } catch (err) {
      pass.log.error("could not mark {pod} keep-snapshot-on-delete, the wake will pull: {error}", {
        pod: podRef(pod),
        error: errorText(err),
      });
    }
    await deletePod(pass, pod, "hibernated pod for seat release");
    slotReleasePodsDeletedTotal.labels(setLabels(cs)).inc();
  }
  // Suspended lands with the deletes: the wake's stale-cache check relies on it.
  return stop({ requeueAfter: POLL_MS }, "Suspended");
}

/**
 * Where a released-seat wake stands (docs/cocoonset.md, "Release"), one state per pass:
 *
 * | state          | when                                                                  |
 * | -------------- | --------------------------------------------------------------------- |
 * | idle           | not engaged (below), or no registry: the normal flow owns the pass    |
 * | start          | engaged, no main: restore it from its snapshot                        |
 * | restoring      | waking, the main's VM is not live yet                                 |
 * | complete       | waking, the main's VM is live: drop the tag and the hint              |
 * | confirm-delete | Suspended, or Suspending with the hint, a non-failed main, the hint   |
 * | leave          | Suspended without the hint, or a failed main: the normal flow         |
 *
 * Engaged: waking (phase Waking, or a restore-marked main not asked to hibernate while the hint
 * is set: a stale phase write replaced Waking), phase Suspended, phase Suspending with the hint
 * (an unsuspend before the deletes settled Suspended), or phase Failed with the hint and no main
 * (a failed restore pod, gone since). Never on the current policy: switching to retain while
 * released must still restore.
 */
export type ReleasedWakeState =
  | "idle"
  | "start"
  | "restoring"
  | "complete"
  | "confirm-delete"
  | "leave";

/** What decideReleasedWake reads of a pass; hint is "" when unset. */
export interface ReleasedWakeFacts {
  phase?: string;
  hint: string;
  hasRegistry: boolean;
  main?: { restoreMarked: boolean; hibernateRequested: boolean; live: boolean; terminal: boolean };
}

/** The one state a released-seat wake is in (see ReleasedWakeState). */
export function decideReleasedWake(f: ReleasedWakeFacts): ReleasedWakeState {
  const { main, phase, hint } = f;
  const hinted = hint !== "";
  const waking = phase === "Waking" ||
    (main !== undefined && main.restoreMarked && !main.hibernateRequested && hinted);
  const suspended = phase === "Suspended" || (phase === "Suspending" && hinted);
  const failedWake = phase === "Failed" && hinted && main === undefined;
  if (!f.hasRegistry || !(waking || suspended || failedWake)) return "idle";
  if (!main) return "start";
  if (waking) return main.live ? "complete" : "restoring";
  return hinted && !main.terminal ? "confirm-delete" : "leave";
}

/** The Released-seat wake step: clears a stale node hint, or runs the wake's state. */
export async function reconcileReleasedWake(pass: SetPass): Promise<Step> {
  const { cs } = pass;
  const main = pass.classified.main;
  const hint = nodeHint(pass);
  if (hint !== "" && main && await clearStaleHint(pass, main, hint)) return GO_ON;
  const state = decideReleasedWake({
    phase: cs.status?.phase,
    hint,
    hasRegistry: pass.deps.registry !== undefined,
    main: main && {
      restoreMarked: readRestoreFromHibernate(main),
      hibernateRequested: readHibernateState(main),
      live: vmLive(main),
      terminal: isPodFailed(main),
    },
  });
  if (state === "idle" || state === "leave") return GO_ON;
  if (state === "start" || !main) return await startReleasedWake(pass);
  if (state === "restoring") return await awaitRestore(pass, main);
  if (state === "complete") return await completeWake(pass, main, hint);
  // confirm-delete: the cache still shows the released main, a stale view of a delete or a delete
  // that never ran. A main that still runs is woken in place by the normal flow.
  const live = await readStored(pass, Pods, main, "wake: confirm delete of");
  return live && !live.metadata.deletionTimestamp ? GO_ON : stop({ requeueAfter: POLL_MS });
}

/** The restore pod's VM is not live yet: Waking, with WakeNoCapacity while it cannot schedule. */
async function awaitRestore(pass: SetPass, main: Pod): Promise<Stop> {
  // A hibernate request nobody owns would keep the VM down and the set Waking for ever.
  await withdrawOrphanHibernate(pass, main);
  const msg = unschedulableMessage(main);
  if (msg !== "") {
    slotReleaseWakeUnschedulableTotal.labels(setLabels(pass.cs)).inc();
    const message = `main pod ${main.metadata.name} unschedulable: ${msg}`;
    emit(pass, "Warning", REASON_WAKE_NO_CAPACITY, message);
    await warnIfPoolEmpty(pass, main);
  }
  return stop({ requeueAfter: POLL_MS }, "Waking");
}

/** The restored VM is live: drop the snapshot and the hint, score the landing once. */
async function completeWake(pass: SetPass, main: Pod, hint: string): Promise<Stop> {
  // Unless the VM was asked to hibernate again: that round's tag may be its only copy.
  if (!readHibernateState(main)) {
    const stored = await readStored(pass, Pods, main, "wake: read");
    const vmName = parseVMSpec(main).vmName;
    if (!stored || !readHibernateState(stored)) {
      await doing(
        `wake: drop hibernate snapshot ${vmName}`,
        dropTag(pass, vmName, HIBERNATE_SNAPSHOT_TAG),
      );
    }
  }
  // Only with the hint: a re-entry on a stale status comes without it and must not score again.
  if (hint !== "") {
    const node = main.spec?.nodeName ?? "";
    pass.log.info("wake restored the main on {node}, dropped its hibernate snapshot", { node });
    const placement = hint === node ? "hint-node" : "pool";
    slotReleaseWakeTotal.labels({ ...setLabels(pass.cs), placement }).inc();
    await setNodeHint(pass, "");
  }
  return stop({ requeue: true }, "");
}

/**
 * Recreates the main from its snapshot, preferring the hinted node. Without a snapshot (suspended
 * before the first boot) the normal flow boots it; a probe error fails the pass instead.
 */
async function startReleasedWake(pass: SetPass): Promise<Step> {
  const { cs, deps } = pass;
  const vmName = vmNameForDeployment(cs.metadata.namespace ?? "", cs.metadata.name ?? "", 0);
  if (!await doing("wake", hasHibernateSnapshot(deps.registry!, vmName, pass.signal))) {
    return GO_ON;
  }
  const buildable = await ensureSpecBuildable(pass, { creatingMain: true });
  if (buildable.stop) return buildable;
  // Waking is stored before the restore pod exists: no pass boots the main fresh over its snapshot.
  return afterStatus("Waking", async () => {
    const pod = buildAgentPod(cs, 0);
    markRestoreFromHibernate(pod);
    const hint = nodeHint(pass);
    // A spec.nodeName pin already gave the pod a required affinity; it wins over the hint.
    if (hint && !pod.spec!.affinity) pod.spec!.affinity = hostnameAffinity("preferred", hint);
    const created = await createMainPod(pass, pod, {
      phase: "Waking",
      context: "wake: create main",
    });
    if (created.stop) return created;
    pass.log.info("wake recreated the main from its snapshot, preferring node {node}", {
      node: hint,
    });
    return stop({ requeueAfter: POLL_MS });
  });
}

/**
 * Withdraws the restore pod's hibernate request when neither the suspend nor a live
 * CocoonHibernation owns it, marking its tag orphaned in the same write.
 */
async function withdrawOrphanHibernate(pass: SetPass, main: Pod): Promise<void> {
  if (pass.cs.spec.suspend || !readHibernateState(main)) return;
  const podName = main.metadata.name ?? "";
  const live = (h: CocoonHibernation) => !h.metadata.deletionTimestamp && holdsHibernated(h);
  if ((await podsHibernatedByCR(pass, [podName], live)).has(podName)) return;
  pass.log.warn("wake: withdrawing the hibernate request on {pod}, which nothing owns", {
    pod: podRef(main),
  });
  if (!await withdrawUnownedAsk(pass, main, "wake")) return;
  emit(
    pass,
    "Warning",
    REASON_ORPHAN_HIBERNATE_WITHDRAWN,
    `restore pod ${podName} carried a hibernate request no CocoonHibernation or suspend owns; ` +
      `withdrawn so the wake can finish`,
  );
}

/**
 * Clears a hint older than the main's run in place (an aborted release), so a failed main is
 * never restored from a stale tag; the stored pod decides, as the cache may still show a main
 * the release deleted. Whether it was cleared.
 */
async function clearStaleHint(pass: SetPass, main: Pod, hint: string): Promise<boolean> {
  // The set's own wake clears the hint as it completes.
  if (pass.cs.status?.phase === "Waking" || pass.cs.spec.suspend) return false;
  const runsInPlace = (p: Pod) =>
    !p.metadata.deletionTimestamp && !readHibernateState(p) && !readRestoreFromHibernate(p) &&
    vmLive(p);
  if (!runsInPlace(main)) return false;
  const stored = await readStored(pass, Pods, main, "wake: confirm in-place run of");
  if (!stored || !runsInPlace(stored)) return false;
  pass.log.info("main runs in place: clearing the stale node hint {node}", { node: hint });
  emit(
    pass,
    "Normal",
    REASON_STALE_HINT_CLEARED,
    `main ${main.metadata.name} runs in place; node hint ${hint} from an unfinished release cleared`,
  );
  await setNodeHint(pass, "");
  return true;
}

/** The node the released main left ("" when unset). */
function nodeHint(pass: SetPass): string {
  return pass.cs.metadata.annotations?.[ANNOTATION_HIBERNATED_ON_NODE] ?? "";
}

/** Writes the node hint ("" clears it). */
async function setNodeHint(pass: SetPass, node: string): Promise<void> {
  const hint = { [ANNOTATION_HIBERNATED_ON_NODE]: node };
  await patchAnnotations(pass.deps.client, CocoonSets, pass.cs, hint, { signal: pass.signal });
}
