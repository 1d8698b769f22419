/**
 * Restore intent: a pod recreated for a VM a CocoonHibernation put to sleep restores from its
 * `:hibernate` snapshot instead of booting afresh (a fresh boot hibernated later would overwrite
 * the real snapshot).
 */
import { type Pod, wrapError } from "../kube/mod.ts";
import type { CocoonHibernation } from "../common/apis/v1/cocoonhibernation_types.ts";
import { CocoonHibernations } from "../common/apis/v1/resources.ts";
import { markRestoreFromHibernate, parseVMSpec } from "../common/meta/mod.ts";
import { hasHibernateSnapshot } from "../snapshot/registry.ts";
import type { CocoonSetDeps } from "./pass.ts";

/** The namespace's restore intent, listed once and only when a pod is about to be created. */
export function newRestoreIntent(
  deps: CocoonSetDeps,
  namespace: string,
  signal?: AbortSignal,
): () => Promise<ReadonlySet<string>> {
  let loaded: Promise<ReadonlySet<string>> | undefined;
  return () => loaded ??= podsRestorableByCR(deps, namespace, signal);
}

/** The pods the namespace's CocoonHibernations name that accept keeps (fresh: uncached). */
export async function hibernationPodNames(
  deps: CocoonSetDeps,
  namespace: string,
  accept: (h: CocoonHibernation) => boolean,
  signal?: AbortSignal,
  fresh = false,
): Promise<Set<string>> {
  let list;
  try {
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
 * Pods whose CocoonHibernation is Hibernated or Waking. The phase decides, not the desire: a
 * request reaches Hibernated only once its snapshot is confirmed.
 */
export function podsRestorableByCR(
  deps: CocoonSetDeps,
  namespace: string,
  signal?: AbortSignal,
): Promise<Set<string>> {
  const restorable = (h: CocoonHibernation) =>
    h.status?.phase === "Hibernated" || h.status?.phase === "Waking";
  return hibernationPodNames(deps, namespace, restorable, signal);
}

/**
 * Which of pods a CocoonHibernation hibernates or was asked to: a suspend's flows leave them be.
 * From the cache while it shows every one of them held; otherwise past the cache, since callers
 * wake a pod not returned and the pod cache may show a request's annotation before the request
 * cache shows the request.
 */
export async function podsHibernatedByCR(
  deps: CocoonSetDeps,
  namespace: string,
  pods: readonly string[],
  signal?: AbortSignal,
): Promise<Set<string>> {
  const held = (h: CocoonHibernation) =>
    h.spec?.desire === "Hibernate" || h.status?.phase === "Hibernating";
  const cached = await hibernationPodNames(deps, namespace, held, signal);
  if (pods.every((name) => cached.has(name))) return cached;
  return await hibernationPodNames(deps, namespace, held, signal, true);
}

/**
 * Marks a freshly built pod to restore from `:hibernate` when intent holds and the snapshot
 * exists. A probe error is thrown, never read as "no snapshot".
 */
export async function markRestoreIfHibernated(
  deps: CocoonSetDeps,
  pod: Pod,
  intent: boolean,
  signal?: AbortSignal,
): Promise<void> {
  if (!intent || !deps.registry) return;
  if (await hasHibernateSnapshot(deps.registry, parseVMSpec(pod).vmName, signal)) {
    markRestoreFromHibernate(pod);
  }
}
