/**
 * Suspend with the release policy, and the wake that follows it. A released set gives its seat
 * back: its pods are deleted, but only after every managed VM's `:hibernate` snapshot is
 * verified, and the node it ran on is remembered as a hint. Waking recreates the main from that
 * snapshot, preferring the hinted node, and drops the snapshot only once the restored VM is live.
 *
 * Each step is persisted before the side effect that depends on it (Suspended lands with the
 * deletes, Waking before the restore pod is created), so an operator restarted between any two
 * writes resumes the flow instead of fresh-booting over a snapshot.
 */
import { errorText, patchAnnotations, type Pod, type Reader, wrapError } from "../kube/mod.ts";
import { CocoonHibernations, CocoonSets } from "../common/apis/v1/resources.ts";
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
import { buildAgentPod, isPodFailed, podsByName, preferredHostnameAffinity } from "./pods.ts";
import { warnIfPoolEmpty } from "./nodes.ts";
import {
  afterStatus,
  deletePod,
  emit,
  GO_ON,
  podRef,
  readStoredPod,
  REQUEUE_WAIT_FOR_MAIN_MS,
  type SetPass,
  type Step,
  type Stop,
  stop,
} from "./pass.ts";
import { unschedulableMessage } from "./predicate.ts";
import { allOwnedPodsHibernated, applySuspend, REQUEUE_SUSPEND_POLL_MS } from "./suspend.ts";
import { ensureSpecBuildable } from "./validate.ts";
import { createMainPod } from "./create_main.ts";
import { dropTag } from "./tag_gate.ts";
import { withdrawUnownedAsk } from "./orphan_tags.ts";

/** Warning reason: the woken main cannot be scheduled (no free seat in its pool). */
export const REASON_WAKE_NO_CAPACITY = "WakeNoCapacity";

/** Drives a release-policy suspend. */
export async function reconcileSuspendRelease(pass: SetPass): Promise<Stop> {
  const { cs, classified, deps } = pass;
  if (!deps.registry) {
    throw new Error(
      `hibernatePolicy release on ${cs.metadata.namespace}/${cs.metadata.name} needs a registry`,
    );
  }
  if (classified.allByName.size === 0) {
    // Seat already released, or suspended before the first boot: nothing to snapshot.
    return stop({}, "Suspended");
  }
  await applySuspend(pass);
  if (!await allOwnedPodsHibernated(pass)) {
    return stop({ requeueAfter: REQUEUE_SUSPEND_POLL_MS }, "Suspending");
  }
  const generation = cs.metadata.generation;
  // Stash before the first delete: teardown needs the VM names once the status is empty, and the
  // wake needs the node.
  try {
    await stashDeleteVMNames(pass, podsByName(classified));
  } catch (err) {
    throw wrapError("stash vm names before releasing the seat", err);
  }
  const main = classified.main;
  if (main?.spec?.nodeName) {
    await patchAnnotations(deps.client, CocoonSets, cs, {
      [ANNOTATION_HIBERNATED_ON_NODE]: main.spec.nodeName,
    }, { signal: pass.signal });
  }
  // The writes above answer with the stored set. An edit this pass did not see (an unsuspend)
  // may not show the hint to a cache that shows the edit, and a pass that sees no hint and no
  // main boots it fresh: release only for the spec that was checked, else look again.
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
      // Best effort: without the mark vk-cocoon drops its node-local copy and the wake pulls
      // from the registry instead; failing here would keep the seat.
      await patchKeepSnapshotOnDelete(deps.client, pod, pass.signal);
    } catch (err) {
      pass.log.error("could not mark {pod} keep-snapshot-on-delete, the wake will pull: {error}", {
        pod: podRef(pod),
        error: errorText(err),
      });
    }
    await deletePod(pass, pod, "hibernated pod for seat release");
    slotReleasePodsDeletedTotal.labels({
      namespace: pod.metadata.namespace ?? "",
      cocoonset: cs.metadata.name ?? "",
    }).inc();
  }
  // Suspended is written with the deletes: the wake's stale-cache check relies on it.
  return stop({ requeueAfter: REQUEUE_SUSPEND_POLL_MS }, "Suspended");
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
 * | confirm-delete | Suspended, or Suspending with the hint, a non-terminal main, the hint |
 * | leave          | Suspended without the hint, or a terminal main: the normal flow       |
 *
 * Engaged: waking (phase Waking, or a restore-marked main not asked to hibernate while the hint
 * is set: a stale phase write replaced Waking), phase Suspended, phase Suspending with the hint
 * (a fast unsuspend before the deletes settled Suspended), or phase Failed with the hint and no
 * main (a failed restore pod, gone since). Never on the current policy: switching to retain
 * while released must still restore.
 */
export type ReleasedWakeState =
  | "idle"
  | "start"
  | "restoring"
  | "complete"
  | "confirm-delete"
  | "leave";

/** What decideReleasedWake reads of a pass. */
export interface ReleasedWakeFacts {
  phase?: string;
  /** The node hint annotation, "" when unset. */
  hint: string;
  hasRegistry: boolean;
  main?: {
    restoreMarked: boolean;
    hibernateRequested: boolean;
    live: boolean;
    terminal: boolean;
  };
}

/** The facts of a pass for decideReleasedWake. */
export function releasedWakeFacts(pass: SetPass): ReleasedWakeFacts {
  const { cs, classified, deps } = pass;
  const main = classified.main;
  return {
    phase: cs.status?.phase,
    hint: cs.metadata.annotations?.[ANNOTATION_HIBERNATED_ON_NODE] ?? "",
    hasRegistry: deps.registry !== undefined,
    main: main && {
      restoreMarked: readRestoreFromHibernate(main),
      hibernateRequested: readHibernateState(main),
      live: vmLive(main),
      terminal: isPodFailed(main),
    },
  };
}

/** The one state a released-seat wake is in (see ReleasedWakeState). */
export function decideReleasedWake(f: ReleasedWakeFacts): ReleasedWakeState {
  const { main, phase, hint } = f;
  const hinted = hint !== "";
  const unfinishedWake = main !== undefined && main.restoreMarked && !main.hibernateRequested &&
    hinted;
  const waking = phase === "Waking" || unfinishedWake;
  const suspended = phase === "Suspended" || (phase === "Suspending" && hinted);
  const failedWake = phase === "Failed" && hinted && main === undefined;
  if (!f.hasRegistry || !(waking || suspended || failedWake)) return "idle";
  if (!main) return "start";
  if (waking) return main.live ? "complete" : "restoring";
  // Here the phase is Suspended, or Suspending with the hint (failedWake needs no main).
  return hinted && !main.terminal ? "confirm-delete" : "leave";
}

/**
 * The wake of a set coming back from a released (pod-less) suspend: a stale node hint is
 * cleared first (then the normal flow owns the pass), then the executor of the state the wake
 * is in runs.
 */
export async function reconcileReleasedWake(pass: SetPass): Promise<Step> {
  const main = pass.classified.main;
  const hint = pass.cs.metadata.annotations?.[ANNOTATION_HIBERNATED_ON_NODE] ?? "";
  if (hint !== "" && main && await clearStaleHint(pass, main)) return GO_ON;
  const state = decideReleasedWake(releasedWakeFacts(pass));
  if (state === "start" || !main) {
    return state === "idle" ? GO_ON : await startReleasedWake(pass);
  }
  switch (state) {
    case "idle":
    case "leave":
      // A retain-policy placeholder or a kept failed pod: the normal flow owns these.
      return GO_ON;
    case "restoring":
      return await awaitRestore(pass, main);
    case "complete":
      return await completeWake(pass, main, hint);
    case "confirm-delete":
      return await confirmReleasedDelete(pass, main);
  }
}

/** The restore pod's VM is not live yet: Waking, with WakeNoCapacity while it cannot schedule. */
async function awaitRestore(pass: SetPass, main: Pod): Promise<Stop> {
  const { cs } = pass;
  // A hibernate request on the restore pod that nobody owns (its CocoonHibernation deleted, a
  // suspend pass from a stale copy that lost its status write) would keep the VM down and the
  // set Waking for ever: withdraw it.
  await withdrawOrphanHibernate(pass, main);
  const msg = unschedulableMessage(main);
  if (msg !== "") {
    slotReleaseWakeUnschedulableTotal.labels({
      namespace: cs.metadata.namespace ?? "",
      cocoonset: cs.metadata.name ?? "",
    }).inc();
    emit(
      pass,
      "Warning",
      REASON_WAKE_NO_CAPACITY,
      `main pod ${main.metadata.name} unschedulable: ${msg}`,
    );
    await warnIfPoolEmpty(pass, main);
  }
  return stop({ requeueAfter: REQUEUE_SUSPEND_POLL_MS }, "Waking");
}

/** The restored VM is live: drop the snapshot and the hint, score the landing once. */
async function completeWake(pass: SetPass, main: Pod, hint: string): Promise<Stop> {
  const { cs, deps } = pass;
  // Live: the snapshot has done its job — unless the VM was asked to hibernate again (a
  // CocoonHibernation, a person): vk-cocoon pushes that round's tag before it removes the VM,
  // so the tag may already be the only copy of it. The request's owner drops it on its wake.
  const vmName = parseVMSpec(main).vmName;
  if (!await hibernateRequested(pass, main)) {
    try {
      await dropTag(pass, vmName, HIBERNATE_SNAPSHOT_TAG);
    } catch (err) {
      throw wrapError(`wake: drop hibernate snapshot ${vmName}`, err);
    }
  }
  // The hint marks a wake in flight; a re-entry on a stale status arrives without it and must
  // not score the landing a second time.
  if (hint !== "") {
    const node = main.spec?.nodeName ?? "";
    pass.log.info("wake restored the main on {node}, dropped its hibernate snapshot", { node });
    slotReleaseWakeTotal.labels({
      namespace: cs.metadata.namespace ?? "",
      cocoonset: cs.metadata.name ?? "",
      placement: hint === node ? "hint-node" : "pool",
    }).inc();
    await patchAnnotations(deps.client, CocoonSets, cs, { [ANNOTATION_HIBERNATED_ON_NODE]: "" }, {
      signal: pass.signal,
    });
  }
  // The phase derives from the pods now; the requeued pass settles Running or Scaling.
  return stop({ requeue: true }, "");
}

/**
 * Probes for the snapshot and recreates the main from it. Without a snapshot (suspended before
 * the first boot, or the tag was lost) the normal flow boots it fresh.
 */
async function startReleasedWake(pass: SetPass): Promise<Step> {
  const { cs, deps } = pass;
  const vmName = vmNameForDeployment(cs.metadata.namespace ?? "", cs.metadata.name ?? "", 0);
  let present: boolean;
  try {
    present = await hasHibernateSnapshot(deps.registry!, vmName, pass.signal);
  } catch (err) {
    // Fail closed: falling through would fresh-boot over a real snapshot.
    throw wrapError("wake", err);
  }
  if (!present) return GO_ON;
  const buildable = await ensureSpecBuildable(pass, { creatingMain: true });
  if (buildable.stop) return buildable;
  // Waking is stored before the restore pod exists: a crash in between resumes the wake, and a
  // pass never boots the main fresh over its snapshot.
  return afterStatus("Waking", async () => {
    const pod = buildAgentPod(cs, 0);
    markRestoreFromHibernate(pod);
    const hint = cs.metadata.annotations?.[ANNOTATION_HIBERNATED_ON_NODE] ?? "";
    // A spec.nodeName pin already gave the pod a required affinity; it wins over the hint.
    if (hint && !pod.spec!.affinity) pod.spec!.affinity = preferredHostnameAffinity(hint);
    const created = await createMainPod(pass, pod, {
      phase: "Waking",
      clashWaitMs: REQUEUE_WAIT_FOR_MAIN_MS,
      context: "wake: create main",
    });
    if (created.stop) return created;
    pass.log.info("wake recreated the main from its snapshot, preferring node {node}", {
      node: hint,
    });
    return stop({ requeueAfter: REQUEUE_WAIT_FOR_MAIN_MS });
  });
}

/**
 * Whether the main carries a hibernate request, in the cache or on the stored pod: the cache may
 * not show yet a request vk-cocoon already acts on. A main that is gone carries none.
 */
async function hibernateRequested(pass: SetPass, main: Pod): Promise<boolean> {
  if (readHibernateState(main)) return true;
  const live = await readStoredMain(pass, main, "wake: read");
  return live !== undefined && readHibernateState(live);
}

/**
 * The cache shows the released main still there: either a stale view of a delete that happened,
 * or a delete that never ran. Only an uncached read can tell; a live pod is woken in place by
 * the normal flow.
 */
async function confirmReleasedDelete(pass: SetPass, main: Pod): Promise<Step> {
  const live = await readStoredMain(pass, main, "wake: confirm delete of");
  if (live === undefined || live.metadata.deletionTimestamp) {
    return stop({ requeueAfter: REQUEUE_WAIT_FOR_MAIN_MS });
  }
  return GO_ON;
}

/** The stored copy of main (past the cache), or undefined when it is gone. */
function readStoredMain(pass: SetPass, main: Pod, what: string): Promise<Pod | undefined> {
  return readStoredPod(pass, main.metadata.namespace ?? "", main.metadata.name ?? "", what);
}

/** Event reason: the restore pod's hibernate request had no owner and was withdrawn. */
export const REASON_ORPHAN_HIBERNATE_WITHDRAWN = "OrphanHibernateWithdrawn";
/** Event reason: a node hint older than the main's run in place was cleared. */
export const REASON_STALE_HINT_CLEARED = "StaleNodeHintCleared";

/** Whether a live CocoonHibernation of ns asks to hibernate the pod, as reader shows them. */
async function hibernateOwned(
  pass: SetPass,
  reader: Reader,
  ns: string,
  podName: string,
): Promise<boolean> {
  try {
    const requests = await reader.list(CocoonHibernations, {
      namespace: ns,
      unsafeDisableDeepCopy: true,
      signal: pass.signal,
    });
    return requests.items.some((h) =>
      !h.metadata.deletionTimestamp && h.spec?.podRef?.name === podName &&
      (h.spec?.desire === "Hibernate" || h.status?.phase === "Hibernating")
    );
  } catch (err) {
    throw wrapError("wake: list cocoonhibernations", err);
  }
}

/**
 * Clears the hibernate request of a restore pod in a released-seat wake when nothing owns it: the
 * set is not suspended and no CocoonHibernation asks to hibernate the pod. An owner the cache
 * shows settles it (no API request while a request holds the pod); the withdrawal itself is
 * decided past the cache, which may not show a request created a moment ago.
 */
async function withdrawOrphanHibernate(pass: SetPass, main: Pod): Promise<void> {
  const { cs, deps } = pass;
  if (cs.spec.suspend || !readHibernateState(main)) return;
  const ns = main.metadata.namespace ?? "";
  const podName = main.metadata.name ?? "";
  if (await hibernateOwned(pass, deps.client, ns, podName)) return;
  if (await hibernateOwned(pass, deps.apiReader, ns, podName)) return;
  pass.log.warn("wake: withdrawing the hibernate request on {pod}, which nothing owns", {
    pod: podRef(main),
  });
  // The request may have made a tag already: it is marked orphaned in the same write, so it
  // goes once the VM is back even if this wake is over by then.
  if (!await withdrawUnownedAsk(pass, main, "wake")) return;
  emit(
    pass,
    "Warning",
    REASON_ORPHAN_HIBERNATE_WITHDRAWN,
    `restore pod ${main.metadata.name} carried a hibernate request no CocoonHibernation or ` +
      `suspend owns; withdrawn so the wake can finish`,
  );
}

/**
 * A node hint while the main, not restored from it, runs live in place (an aborted release, a
 * kill between the hint write and the deletes) is older than that run: cleared, so a failed main
 * deleted later is never restored from the stale tag. The stored pod decides, as a stale cache
 * could still show a main the release already deleted. True when the hint was cleared.
 */
async function clearStaleHint(pass: SetPass, main: Pod): Promise<boolean> {
  const { cs, deps } = pass;
  // Waking is the set's own wake: its completion clears the hint and scores the landing.
  if (cs.status?.phase === "Waking") return false;
  if (cs.spec.suspend || readRestoreFromHibernate(main) || readHibernateState(main)) return false;
  if (!vmLive(main)) return false;
  const live = await readStoredMain(pass, main, "wake: confirm in-place run of");
  if (
    !live || live.metadata.deletionTimestamp || readHibernateState(live) ||
    readRestoreFromHibernate(live) || !vmLive(live)
  ) return false;
  const hint = cs.metadata.annotations?.[ANNOTATION_HIBERNATED_ON_NODE] ?? "";
  pass.log.info("main runs in place: clearing the stale node hint {node}", { node: hint });
  emit(
    pass,
    "Normal",
    REASON_STALE_HINT_CLEARED,
    `main ${main.metadata.name} runs in place; node hint ${hint} from an unfinished release cleared`,
  );
  await patchAnnotations(deps.client, CocoonSets, cs, { [ANNOTATION_HIBERNATED_ON_NODE]: "" }, {
    signal: pass.signal,
  });
  return true;
}
