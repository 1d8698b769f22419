/**
 * The finalizer (docs/hibernation.md, "One pass" steps 1 and 2, and "Finalizer and the
 * `:hibernate` tag"): added in a pass of its own; on deletion it drops the `:hibernate` tag of the
 * VM the request recorded, unless another live request still tracks that VM or its own wake is
 * restoring from it, and lets the request go. The drop goes through the snapshot gate (tag.ts),
 * which keeps the tag for every other claimant. A tag kept only because the target pod still
 * needs it (hibernated, restoring) is marked orphaned on the pod before the request goes, so it
 * is dropped once the VM is back. A registry failure is logged at error level and never holds
 * the deletion (the snapshot may then be left behind).
 *
 * @module
 */
import { getLogger } from "@logtape/logtape";
import {
  COCOON_HIBERNATION_PHASE_WAKING,
  type CocoonHibernation,
  CocoonHibernations,
} from "../common/apis/v1/mod.ts";
import { vmLive } from "../common/meta/vm_liveness.ts";
import { parseVMSpec } from "../common/meta/vmspec.ts";
import {
  addFinalizer,
  isNotFound,
  patchObject,
  Pods,
  removeFinalizer,
  wrapError,
} from "../kube/mod.ts";
import type { Client, EventRecorder } from "../kube/mod.ts";
import type { Registry } from "../snapshot/registry.ts";
import type { Verdict, VMNameIndex } from "../snapshotgate/mod.ts";
import { patchOrphanTag } from "../common/k8s/pod_patch.ts";
import { REASON_VM_NAME_REFUSED, recordRequestEvent } from "./events.ts";
import { dropHibernateTag } from "./tag.ts";
import { readTargetPod, type TargetReaders } from "./target_pod.ts";
import type { StripedLock } from "./vm_lock.ts";
import { HIBERNATE_SNAPSHOT_TAG } from "../snapshot/registry.ts";

const log = getLogger(["cocoon-operator", "hibernation"]);

/** Keeps a request until its VM's `:hibernate` tag has been dealt with. */
export const HIBERNATION_FINALIZER = "cocoonhibernation.cocoonset.cocoonstack.io/finalizer";

/** What the finalizer reads, deletes, records and locks with. */
export interface FinalizerDeps extends TargetReaders {
  client: Client;
  /** The cache's VM-name index, for the gate. */
  index: VMNameIndex;
  registry: Registry;
  recorder: EventRecorder;
  locks: StripedLock;
}

/**
 * Adds the finalizer when hib lacks it and says whether it did: that pass ends there, and the
 * next one starts from the stored object, finalizer included (status untouched).
 */
export async function ensureFinalizer(
  client: Client,
  hib: CocoonHibernation,
  signal: AbortSignal,
): Promise<boolean> {
  if (hib.metadata.finalizers?.includes(HIBERNATION_FINALIZER)) return false;
  await patchObject(client, CocoonHibernations, hib, (h) => {
    addFinalizer(h, HIBERNATION_FINALIZER);
  }, { optimisticLock: true, signal });
  return true;
}

/**
 * Whether another live request still tracks the VM of a request being deleted (by status.vmName,
 * or by pod reference, which also covers a duplicate that has not written a status yet). The last
 * holder drops the shared `:hibernate` tag; dropping it earlier would leave the others reporting
 * Hibernated with no snapshot behind them.
 */
export function vmHeldByAnother(
  hib: CocoonHibernation,
  namespaceRequests: readonly CocoonHibernation[],
): boolean {
  const vmName = hib.status?.vmName ?? "";
  const podName = hib.spec?.podRef?.name ?? "";
  return namespaceRequests.some((o) =>
    o.metadata.uid !== hib.metadata.uid && !o.metadata.deletionTimestamp &&
    ((o.status?.vmName ?? "") === vmName || (o.spec?.podRef?.name ?? "") === podName)
  );
}

/**
 * The request's own claim on the tag, which the gate leaves to it: it was Waking and the VM of
 * its pod does not run yet, so vk-cocoon is restoring from the tag. Every other claimant (a
 * hibernated or restoring pod, a set, another request) is the gate's.
 */
async function ownWakeNeedsTag(
  readers: TargetReaders,
  hib: CocoonHibernation,
  vmName: string,
  signal: AbortSignal,
): Promise<boolean> {
  if (hib.status?.phase !== COCOON_HIBERNATION_PHASE_WAKING) return false;
  const pod = await readTargetPod(
    readers,
    hib.metadata.namespace ?? "",
    hib.spec.podRef.name,
    signal,
  );
  if (pod === undefined || parseVMSpec(pod).vmName !== vmName) return false;
  return !vmLive(pod);
}

/**
 * Whether every claim that kept the tag is the request's own target pod's (asked to hibernate,
 * restoring): then nobody is left to drop the tag once the VM runs again. A set's flow, another
 * request or another namespace keeps it for its own flow.
 */
function keptForTargetOnly(hib: CocoonHibernation, verdict: Verdict | undefined): boolean {
  if (!verdict || verdict.allowed || verdict.kind !== "claimed") return false;
  return verdict.claims.every((c) =>
    c.holder === "Pod" && c.namespace === hib.metadata.namespace &&
    c.name === hib.spec?.podRef?.name
  );
}

/**
 * Drops `<vmName>:hibernate` for a request being deleted, unless another live request still
 * tracks the VM or the request's own wake is restoring from it (both logged); the gate keeps it
 * for every other claimant. A refused VM name gets a `VMNameRefused` Warning. True when the tag
 * stays only for the target pod's sake (it is hibernated, or restoring from the tag): the tag is
 * then orphaned.
 */
async function releaseTag(
  deps: FinalizerDeps,
  hib: CocoonHibernation,
  vmName: string,
  signal: AbortSignal,
): Promise<boolean> {
  const hibernation = `${hib.metadata.namespace}/${hib.metadata.name}`;
  const peers = await deps.client.list(CocoonHibernations, {
    namespace: hib.metadata.namespace,
    signal,
  });
  if (vmHeldByAnother(hib, peers.items)) {
    log.info(
      "CocoonHibernation {hibernation} keeps {vm}:{tag}: another CocoonHibernation still tracks it",
      { vm: vmName, tag: HIBERNATE_SNAPSHOT_TAG, hibernation },
    );
    return false;
  }
  if (await ownWakeNeedsTag(deps, hib, vmName, signal)) {
    log.warn("CocoonHibernation {hibernation} keeps {vm}:{tag}: pod {pod} is restoring from it", {
      pod: hib.spec.podRef.name,
      vm: vmName,
      tag: HIBERNATE_SNAPSHOT_TAG,
      hibernation,
    });
    return true;
  }
  // The gate keeps the tag for any claimant (a released seat, a migration, a hibernated pod),
  // whoever's: that claimant's own flow drops it once done.
  const verdict = await dropHibernateTag(
    { reader: deps.apiReader, index: deps.index, registry: deps.registry },
    vmName,
    hib,
    signal,
  );
  if (verdict && !verdict.allowed && verdict.kind !== "claimed") {
    recordRequestEvent(deps.recorder, hib, "Warning", REASON_VM_NAME_REFUSED, verdict.message);
  }
  return keptForTargetOnly(hib, verdict);
}

/**
 * Marks the tag of the target pod's VM orphaned (common/meta orphan_tag.ts), so whoever sees the
 * VM back drops it: the pod's CocoonSet (cocoonset/orphan_tags.ts) or a later request's wake.
 * The mark records the VM id of the pod as stored. A pod gone or running another VM by now
 * needs no mark.
 */
async function markTagOrphaned(
  deps: FinalizerDeps,
  hib: CocoonHibernation,
  vmName: string,
  signal: AbortSignal,
): Promise<void> {
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
  log.info("CocoonHibernation {hibernation} leaves {vm}:{tag} to pod {pod} until its VM is back", {
    hibernation: `${namespace}/${hib.metadata.name}`,
    vm: vmName,
    tag: HIBERNATE_SNAPSHOT_TAG,
    pod: podName,
  });
}

/** Runs the finalizer of a request being deleted (see the module doc), under its VM's lock. */
export async function finalize(
  deps: FinalizerDeps,
  hib: CocoonHibernation,
  signal: AbortSignal,
): Promise<void> {
  const vmName = hib.status?.vmName ?? "";
  // Lock the recorded VM: that is the tag touched here, whatever the spec names now. A request
  // that never recorded a VM makes no registry call.
  const release = vmName ? await deps.locks.lock(vmName, signal) : () => {};
  try {
    // The mark lands before the finalizer goes: once the request is gone, it is all that says
    // the tag is nobody's.
    if (vmName && await releaseTag(deps, hib, vmName, signal)) {
      await markTagOrphaned(deps, hib, vmName, signal);
    }
    await patchObject(deps.client, CocoonHibernations, hib, (h) => {
      removeFinalizer(h, HIBERNATION_FINALIZER);
    }, { optimisticLock: true, signal });
  } finally {
    release();
  }
}
