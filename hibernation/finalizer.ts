/**
 * The finalizer, and every `:hibernate` tag drop of a request (docs/hibernation.md, "Finalizer
 * and the `:hibernate` tag"). A drop always goes through the snapshot gate, which keeps the tag
 * for every other claimant; a refusal or a registry failure is logged, never fails the step.
 * A deleted request's tag kept only for its own target pod is marked orphaned on the pod, so it
 * is dropped once the VM is back.
 *
 * @module
 */
import { getLogger } from "@logtape/logtape";
import { type CocoonHibernation, CocoonHibernations } from "../common/apis/v1/mod.ts";
import { patchOrphanTag } from "../common/k8s/pod_patch.ts";
import { vmLive } from "../common/meta/vm_liveness.ts";
import { parseVMSpec } from "../common/meta/vmspec.ts";
import {
  addFinalizer,
  errorMessage,
  isNotFound,
  patchObject,
  Pods,
  removeFinalizer,
  wrapError,
} from "../kube/mod.ts";
import { HIBERNATE_SNAPSHOT_TAG } from "../snapshot/registry.ts";
import { deleteTagIfAllowed, type Verdict } from "../snapshotgate/mod.ts";
import { namespaceRequests, readTargetPod, requestActor } from "./checks.ts";
import { type Pass, REASON_VM_NAME_REFUSED, recordEvent } from "./status.ts";

const log = getLogger(["cocoon-operator", "hibernation"]);

function logFields(hib: CocoonHibernation, vmName: string) {
  const hibernation = `${hib.metadata.namespace}/${hib.metadata.name}`;
  return { hibernation, vm: vmName, tag: HIBERNATE_SNAPSHOT_TAG };
}

/** Keeps a request until its VM's `:hibernate` tag has been dealt with. */
export const HIBERNATION_FINALIZER = "cocoonhibernation.cocoonset.cocoonstack.io/finalizer";

/** Adds the finalizer when the request lacks it and says whether it did: that pass ends there. */
export async function ensureFinalizer(pass: Pass): Promise<boolean> {
  const { deps, hib, signal } = pass;
  if (hib.metadata.finalizers?.includes(HIBERNATION_FINALIZER)) return false;
  await patchObject(deps.client, CocoonHibernations, hib, (h) => {
    addFinalizer(h, HIBERNATION_FINALIZER);
  }, { optimisticLock: true, signal });
  return true;
}

/**
 * Deletes `<vmName>:hibernate` when the gate allows it, logging a refusal or a failure (a
 * persistent one leaks snapshots); an abort still throws. The verdict, or undefined after a
 * registry failure.
 */
export async function dropHibernateTag(pass: Pass, vmName: string): Promise<Verdict | undefined> {
  const { deps, hib, signal } = pass;
  const tag = HIBERNATE_SNAPSHOT_TAG;
  try {
    const verdict = await deleteTagIfAllowed(deps.gate, requestActor(hib), vmName, tag, signal);
    if (!verdict.allowed) {
      const fields = { ...logFields(hib, vmName), reason: verdict.message };
      log.warn("CocoonHibernation {hibernation} keeps {vm}:{tag}: {reason}", fields);
    }
    return verdict;
  } catch (err) {
    signal.throwIfAborted();
    const fields = { ...logFields(hib, vmName), error: errorMessage(err) };
    log.error(
      "delete hibernate snapshot {vm}:{tag} for CocoonHibernation {hibernation}: {error}",
      fields,
    );
    return undefined;
  }
}

/**
 * Drops the tag of a request being deleted, through the gate, unless another live request
 * tracks the VM (by status.vmName, or by podRef for a duplicate without a status yet: the last
 * one drops it) or the request's own wake restores from it. True when the tag stays for the
 * target pod alone: nobody else will drop it once the VM is back.
 */
async function releaseTag(pass: Pass, vmName: string): Promise<boolean> {
  const { hib } = pass;
  const namespace = hib.metadata.namespace ?? "";
  const podName = hib.spec?.podRef?.name ?? "";
  const peers = await namespaceRequests(pass);
  const heldByAnother = peers.some((o) =>
    o.metadata.uid !== hib.metadata.uid && !o.metadata.deletionTimestamp &&
    ((o.status?.vmName ?? "") === vmName || (o.spec?.podRef?.name ?? "") === podName)
  );
  if (heldByAnother) {
    const message = "CocoonHibernation {hibernation} keeps {vm}:{tag}: another CocoonHibernation " +
      "still tracks it";
    log.info(message, logFields(hib, vmName));
    return false;
  }
  // The request's own claim, which the gate leaves to it: vk-cocoon restores from the tag.
  const pod = hib.status?.phase === "Waking" ? await readTargetPod(pass) : undefined;
  if (pod && parseVMSpec(pod).vmName === vmName && !vmLive(pod)) {
    const fields = { ...logFields(hib, vmName), pod: podName };
    log.warn(
      "CocoonHibernation {hibernation} keeps {vm}:{tag}: pod {pod} is restoring from it",
      fields,
    );
    return true;
  }
  const verdict = await dropHibernateTag(pass, vmName);
  if (!verdict || verdict.allowed) return false;
  if (verdict.kind !== "claimed") {
    recordEvent(pass, "Warning", REASON_VM_NAME_REFUSED, verdict.message);
    return false;
  }
  return verdict.claims.every((c) =>
    c.holder === "Pod" && c.namespace === namespace && c.name === podName
  );
}

/**
 * Runs the finalizer under the lock of the VM the status recorded (the tag it touches). A tag
 * kept for the target pod alone is marked orphaned on it before the finalizer goes: once the
 * request is gone, the mark is all that says the tag is nobody's.
 */
export async function finalize(pass: Pass): Promise<void> {
  const { deps, hib, signal } = pass;
  const vmName = hib.status?.vmName ?? "";
  const release = vmName ? await deps.locks.lock(vmName, signal) : () => {};
  try {
    if (vmName && await releaseTag(pass, vmName)) await markTagOrphaned(pass, vmName);
    await patchObject(deps.client, CocoonHibernations, hib, (h) => {
      removeFinalizer(h, HIBERNATION_FINALIZER);
    }, { optimisticLock: true, signal });
  } finally {
    release();
  }
}

/** A pod gone, or running another VM by now, needs no mark. */
async function markTagOrphaned(pass: Pass, vmName: string): Promise<void> {
  const { deps, hib, signal } = pass;
  const namespace = hib.metadata.namespace ?? "";
  const podName = hib.spec?.podRef?.name ?? "";
  try {
    const pod = await deps.apiReader.get(Pods, namespace, podName, { signal });
    if (pod.metadata.deletionTimestamp || parseVMSpec(pod).vmName !== vmName) return;
    await patchOrphanTag(deps.client, pod, { signal });
  } catch (err) {
    if (isNotFound(err)) return;
    throw wrapError(`mark orphaned ${vmName}:${HIBERNATE_SNAPSHOT_TAG} on pod ${podName}`, err);
  }
  const fields = { ...logFields(hib, vmName), pod: podName };
  log.info(
    "CocoonHibernation {hibernation} leaves {vm}:{tag} to pod {pod} until its VM is back",
    fields,
  );
}
