/**
 * The Orphaned tags step. A pod whose `:hibernate` tag lost its owner (its CocoonHibernation was
 * deleted while the VM still needed the tag, or the set withdrew a hibernate request nobody
 * owned) carries the orphan mark (common/meta orphan_tag.ts). Nobody else drops such a tag, and
 * vk-cocoon wakes a pod without a VM from whatever tag it finds, so a tag that outlives the VM's
 * return can bring old state back: it is dropped through the gate once the VM runs under a new id.
 * A suspend takes the tag over (its resume keeps its tags); while the set's teardown, migration or
 * released-seat wake runs, that flow drops it and the mark waits.
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
import { doing, podRef, readSamePod, type SetPass } from "./pass.ts";
import { podsByName } from "./pods.ts";
import { dropTag } from "./tag_gate.ts";

/** Set phases in which the set's suspend owns its VMs' `:hibernate` tags. */
export const SUSPEND_PHASES: ReadonlySet<string> = new Set(["Suspending", "Suspended"]);

/** Settles the orphan mark of every owned pod that carries one. */
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
  const tag = HIBERNATE_SNAPSHOT_TAG;
  if (cs.spec.suspend || SUSPEND_PHASES.has(cs.status?.phase ?? "")) {
    pass.log.info("the suspend takes over {vm}:{tag} of {pod}", {
      vm: vmName,
      tag,
      pod: podRef(pod),
    });
    return await clearMark(pass, pod);
  }
  if (setFlowOnVM(cs, vmName) !== "" || !orphanTagDropDue(pod)) return;
  // Fresh state for the delete: a lagging cache may miss a new hibernate request or a settled mark.
  const stored = await readSamePod(pass, pod, "orphaned tag: read");
  if (!stored || !orphanTagDropDue(stored)) return;
  const verdict: Verdict = await doing(
    `drop orphaned hibernate snapshot ${vmName}`,
    dropTag(pass, vmName, tag),
  );
  // A claimant (a new request on the VM) keeps the tag: the mark stays and the next pass asks
  // again, unless that request starts a round of its own, which takes the mark off. A name the
  // set may not delete under never changes: the mark goes.
  if (!verdict.allowed && verdict.kind === "claimed") return;
  pass.log.info("VM {vm} of {pod} runs again: orphaned {vm}:{tag} settled", {
    vm: vmName,
    tag,
    pod: podRef(pod),
  });
  await clearMark(pass, stored);
}

async function clearMark(pass: SetPass, pod: Pod): Promise<void> {
  try {
    await patchClearOrphanTag(pass.deps.client, pod, pass.signal);
  } catch (err) {
    // A pod gone meanwhile took its mark with it.
    if (!isNotFound(err)) throw wrapError(`clear orphan mark on ${podRef(pod)}`, err);
  }
}

/**
 * Withdraws a hibernate request nobody owns (no CocoonHibernation, not the set's suspend) and, in
 * the same write, marks the tag it may have made as orphaned, with the VM id of the pod as stored
 * (a lagging copy could name an older VM and let the tag go before the VM it restores). False when
 * the stored pod is gone, replaced or no longer asks.
 */
export async function withdrawUnownedAsk(pass: SetPass, pod: Pod, what: string): Promise<boolean> {
  const stored = await readSamePod(pass, pod, `${what}: read`);
  if (!stored || !readHibernateState(stored)) return false;
  await doing(
    `${what}: clear hibernate on ${podRef(pod)}`,
    patchOrphanTag(pass.deps.client, stored, { withdraw: true, signal: pass.signal }),
  );
  return true;
}
