/**
 * The Orphaned tags step: a `:hibernate` tag that lost its owner (the pod's orphan mark) would wake
 * a VM-less pod with old state, so it goes through the gate once the VM runs under a new id. A
 * suspend takes it over; the set's teardown, migration or released-seat wake drops it themselves.
 */
import { ignoreNotFound, type Pod } from "../kube/mod.ts";
import { patchClearOrphanTag, patchOrphanTag } from "../common/k8s/pod_patch.ts";
import {
  orphanTagDropDue,
  parseVMSpec,
  readHibernateState,
  readOrphanTagMark,
} from "../common/meta/mod.ts";
import { cachedTagClaims, setFlowOnVM } from "../snapshotgate/mod.ts";
import { HIBERNATE_SNAPSHOT_TAG } from "../snapshot/registry.ts";
import { claimSources, doing, podRef, readSamePod, type SetPass } from "./pass.ts";
import { podsByName } from "./pods.ts";
import { dropTag, setActor } from "./tag_gate.ts";

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
  // A claim the cache shows (a request waking the VM) keeps tag and mark until its holder's round
  // settles them; only a drop that may go ahead needs the reads past the cache.
  const { index } = claimSources(pass);
  const held = await cachedTagClaims(index, vmName, tag, setActor(cs), pass.signal);
  if (held.some((c) => !c.collision)) return;
  // Fresh state for the delete: a lagging cache may miss a new hibernate request or a settled mark.
  const stored = await readSamePod(pass, pod, "orphaned tag: read");
  if (!stored || !orphanTagDropDue(stored)) return;
  const verdict = await doing(`drop orphaned ${vmName}:${tag}`, dropTag(pass, vmName, tag));
  // A claimant (a new request on the VM) keeps the tag and the mark, until its own round takes
  // the mark off; a name the set may not delete under never changes, so the mark goes.
  if (!verdict.allowed && verdict.kind === "claimed") return;
  pass.log.info("VM {vm} of {pod} runs again: orphaned {vm}:{tag} settled", {
    vm: vmName,
    tag,
    pod: podRef(pod),
  });
  await clearMark(pass, stored);
}

/** Clears the orphan mark; a pod gone meanwhile took it along. */
async function clearMark(pass: SetPass, pod: Pod): Promise<void> {
  const patch = patchClearOrphanTag(pass.deps.client, pod, pass.signal).catch(ignoreNotFound);
  await doing(`clear orphan mark on ${podRef(pod)}`, patch);
}

/**
 * Withdraws a hibernate request nobody owns and, in the same write, marks its tag orphaned with
 * the VM id of the pod as stored (a lagging copy could name an older VM and let the tag go early).
 * False when the stored pod is gone, replaced or no longer asks.
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
