/**
 * Restore intent: a pod recreated for a VM a CocoonHibernation put to sleep restores from its
 * `:hibernate` snapshot (a fresh boot hibernated later would overwrite the real one).
 */
import type { Pod } from "../kube/mod.ts";
import type { CocoonHibernation } from "../common/apis/v1/cocoonhibernation_types.ts";
import { CocoonHibernations } from "../common/apis/v1/resources.ts";
import { markRestoreFromHibernate, parseVMSpec } from "../common/meta/mod.ts";
import { hasHibernateSnapshot } from "../snapshot/registry.ts";
import { doing, type SetPass } from "./pass.ts";

/**
 * The pods whose CocoonHibernation is Hibernated (its snapshot confirmed) or Waking; listed once
 * per pass, when a pod is about to be created.
 */
export function restoreIntent(pass: SetPass): Promise<ReadonlySet<string>> {
  return pass.restorable ??= hibernationPodNames(
    pass,
    (h) => h.status?.phase === "Hibernated" || h.status?.phase === "Waking",
  );
}

/** The pods the namespace's CocoonHibernations name that accept keeps (fresh: uncached). */
export async function hibernationPodNames(
  pass: SetPass,
  accept: (h: CocoonHibernation) => boolean,
  fresh = false,
): Promise<Set<string>> {
  const namespace = pass.cs.metadata.namespace ?? "";
  const reader = fresh ? pass.deps.apiReader : pass.deps.client;
  const opts = { namespace, unsafeDisableDeepCopy: true, signal: pass.signal };
  const list = await doing(
    `list cocoonhibernations in ${namespace}`,
    reader.list(CocoonHibernations, opts),
  );
  const out = new Set<string>();
  for (const h of list.items) {
    const name = h.spec?.podRef?.name;
    if (name && accept(h)) out.add(name);
  }
  return out;
}

/** Whether a CocoonHibernation holds its pod hibernated: asked to, or on its way there. */
export function holdsHibernated(h: CocoonHibernation): boolean {
  return h.spec?.desire === "Hibernate" || h.status?.phase === "Hibernating";
}

/**
 * Which of pods a CocoonHibernation (one accept keeps) holds hibernated. From the cache while it
 * shows them all held, else past it: callers wake a pod not returned, and the pod cache may show a
 * request's annotation before the request cache shows the request.
 */
export async function podsHibernatedByCR(
  pass: SetPass,
  pods: readonly string[],
  accept = holdsHibernated,
): Promise<Set<string>> {
  const cached = await hibernationPodNames(pass, accept);
  if (pods.every((name) => cached.has(name))) return cached;
  return await hibernationPodNames(pass, accept, true);
}

/**
 * Marks a freshly built pod to restore from `:hibernate` when intent holds and the snapshot
 * exists. A probe error is thrown, never read as "no snapshot".
 */
export async function markRestoreIfHibernated(
  pass: SetPass,
  pod: Pod,
  intent: boolean,
  signal = pass.signal,
): Promise<void> {
  const { registry } = pass.deps;
  if (!intent || !registry) return;
  if (await hasHibernateSnapshot(registry, parseVMSpec(pod).vmName, signal)) {
    markRestoreFromHibernate(pod);
  }
}
