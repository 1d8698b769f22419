/** Which pods belong to a CocoonSet: labelled with its name AND controlled by it (by UID). */
import { isControlledBy, isValidLabelValue, type Pod, Pods, type Reader } from "../kube/mod.ts";
import type { CocoonSet } from "../common/apis/v1/cocoonset_types.ts";
import { LABEL_COCOON_SET } from "../common/meta/mod.ts";

/** How owned pods are read. */
export interface ListOwnedOptions {
  /**
   * Return the cache's own objects instead of copies (the cached reader's
   * unsafeDisableDeepCopy): only for callers that never mutate them.
   */
  unsafeDisableDeepCopy?: boolean;
}

/**
 * The pods labelled for cs that cs controls. A stale label alone (a pod left by an earlier set of
 * the same name, or a hand-made one) never makes a pod count, get suspended or get deleted.
 */
export async function listOwnedPods(
  reader: Reader,
  cs: CocoonSet,
  signal?: AbortSignal,
  opts: ListOwnedOptions = {},
): Promise<Pod[]> {
  const name = cs.metadata.name ?? "";
  // A set name over 63 characters is a valid object name but no label value: no pod carries it
  // (the API server refuses such a label), and a selector on it is refused. Listing would fail
  // every pass, teardown included, and the set could never be deleted.
  if (!isValidLabelValue(name)) return [];
  const list = await reader.list(Pods, {
    namespace: cs.metadata.namespace,
    labelSelector: { [LABEL_COCOON_SET]: name },
    signal,
    ...(opts.unsafeDisableDeepCopy ? { unsafeDisableDeepCopy: true } : {}),
  });
  return filterOwnedPods(list.items, cs);
}

/** The pods cs controls. */
export function filterOwnedPods(pods: readonly Pod[], cs: CocoonSet): Pod[] {
  return pods.filter((p) => isControlledBy(p, cs));
}
