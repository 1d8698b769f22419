/**
 * The CocoonHibernation reconciler: drives one pod's VM to hibernated (Hibernate) or running
 * (Wake) by toggling the pod's hibernate annotation and confirming through vk-cocoon's lifecycle
 * annotations and the `:hibernate` snapshot in the registry.
 *
 * One pass, in the order of docs/hibernation.md "One pass", each step in its own file:
 *
 * 1. a request being deleted runs the finalizer (finalizer.ts), nothing else;
 * 2. the finalizer is added in a pass of its own (finalizer.ts);
 * 3. a spec that cannot name a pod or a desire fails at once (spec_check.ts);
 * 4. a missing pod, or one without a VM name yet, parks the request on Pending (target_pod.ts),
 *    and a VM name the request may not act under refuses it (tenancy.ts, from the cache);
 * 5. under the VM's lock (vm_lock.ts): a request opposing an earlier one on the same VM is refused
 *    (opposing.ts), a request whose set drives the VM yields (precedence.ts), a request about to
 *    act under a VM name it has not recorded yet is checked again past the cache (tenancy.ts),
 *    and otherwise the hibernate or wake step runs (hibernate.ts, wake.ts) in the direction
 *    direction.ts decides.
 *
 * The checks only report (problem.ts); this pass records each problem once (record_problem.ts).
 *
 * Differences from the Go operator are listed in docs/hibernation.md.
 *
 * @module
 */
import { getLogger } from "@logtape/logtape";
import {
  type CocoonHibernation,
  CocoonHibernations,
  HIBERNATION_DESIRE_HIBERNATE,
} from "../common/apis/v1/mod.ts";
import { errorMessage, isConflict, isNotFound, realClock, wrapError } from "../kube/mod.ts";
import type {
  Client,
  Clock,
  EventRecorder,
  Reader,
  Reconciler,
  Request,
  Result,
} from "../kube/mod.ts";
import type { Registry } from "../snapshot/registry.ts";
import { type ClaimSources, scannedVMNameIndex, type VMNameIndex } from "../snapshotgate/mod.ts";
import { direction } from "./direction.ts";
import { ensureFinalizer, finalize, type FinalizerDeps } from "./finalizer.ts";
import { reconcileHibernate } from "./hibernate.ts";
import { opposingProblem } from "./opposing.ts";
import type { RequestPass, StepDeps } from "./pass.ts";
import { clearYielded, yieldProblem } from "./precedence.ts";
import { isProblem } from "./problem.ts";
import { type ProblemDeps, recordProblem } from "./record_problem.ts";
import { specCheck } from "./spec_check.ts";
import { findTarget } from "./target_pod.ts";
import { tenancyProblem } from "./tenancy.ts";
import { PhaseTransitions } from "./transitions.ts";
import { StripedLock } from "./vm_lock.ts";
import { reconcileWake } from "./wake.ts";

const log = getLogger(["cocoon-operator", "hibernation"]);

/** What the reconciler works with. */
export interface HibernationReconcilerDeps {
  /** Cached reads and API writes (the manager's client). */
  client: Client;
  /**
   * Uncached reads: the fallback for target pods the pod cache does not hold, and the fresh
   * state of the snapshot gate and the tenancy check at the moments that need it.
   */
  apiReader: Reader;
  /**
   * The cache's VM-name index (snapshotgate/vm_index.ts); default: computed by listing through
   * client (for a client without the index, as in unit tests).
   */
  vmNameIndex?: VMNameIndex;
  registry: Registry;
  recorder: EventRecorder;
  /** Time source of deadlines and condition timestamps; default the wall clock. */
  clock?: Clock;
}

/**
 * Reconciles CocoonHibernations; see the module doc for the pass. Safe to run with several
 * workers: passes that reach the same VM take turns on a striped per-VM lock (64 stripes), so at
 * most one of them touches that VM's pod annotation or registry tag at a time.
 */
export class HibernationReconciler implements Reconciler {
  readonly #client: Client;
  readonly #apiReader: Reader;
  readonly #vmNameIndex: VMNameIndex;
  readonly #registry: Registry;
  readonly #recorder: EventRecorder;
  readonly #clock: Clock;
  readonly #transitions: PhaseTransitions;
  readonly #locks = new StripedLock();

  constructor(deps: HibernationReconcilerDeps) {
    this.#client = deps.client;
    this.#apiReader = deps.apiReader;
    this.#vmNameIndex = deps.vmNameIndex ?? scannedVMNameIndex(deps.client);
    this.#registry = deps.registry;
    this.#recorder = deps.recorder;
    this.#clock = deps.clock ?? realClock;
    this.#transitions = new PhaseTransitions({
      client: deps.client,
      recorder: deps.recorder,
      clock: this.#clock,
    });
  }

  async reconcile(req: Request, signal: AbortSignal): Promise<Result> {
    try {
      return await this.#reconcile(req, signal);
    } catch (err) {
      // A write computed from a copy that has since moved on: look again with fresh data.
      if (isConflict(err)) {
        log.debug("conflict on {hibernation}, retrying: {error}", {
          hibernation: `${req.namespace}/${req.name}`,
          error: errorMessage(err),
        });
        return { requeue: true };
      }
      throw err;
    }
  }

  async #reconcile(req: Request, signal: AbortSignal): Promise<Result> {
    let hib: CocoonHibernation;
    try {
      hib = await this.#client.get(CocoonHibernations, req.namespace, req.name, { signal });
    } catch (err) {
      if (isNotFound(err)) return {};
      throw wrapError(`get hibernation ${req.namespace}/${req.name}`, err);
    }
    if (hib.metadata.deletionTimestamp) {
      await finalize(this.#finalizerDeps, hib, signal);
      return {};
    }
    if (await ensureFinalizer(this.#client, hib, signal)) return { requeue: true };
    const invalid = specCheck(hib);
    if (invalid) return await recordProblem(this.#problemDeps, hib, invalid, signal);
    const target = await findTarget(this.#finalizerDeps, hib, signal);
    if (isProblem(target)) return await recordProblem(this.#problemDeps, hib, target, signal);
    const { pod, vmName } = target;
    const refused = await tenancyProblem(this.#claimSources, hib, vmName, false, signal);
    if (refused) return await recordProblem(this.#problemDeps, hib, refused, signal);
    const release = await this.#locks.lock(vmName, signal);
    try {
      const namespace = hib.metadata.namespace ?? "";
      log.debug("reconcile {hibernation} desire={desire} phase={phase} vm={vm}", {
        hibernation: `${namespace}/${hib.metadata.name}`,
        desire: hib.spec.desire,
        phase: hib.status?.phase ?? "",
        vm: vmName,
      });
      const peers = await this.#client.list(CocoonHibernations, { namespace, signal });
      const held = opposingProblem(hib, peers.items, vmName) ??
        await yieldProblem(this.#client, pod, hib, vmName, signal);
      if (held) return await recordProblem(this.#problemDeps, hib, held, signal);
      // Not recorded yet: this pass acts under vmName for the first time, the VM-name decision.
      if ((hib.status?.vmName ?? "") !== vmName) {
        const refusedNow = await tenancyProblem(this.#claimSources, hib, vmName, true, signal);
        if (refusedNow) return await recordProblem(this.#problemDeps, hib, refusedNow, signal);
      }
      await clearYielded(this.#client, hib, this.#clock.now(), signal);
      return await this.#step({ hib, pod, vmName, signal });
    } finally {
      release();
    }
  }

  /** Routes to hibernate or wake; a reversed desire first finishes the transition in flight. */
  #step(pass: RequestPass): Promise<Result> {
    const deps: StepDeps = {
      client: this.#client,
      registry: this.#registry,
      reader: this.#apiReader,
      index: this.#vmNameIndex,
      transitions: this.#transitions,
      clock: this.#clock,
    };
    return direction(pass.hib) === HIBERNATION_DESIRE_HIBERNATE
      ? reconcileHibernate(deps, pass)
      : reconcileWake(deps, pass);
  }

  get #finalizerDeps(): FinalizerDeps {
    return {
      client: this.#client,
      apiReader: this.#apiReader,
      index: this.#vmNameIndex,
      registry: this.#registry,
      recorder: this.#recorder,
      locks: this.#locks,
    };
  }

  /** Where the gate and the tenancy check read: the cache's index, and past it when needed. */
  get #claimSources(): ClaimSources {
    return { reader: this.#apiReader, index: this.#vmNameIndex };
  }

  get #problemDeps(): ProblemDeps {
    return {
      client: this.#client,
      recorder: this.#recorder,
      transitions: this.#transitions,
      clock: this.#clock,
    };
  }
}
