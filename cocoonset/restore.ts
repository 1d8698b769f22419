/**
 * Restore intent: when the operator recreates a pod whose VM a CocoonHibernation put to sleep,
 * the new pod must restore from the `:hibernate` snapshot instead of booting the image afresh —
 * a fresh boot that is later re-hibernated would overwrite the real snapshot.
 */
import { type Pod, wrapError } from "../kube/mod.ts";
import type { CocoonHibernation } from "../common/apis/v1/cocoonhibernation_types.ts";
import { CocoonHibernations } from "../common/apis/v1/resources.ts";
import { markRestoreFromHibernate, parseVMSpec } from "../common/meta/mod.ts";
import { hasHibernateSnapshot } from "../snapshot/registry.ts";
import type { CocoonSetDeps, RestoreIntent } from "./pass.ts";

/**
 * A lazy, memoised intent for the namespace. The CocoonHibernation list costs one pass over
 * the namespace's CRs, so it runs only when a pod is actually about to be created.
 */
export function newRestoreIntent(
  deps: CocoonSetDeps,
  namespace: string,
  signal?: AbortSignal,
): RestoreIntent {
  let loaded: Promise<ReadonlySet<string>> | undefined;
  return () => loaded ??= podsRestorableByCR(deps, namespace, signal);
}

/**
 * podRef names of the namespace's CocoonHibernations that accept() keeps, from the cache unless
 * fresh asks for the API server.
 */
export async function hibernationPodNames(
  deps: CocoonSetDeps,
  namespace: string,
  accept: (h: CocoonHibernation) => boolean,
  signal?: AbortSignal,
  fresh = false,
): Promise<Set<string>> {
  let list;
  try {
    // Read-only scan: no copies of every CR in the namespace.
    list = await (fresh ? deps.apiReader : deps.client).list(CocoonHibernations, {
      namespace,
      unsafeDisableDeepCopy: true,
      signal,
    });
  } catch (err) {
    throw wrapError(`list cocoonhibernations in ${namespace}`, err);
  }
  const out = new Set<string>();
  for (const h of list.items) {
    const name = h.spec?.podRef?.name;
    if (name && accept(h)) out.add(name);
  }
  return out;
}

/**
 * Pods whose CocoonHibernation is Hibernated or Waking. The phase decides, not the desire: a CR
 * only reaches Hibernated once the snapshot is confirmed, so a tag leaked by an Active VM never
 * makes its pod restore.
 */
export function podsRestorableByCR(
  deps: CocoonSetDeps,
  namespace: string,
  signal?: AbortSignal,
): Promise<Set<string>> {
  return hibernationPodNames(
    deps,
    namespace,
    (h) => h.status?.phase === "Hibernated" || h.status?.phase === "Waking",
    signal,
  );
}

/** A request that wants its pod hibernated: desire Hibernate, or still Hibernating. */
function hibernatesItsPod(h: CocoonHibernation): boolean {
  return h.spec?.desire === "Hibernate" || h.status?.phase === "Hibernating";
}

/**
 * Which of pods (names in namespace) a CocoonHibernation is hibernating or asked to hibernate:
 * suspend logic leaves them be. From the cache while it shows every one of them owned (a held
 * request costs no API request per pass); otherwise read again past the cache, because the
 * callers clear the hibernate request of a pod not returned, and the pod cache can already
 * show a request's annotation while the request cache does not yet show the request (a
 * just-created one), which would wake a VM against it.
 */
export async function podsHibernatedByCR(
  deps: CocoonSetDeps,
  namespace: string,
  pods: readonly string[],
  signal?: AbortSignal,
): Promise<Set<string>> {
  const cached = await hibernationPodNames(deps, namespace, hibernatesItsPod, signal);
  if (pods.every((name) => cached.has(name))) return cached;
  return await hibernationPodNames(deps, namespace, hibernatesItsPod, signal, true);
}

/**
 * Marks a freshly built pod to restore from `:hibernate` when intent holds and the snapshot
 * exists. Fails closed: a probe error is thrown rather than falling back to a fresh boot.
 */
export async function markRestoreIfHibernated(
  deps: CocoonSetDeps,
  pod: Pod,
  intent: boolean,
  signal?: AbortSignal,
): Promise<void> {
  if (!intent || !deps.registry) return;
  const vmName = parseVMSpec(pod).vmName;
  if (await hasHibernateSnapshot(deps.registry, vmName, signal)) {
    markRestoreFromHibernate(pod);
  }
}
