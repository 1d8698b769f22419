/**
 * The hibernate step (docs/hibernation.md, "What a request does", `Hibernate`): ask vk-cocoon to
 * hibernate the VM (the pod's hibernate annotation), then poll until this round's hibernation is
 * confirmed or the deadline passes.
 *
 * Confirmation needs both signals, in this order: the VM's own confirmation on the pod
 * (vmHibernationConfirmed in common/meta, the rule a migration and a suspend use too: vk-cocoon's
 * lifecycle pair `hibernated` at the pod's CocoonSet generation stamp, or with a vk-cocoon that
 * writes no lifecycle annotations the hibernate request and a cleared VM id), and then the
 * `:hibernate` manifest in the registry. Probing the registry only after the VM confirmed keeps a
 * tag left over from an earlier suspend from passing for this round's snapshot.
 *
 * @module
 */
import {
  COCOON_HIBERNATION_PHASE_HIBERNATED,
  COCOON_HIBERNATION_PHASE_HIBERNATING,
} from "../common/apis/v1/mod.ts";
import { patchHibernateAsk } from "../common/k8s/pod_patch.ts";
import { readLifecycleState } from "../common/meta/lifecycle.ts";
import { vmHibernationConfirmed } from "../common/meta/vm_liveness.ts";
import { isNotFound, Pods, wrapError } from "../kube/mod.ts";
import type { Pod, Result } from "../kube/mod.ts";
import { hasHibernateSnapshot } from "../snapshot/registry.ts";
import type { RequestPass, StepDeps } from "./pass.ts";
import { HIBERNATE_TIMEOUT_MS, phaseDeadlineExceeded, REQUEUE_INTERVAL_MS } from "./timers.ts";

/** What the registry said about `<vm>:hibernate` this pass; "unprobed" until the VM confirmed. */
export type SnapshotProbe = "present" | "absent" | "error" | "unprobed";

/** The one thing a hibernate pass does, decided by hibernateOutcome. */
export type HibernateOutcome =
  /** Both signals are there: enter Hibernated. */
  | "hibernated"
  /** The registry could not be asked and there is time left: fail the pass, retried with backoff. */
  | "retry"
  /** Hibernating for longer than its deadline: Failed, `HibernateTimedOut`. */
  | "timed-out"
  /** Still waiting for the VM or its snapshot: Hibernating, look again in 5 s. */
  | "hibernating";

/**
 * The outcome of a hibernate pass from this round's snapshot probe and the deadline. A present
 * snapshot wins even past the deadline; a probe error is never read as "absent" before the
 * deadline, and at the deadline it no longer holds the request.
 */
export function hibernateOutcome(snapshot: SnapshotProbe, expired: boolean): HibernateOutcome {
  if (snapshot === "present") return "hibernated";
  if (expired) return "timed-out";
  return snapshot === "error" ? "retry" : "hibernating";
}

/**
 * One hibernate pass: Hibernated once confirmed, Failed past the 3-minute deadline, otherwise
 * Hibernating with a look again in 5 s (hibernateOutcome). A registry probe error before the
 * deadline is thrown (the controller retries with backoff).
 */
export async function reconcileHibernate(deps: StepDeps, pass: RequestPass): Promise<Result> {
  const { hib, pod, vmName, signal } = pass;
  try {
    await patchHibernateAsk(deps.client, pod, signal);
  } catch (err) {
    throw wrapError(`set hibernate annotation on pod ${pod.metadata.name}`, err);
  }
  let snapshot: SnapshotProbe = "unprobed";
  let probeError: unknown;
  // The registry is asked only once the VM confirmed: a tag left by an earlier round must not
  // pass for this one's snapshot.
  if (await vmHibernationConfirmedStored(deps, pod, signal)) {
    try {
      snapshot = await hasHibernateSnapshot(deps.registry, vmName, signal) ? "present" : "absent";
    } catch (err) {
      snapshot = "error";
      probeError = err;
    }
  }
  const expired = phaseDeadlineExceeded(
    hib,
    COCOON_HIBERNATION_PHASE_HIBERNATING,
    HIBERNATE_TIMEOUT_MS,
    deps.clock.now(),
  );
  switch (hibernateOutcome(snapshot, expired)) {
    case "hibernated":
      await deps.transitions.enter(hib, COCOON_HIBERNATION_PHASE_HIBERNATED, vmName, signal);
      return {};
    case "retry":
      throw probeError;
    case "timed-out":
      await deps.transitions.timedOut(hib, COCOON_HIBERNATION_PHASE_HIBERNATING, vmName, signal);
      return {};
    case "hibernating":
      await deps.transitions.enter(hib, COCOON_HIBERNATION_PHASE_HIBERNATING, vmName, signal);
      return { requeueAfter: REQUEUE_INTERVAL_MS };
  }
}

/**
 * vmHibernationConfirmed on pod and, when it passes by the cleared VM id of a vk-cocoon that
 * writes no lifecycle annotations, on the stored pod too: that signal carries no round, and a
 * lagging cache can still show an earlier round's hibernated pod after the VM was woken and asked
 * again, which would read Hibernated (and an earlier round's tag) while the VM runs.
 */
async function vmHibernationConfirmedStored(
  deps: StepDeps,
  pod: Pod,
  signal: AbortSignal,
): Promise<boolean> {
  if (!vmHibernationConfirmed(pod)) return false;
  if (readLifecycleState(pod) !== "") return true;
  let stored: Pod;
  try {
    stored = await deps.reader.get(Pods, pod.metadata.namespace ?? "", pod.metadata.name ?? "", {
      signal,
    });
  } catch (err) {
    if (isNotFound(err)) return false;
    throw wrapError(`re-read hibernated pod ${pod.metadata.name}`, err);
  }
  return stored.metadata.uid === pod.metadata.uid && vmHibernationConfirmed(stored);
}
