/**
 * The hibernate step: ask vk-cocoon to hibernate the VM (the pod's hibernate annotation), then
 * poll until this round's hibernation is confirmed or the deadline passes.
 *
 * Confirmation needs both signals, in this order: vk-cocoon's lifecycle pair on the pod
 * (`lifecycle-state=hibernated` with an observed generation at least the pod's CocoonSet
 * generation stamp — vk writes the two together, so an older round's pair is rejected), and then
 * the `:hibernate` manifest in the registry. Probing the registry only after the lifecycle pair
 * qualifies keeps a tag left over from an earlier suspend from passing for this round's snapshot.
 *
 * @module
 */
import {
  CocoonHibernationPhaseHibernated,
  CocoonHibernationPhaseHibernating,
} from "../common/apis/v1/mod.ts";
import { patchHibernateAsk } from "../common/k8s/client_patch.ts";
import {
  LifecycleStateHibernated,
  readCocoonSetGeneration,
  readLifecycleStatus,
} from "../common/meta/lifecycle.ts";
import type { Pod } from "../kube/core.ts";
import { wrapError } from "../kube/errors.ts";
import type { Result } from "../kube/reconcile.ts";
import { hasHibernateSnapshot } from "../snapshot/registry.ts";
import type { Pass, StepDeps } from "./pass.ts";
import { HIBERNATE_TIMEOUT_MS, phaseDeadlineExceeded, REQUEUE_INTERVAL_MS } from "./status.ts";

/** Whether vk-cocoon reports this round's hibernation as finished on the pod. */
export function lifecycleReportsHibernated(pod: Pod): boolean {
  const lc = readLifecycleStatus(pod);
  return lc.state === LifecycleStateHibernated &&
    lc.observedGeneration >= readCocoonSetGeneration(pod);
}

/**
 * One hibernate pass: Hibernated once confirmed, Failed past the 3-minute deadline, otherwise
 * Hibernating with a look again in 5 s. A registry probe error before the deadline is thrown (the
 * controller retries with backoff) and never read as "absent"; at the deadline it no longer holds
 * the request in Hibernating.
 */
export async function reconcileHibernate(deps: StepDeps, pass: Pass): Promise<Result> {
  const { hib, pod, vmName, signal } = pass;
  try {
    await patchHibernateAsk(deps.client, pod, signal);
  } catch (err) {
    throw wrapError(`set hibernate annotation on pod ${pod.metadata.name}`, err);
  }
  const expired = () =>
    phaseDeadlineExceeded(
      hib,
      CocoonHibernationPhaseHibernating,
      HIBERNATE_TIMEOUT_MS,
      deps.clock.now(),
    );
  if (lifecycleReportsHibernated(pod)) {
    let present = false;
    try {
      present = await hasHibernateSnapshot(deps.registry, vmName, signal);
    } catch (err) {
      if (!expired()) throw err;
    }
    if (present) {
      await deps.transitions.enter(hib, CocoonHibernationPhaseHibernated, vmName, signal);
      return {};
    }
  }
  if (expired()) {
    await deps.transitions.timedOut(hib, CocoonHibernationPhaseHibernating, vmName, signal);
    return {};
  }
  await deps.transitions.enter(hib, CocoonHibernationPhaseHibernating, vmName, signal);
  return { requeueAfter: REQUEUE_INTERVAL_MS };
}
