/**
 * The hibernate step (docs/hibernation.md, "What a request does"): ask vk-cocoon to hibernate
 * the VM through the pod's annotation, then wait for both signals in order, the VM's own
 * confirmation (common/meta vmHibernationConfirmed) and then the `:hibernate` manifest: probing
 * the registry only after the VM confirmed keeps an earlier round's tag from passing for this
 * round's snapshot.
 *
 * @module
 */
import { patchHibernateAsk } from "../common/k8s/pod_patch.ts";
import { readLifecycleState } from "../common/meta/lifecycle.ts";
import { vmHibernationConfirmed } from "../common/meta/vm_liveness.ts";
import { wrapError } from "../kube/mod.ts";
import type { Result } from "../kube/mod.ts";
import { hasHibernateSnapshot } from "../snapshot/registry.ts";
import { readStoredPod } from "./checks.ts";
import {
  enterPhase,
  HIBERNATE_TIMEOUT_MS,
  phaseDeadlineExceeded,
  REQUEUE_INTERVAL_MS,
  type TargetPass,
  timeOut,
} from "./status.ts";

/** What the registry said about `<vm>:hibernate` this pass; "unprobed" until the VM confirmed. */
export type SnapshotProbe = "present" | "absent" | "error" | "unprobed";

/** What a hibernate pass does: enter Hibernated, fail the pass (retried), time out, or wait. */
export type HibernateOutcome = "hibernated" | "retry" | "timed-out" | "hibernating";

/**
 * A present snapshot wins even past the deadline; a probe error is never read as "absent"
 * before the deadline, and at the deadline it no longer holds the request.
 */
export function hibernateOutcome(snapshot: SnapshotProbe, expired: boolean): HibernateOutcome {
  if (snapshot === "present") return "hibernated";
  if (expired) return "timed-out";
  return snapshot === "error" ? "retry" : "hibernating";
}

/** One hibernate pass (hibernateOutcome); a probe error before the deadline is thrown. */
export async function reconcileHibernate(pass: TargetPass): Promise<Result> {
  const { deps, hib, pod, vmName, signal } = pass;
  try {
    await patchHibernateAsk(deps.client, pod, signal);
  } catch (err) {
    throw wrapError(`set hibernate annotation on pod ${pod.metadata.name}`, err);
  }
  let snapshot: SnapshotProbe = "unprobed";
  let probeError: unknown;
  if (await vmHibernationConfirmedStored(pass)) {
    try {
      snapshot = await hasHibernateSnapshot(deps.registry, vmName, signal) ? "present" : "absent";
    } catch (err) {
      snapshot = "error";
      probeError = err;
    }
  }
  const expired = phaseDeadlineExceeded(hib, "Hibernating", HIBERNATE_TIMEOUT_MS, deps.clock.now());
  switch (hibernateOutcome(snapshot, expired)) {
    case "hibernated":
      await enterPhase(pass, "Hibernated", vmName);
      return {};
    case "retry":
      throw probeError;
    case "timed-out":
      await timeOut(pass, "Hibernating", vmName);
      return {};
    case "hibernating":
      await enterPhase(pass, "Hibernating", vmName);
      return { requeueAfter: REQUEUE_INTERVAL_MS };
  }
}

/**
 * vmHibernationConfirmed on pod and, when only a cleared VM id confirms it, on the stored pod
 * too: that signal carries no round, and a lagging cache can show an earlier round's.
 */
async function vmHibernationConfirmedStored(pass: TargetPass): Promise<boolean> {
  if (!vmHibernationConfirmed(pass.pod)) return false;
  if (readLifecycleState(pass.pod) !== "") return true;
  const stored = await readStoredPod(pass);
  return stored !== undefined && vmHibernationConfirmed(stored);
}
