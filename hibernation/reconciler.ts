/**
 * The CocoonHibernation reconciler: one pass in the order of docs/hibernation.md, "One pass".
 * The checks only return a problem; the pass records it with at most one write and one Event.
 *
 * @module
 */
import { getLogger } from "@logtape/logtape";
import { type CocoonHibernation, CocoonHibernations } from "../common/apis/v1/mod.ts";
import { errorMessage, isConflict, isNotFound, realClock, wrapError } from "../kube/mod.ts";
import type { Reconciler, Request, Result } from "../kube/mod.ts";
import { scannedVMNameIndex, type VMNameIndex } from "../snapshotgate/mod.ts";
import {
  direction,
  findTarget,
  namespaceRequests,
  opposingProblem,
  type RequestProblem,
  specProblem,
  tenancyProblem,
} from "./checks.ts";
import { ensureFinalizer, finalize } from "./finalizer.ts";
import { reconcileHibernate } from "./hibernate.ts";
import { clearYielded, markYielded, yieldProblem } from "./precedence.ts";
import {
  fail,
  type HibernationDeps,
  type Pass,
  pending,
  REASON_HIBERNATION_CONFLICT,
  REASON_VM_NAME_REFUSED,
  recordEvent,
  REQUEUE_INTERVAL_MS,
} from "./status.ts";
import { StripedLock } from "./vm_lock.ts";
import { reconcileWake } from "./wake.ts";

const log = getLogger(["cocoon-operator", "hibernation"]);

/** What the reconciler is built with; by default the index lists through client. */
export type HibernationReconcilerDeps =
  & Pick<HibernationDeps, "client" | "apiReader" | "registry" | "recorder">
  & { vmNameIndex?: VMNameIndex; clock?: HibernationDeps["clock"] };

/** Reconciles CocoonHibernations; safe with several workers (see vm_lock.ts). */
export class HibernationReconciler implements Reconciler {
  readonly #deps: HibernationDeps;

  constructor(deps: HibernationReconcilerDeps) {
    const index = deps.vmNameIndex ?? scannedVMNameIndex(deps.client);
    this.#deps = {
      client: deps.client,
      apiReader: deps.apiReader,
      registry: deps.registry,
      recorder: deps.recorder,
      clock: deps.clock ?? realClock,
      gate: { reader: deps.apiReader, index, registry: deps.registry },
      locks: new StripedLock(),
    };
  }

  async reconcile(req: Request, signal: AbortSignal): Promise<Result> {
    try {
      return await this.#reconcile(req, signal);
    } catch (err) {
      // A write computed from a copy that has since moved on: look again with fresh data.
      if (!isConflict(err)) throw err;
      log.debug("conflict on {hibernation}, retrying: {error}", {
        hibernation: `${req.namespace}/${req.name}`,
        error: errorMessage(err),
      });
      return { requeue: true };
    }
  }

  async #reconcile(req: Request, signal: AbortSignal): Promise<Result> {
    const deps = this.#deps;
    let hib: CocoonHibernation;
    try {
      hib = await deps.client.get(CocoonHibernations, req.namespace, req.name, { signal });
    } catch (err) {
      if (isNotFound(err)) return {};
      throw wrapError(`get hibernation ${req.namespace}/${req.name}`, err);
    }
    const pass: Pass = { deps, hib, signal };
    if (hib.metadata.deletionTimestamp) {
      await finalize(pass);
      return {};
    }
    if (await ensureFinalizer(pass)) return { requeue: true };
    const invalid = specProblem(hib);
    if (invalid !== undefined) {
      return await record(pass, { problem: "invalid-spec", message: invalid });
    }
    const target = await findTarget(pass);
    if ("problem" in target) return await record(pass, target);
    const { pod, vmName } = target;
    const refused = await tenancyProblem(pass, vmName, false);
    if (refused) return await record(pass, refused);
    const release = await deps.locks.lock(vmName, signal);
    try {
      const namespace = hib.metadata.namespace ?? "";
      log.debug("reconcile {hibernation} desire={desire} phase={phase} vm={vm}", {
        hibernation: `${namespace}/${hib.metadata.name}`,
        desire: hib.spec.desire,
        phase: hib.status?.phase ?? "",
        vm: vmName,
      });
      const targetPass = { ...pass, pod, vmName };
      const peers = await namespaceRequests(pass);
      const held = opposingProblem(hib, peers, vmName) ?? await yieldProblem(targetPass);
      if (held) return await record(pass, held);
      // The first pass to act under vmName (not recorded yet) decides on it past the cache.
      if ((hib.status?.vmName ?? "") !== vmName) {
        const refusedNow = await tenancyProblem(pass, vmName, true);
        if (refusedNow) return await record(pass, refusedNow);
      }
      await clearYielded(pass);
      return direction(hib) === "Hibernate"
        ? await reconcileHibernate(targetPass)
        : await reconcileWake(targetPass);
    } finally {
      release();
    }
  }
}

/**
 * Writes and announces what problem means for the request; a lasting problem costs no write.
 * The name-refused Warning is the exception: recorded on every such pass.
 */
async function record(pass: Pass, { problem, message }: RequestProblem): Promise<Result> {
  switch (problem) {
    case "invalid-spec":
      await fail(pass, message);
      return {};
    case "target-missing":
      // The pod's create event (or this requeue, for pods outside the pod cache) resumes us.
      await pending(pass, message);
      return { requeueAfter: REQUEUE_INTERVAL_MS };
    case "name-refused":
      recordEvent(pass, "Warning", REASON_VM_NAME_REFUSED, message);
      await fail(pass, message);
      return {};
    case "opposing":
      if (await fail(pass, message, REASON_HIBERNATION_CONFLICT)) {
        recordEvent(pass, "Warning", REASON_HIBERNATION_CONFLICT, message);
      }
      return { requeueAfter: REQUEUE_INTERVAL_MS };
    case "yielded":
      await markYielded(pass, message);
      return { requeueAfter: REQUEUE_INTERVAL_MS };
  }
}
