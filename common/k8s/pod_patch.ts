/**
 * The cocoon-specific patch helpers (cocoon-common's k8s/clientpatch.go): each writes one
 * annotation of the pod contract and makes no API call when the pod already says so. The generic
 * merge-from helpers they build on live in kube/client_patch.ts.
 *
 * @module
 */
import { patchObject } from "../../kube/client_patch.ts";
import type { Writer } from "../../kube/client.ts";
import { type Pod, Pods } from "../../kube/core.ts";
import {
  applyHibernateState,
  markKeepSnapshotOnDelete,
  readHibernateState,
  readKeepSnapshotOnDelete,
} from "../meta/hibernate.ts";
import { readCocoonSetGeneration, stampCocoonSetGeneration } from "../meta/lifecycle.ts";
import { clearOrphanTagMark, markOrphanTag, readOrphanTagMark } from "../meta/orphan_tag.ts";
import { recordHibernateAsk } from "../meta/vm_liveness.ts";

/**
 * Sets (true) or removes (false) the hibernate annotation on the pod. Makes no API call when
 * the pod already is in that state.
 */
export async function patchHibernateState(
  client: Writer,
  pod: Pod,
  state: boolean,
  signal?: AbortSignal,
): Promise<void> {
  if (readHibernateState(pod) === state) return;
  await patchObject(client, Pods, pod, (p) => applyHibernateState(state, p), { signal });
}

/**
 * Asks the pod's VM to hibernate (the hibernate annotation) and records, in the same patch, the
 * VM id it shows now (common/meta vmMayBeLeaving). A new ask starts a round whose tag belongs to
 * the asker, so an orphan mark left from an earlier round goes in the same patch. No API call
 * when the pod already asks.
 */
export async function patchHibernateAsk(
  client: Writer,
  pod: Pod,
  signal?: AbortSignal,
): Promise<void> {
  if (readHibernateState(pod)) return;
  await patchObject(client, Pods, pod, (p) => {
    applyHibernateState(true, p);
    recordHibernateAsk(p);
    clearOrphanTagMark(p);
  }, { signal });
}

/**
 * Marks the pod's `:hibernate` tag orphaned (common/meta orphan_tag.ts), recording the VM id the
 * pod shows; withdraw also removes its hibernate request in the same patch. Pass the pod as
 * stored: the recorded id decides when the tag may go. No API call when nothing would change.
 */
export async function patchOrphanTag(
  client: Writer,
  pod: Pod,
  opts: { withdraw?: boolean; signal?: AbortSignal } = {},
): Promise<void> {
  await patchObject(client, Pods, pod, (p) => {
    if (opts.withdraw) applyHibernateState(false, p);
    markOrphanTag(p);
  }, { signal: opts.signal });
}

/** Removes the pod's orphan mark. No API call when it carries none. */
export async function patchClearOrphanTag(
  client: Writer,
  pod: Pod,
  signal?: AbortSignal,
): Promise<void> {
  if (readOrphanTagMark(pod) === undefined) return;
  await patchObject(client, Pods, pod, clearOrphanTagMark, { signal });
}

/**
 * Marks the pod's deletion as a seat release before it is deleted. No API call when the mark is
 * already there.
 */
export async function patchKeepSnapshotOnDelete(
  client: Writer,
  pod: Pod,
  signal?: AbortSignal,
): Promise<void> {
  if (readKeepSnapshotOnDelete(pod)) return;
  await patchObject(client, Pods, pod, markKeepSnapshotOnDelete, { signal });
}

/**
 * Stamps the owning CocoonSet's generation on the pod so vk-cocoon can echo it back as the
 * lifecycle observed generation. No API call when the stamp is already right.
 */
export async function patchCocoonSetGeneration(
  client: Writer,
  pod: Pod,
  generation: number,
  signal?: AbortSignal,
): Promise<void> {
  if (readCocoonSetGeneration(pod) === generation) return;
  await patchObject(
    client,
    Pods,
    pod,
    (p) => stampCocoonSetGeneration(p, generation),
    { signal },
  );
}
