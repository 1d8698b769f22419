/**
 * Orphaned tags (docs/cocoonset.md, "One reconcile pass", and "Snapshot safety"): a pod of the
 * set whose `:hibernate` tag lost its owner carries the orphan mark (common/meta orphan_tag.ts) —
 * its CocoonHibernation was deleted while the VM still needed the tag, or the set withdrew a
 * hibernate request nobody owned. Nobody else drops such a tag once the VM runs again, and
 * vk-cocoon wakes a pod it tracks without a VM from whatever `<vm>:hibernate` holds, so a tag
 * that outlives the VM's return can bring old state back later. This step drops it, through the
 * snapshot gate, once the pod shows its VM live under a new id, and removes the mark.
 *
 * A suspend of the set takes the tag over instead (its resume keeps its tags, as the Go operator
 * does): the mark is removed. While the set's own teardown, migration or released-seat wake
 * runs, that flow drops the tag at its end; the mark waits.
 *
 * @module
 */
import { isNotFound, type Pod, wrapError } from "../kube/mod.ts";
import { patchClearOrphanTag, patchOrphanTag } from "../common/k8s/pod_patch.ts";
import {
  orphanTagDropDue,
  parseVMSpec,
  readHibernateState,
  readOrphanTagMark,
} from "../common/meta/mod.ts";
import { setFlowOnVM, type Verdict } from "../snapshotgate/mod.ts";
import { HIBERNATE_SNAPSHOT_TAG } from "../snapshot/registry.ts";
import { podRef, readStoredPod, type SetPass } from "./pass.ts";
import { podsByName } from "./pods.ts";
import { dropTag } from "./tag_gate.ts";

/** Set phases in which the set's suspend owns its VMs' `:hibernate` tags. */
export const SUSPEND_PHASES: ReadonlySet<string> = new Set(["Suspending", "Suspended"]);

/** Settles the orphan mark of every owned pod that carries one (see the module doc). */
export async function settleOrphanTags(pass: SetPass): Promise<void> {
  if (!pass.deps.registry) return;
  for (const pod of podsByName(pass.classified)) {
    if (readOrphanTagMark(pod) === undefined) continue;
    pass.signal.throwIfAborted();
    await settleOrphanTag(pass, pod);
  }
}

async function settleOrphanTag(pass: SetPass, pod: Pod): Promise<void> {
  const { cs } = pass;
  const vmName = parseVMSpec(pod).vmName;
  if (cs.spec.suspend || SUSPEND_PHASES.has(cs.status?.phase ?? "")) {
    pass.log.info("the suspend takes over {vm}:{tag} of {pod}", {
      vm: vmName,
      tag: HIBERNATE_SNAPSHOT_TAG,
      pod: podRef(pod),
    });
    return await clearMark(pass, pod);
  }
  if (setFlowOnVM(cs, vmName) !== "" || !orphanTagDropDue(pod)) return;
  // The one moment that needs fresh state: the stored pod must still be marked and show the VM
  // back (a lagging cache may miss a new hibernate request, or a mark already settled).
  const stored = await readStoredPod(
    pass,
    pod.metadata.namespace ?? "",
    pod.metadata.name ?? "",
    "orphaned tag: read",
  );
  if (!stored || stored.metadata.uid !== pod.metadata.uid || !orphanTagDropDue(stored)) return;
  let verdict: Verdict;
  try {
    verdict = await dropTag(pass, vmName, HIBERNATE_SNAPSHOT_TAG);
  } catch (err) {
    // The mark stays: the pass fails and is retried with backoff.
    throw wrapError(`drop orphaned hibernate snapshot ${vmName}`, err);
  }
  // A claimant (a new request on the VM) keeps the tag for now: the mark stays and the next pass
  // asks again, unless that claimant starts a round of its own (a new hibernate request takes
  // the mark off). A name the set may not delete under never changes: the mark goes.
  if (!verdict.allowed && verdict.kind === "claimed") return;
  pass.log.info("VM {vm} of {pod} runs again: orphaned {vm}:{tag} settled", {
    vm: vmName,
    tag: HIBERNATE_SNAPSHOT_TAG,
    pod: podRef(pod),
  });
  await clearMark(pass, stored);
}

async function clearMark(pass: SetPass, pod: Pod): Promise<void> {
  try {
    await patchClearOrphanTag(pass.deps.client, pod, pass.signal);
  } catch (err) {
    // A pod gone meanwhile took its mark with it.
    if (isNotFound(err)) return;
    throw wrapError(`clear orphan mark on ${podRef(pod)}`, err);
  }
}

/**
 * Withdraws a hibernate request of pod that nobody owns (no CocoonHibernation, not the set's
 * suspend) and marks, in the same write, the tag that request may have made as orphaned, so the
 * tag goes once the VM is back (settleOrphanTags). The mark records the VM id of the pod as
 * stored: from a lagging copy it could name an older VM and let the tag go while the VM shown now
 * is the one about to be restored from it. False when the stored pod is gone, another pod, or no
 * longer asks.
 */
export async function withdrawUnownedAsk(pass: SetPass, pod: Pod, what: string): Promise<boolean> {
  const stored = await readStoredPod(
    pass,
    pod.metadata.namespace ?? "",
    pod.metadata.name ?? "",
    `${what}: read`,
  );
  if (!stored || stored.metadata.uid !== pod.metadata.uid || !readHibernateState(stored)) {
    return false;
  }
  try {
    await patchOrphanTag(pass.deps.client, stored, { withdraw: true, signal: pass.signal });
  } catch (err) {
    throw wrapError(`${what}: clear hibernate on ${podRef(pod)}`, err);
  }
  return true;
}
