/**
 * The CocoonHibernation reconciler: drives one pod's VM to hibernated (Hibernate) or running
 * (Wake) by toggling the pod's hibernate annotation and confirming through vk-cocoon's lifecycle
 * annotations and the `:hibernate` snapshot in the registry.
 *
 * A pass, in order: a request being deleted runs the finalizer (drop the VM's `:hibernate` tag
 * unless another live request still tracks the VM); the finalizer is added in a pass of its own;
 * a spec that cannot name a pod or a desire fails at once; a missing pod, or one without a VM
 * name yet, parks the request on Pending (Hibernated and Waking are kept); then, under the VM's
 * lock, a request driving the VM against an earlier one on the same VM is refused (Failed,
 * `Conflict`), and otherwise the hibernate or wake step runs. A reversed desire first finishes the
 * transition in flight (direction.ts): Hibernate while Waking keeps waking, Wake while Hibernating
 * keeps hibernating — the previous round's annotations and tag would otherwise read as this
 * round's completion.
 *
 * Differences from the Go operator are listed in docs/hibernation.md.
 *
 * @module
 */
import { getLogger } from "@logtape/logtape";
import {
  type CocoonHibernation,
  CocoonHibernationPhaseWaking,
  CocoonHibernations,
  HibernationDesireHibernate,
} from "../common/apis/v1/mod.ts";
import { AnnotationVMName, HibernateSnapshotTag } from "../common/meta/keys.ts";
import { vmLive } from "../common/meta/vm_liveness.ts";
import { parseVMSpec } from "../common/meta/vmspec.ts";
import { patchObject } from "../kube/client_patch.ts";
import type { Client, Reader } from "../kube/client.ts";
import { type Clock, realClock } from "../kube/clock.ts";
import { addFinalizer, removeFinalizer } from "../kube/controllerutil.ts";
import { type Pod, Pods } from "../kube/core.ts";
import { errorMessage, isConflict, isNotFound, wrapError } from "../kube/errors.ts";
import type { EventRecorder } from "../kube/events.ts";
import type { Reconciler, Request, Result } from "../kube/reconcile.ts";
import type { Registry } from "../snapshot/registry.ts";
import { direction } from "./direction.ts";
import { reconcileHibernate } from "./hibernate.ts";
import type { Pass, StepDeps } from "./pass.ts";
import { opposingRequest, vmHeldByAnother } from "./peers.ts";
import { specProblem } from "./spec_check.ts";
import { REQUEUE_INTERVAL_MS } from "./status.ts";
import { PhaseTransitions } from "./transitions.ts";
import { StripedLock } from "./vm_lock.ts";
import { reconcileWake } from "./wake.ts";
import { dropHibernateTag, requestActor } from "./tag.ts";
import { clearYielded, drivingSet, markYielded } from "./precedence.ts";
import { actingRefusal } from "../snapshotgate/mod.ts";

const log = getLogger(["cocoon-operator", "hibernation"]);

/**
 * Warning reason: the VM name the target pod shows is not `vk-<namespace>-<pod>` of this
 * request, or another namespace derives it too; the request does not act (or delete) under it.
 */
export const ReasonVMNameRefused = "VMNameRefused";

/** Keeps a request until its VM's `:hibernate` tag has been dealt with. */
export const HIBERNATION_FINALIZER = "cocoonhibernation.cocoonset.cocoonstack.io/finalizer";

/** What the reconciler works with. */
export interface HibernationReconcilerDeps {
  /** Cached reads and API writes (the manager's client). */
  client: Client;
  /** Uncached reads: the fallback for target pods the pod cache does not hold. */
  apiReader: Reader;
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
  readonly #registry: Registry;
  readonly #recorder: EventRecorder;
  readonly #clock: Clock;
  readonly #transitions: PhaseTransitions;
  readonly #locks = new StripedLock();

  constructor(deps: HibernationReconcilerDeps) {
    this.#client = deps.client;
    this.#apiReader = deps.apiReader;
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
      await this.#finalize(hib, signal);
      return {};
    }
    if (!hib.metadata.finalizers?.includes(HIBERNATION_FINALIZER)) {
      // Its own pass: the next one starts from the stored object, finalizer included.
      await patchObject(this.#client, CocoonHibernations, hib, (h) => {
        addFinalizer(h, HIBERNATION_FINALIZER);
      }, { optimisticLock: true, signal });
      return { requeue: true };
    }
    const problem = specProblem(hib);
    if (problem) {
      await this.#transitions.fail(hib, problem, signal);
      return {};
    }
    const namespace = hib.metadata.namespace ?? "";
    const podName = hib.spec.podRef.name;
    const pod = await this.#targetPod(namespace, podName, signal);
    if (!pod) {
      // The pod's create event (or this requeue, for pods outside the pod cache) resumes us.
      await this.#transitions.pending(hib, `pod ${namespace}/${podName} not yet present`, signal);
      return { requeueAfter: REQUEUE_INTERVAL_MS };
    }
    const vmName = parseVMSpec(pod).vmName;
    if (!vmName) {
      // vk-cocoon names the VM once it has provisioned it.
      await this.#transitions.pending(
        hib,
        `pod ${namespace}/${podName} has no ${AnnotationVMName} annotation yet`,
        signal,
      );
      return { requeueAfter: REQUEUE_INTERVAL_MS };
    }
    // Tenancy: act only under the name the request derives from its own namespace and target
    // pod, and never through a name another namespace derives too.
    const refusal = await actingRefusal(this.#apiReader, requestActor(hib), vmName, signal);
    if (refusal) {
      this.#refuseName(hib, refusal.message);
      await this.#transitions.fail(hib, refusal.message, signal);
      return {};
    }
    const release = await this.#locks.lock(vmName, signal);
    try {
      log.debug("reconcile {hibernation} desire={desire} phase={phase} vm={vm}", {
        hibernation: `${namespace}/${hib.metadata.name}`,
        desire: hib.spec.desire,
        phase: hib.status?.phase ?? "",
        vm: vmName,
      });
      const peers = await this.#client.list(CocoonHibernations, { namespace, signal });
      const winner = opposingRequest(hib, peers.items, vmName);
      if (winner) {
        await this.#transitions.conflict(hib, winner, vmName, signal);
        return { requeueAfter: REQUEUE_INTERVAL_MS };
      }
      // The set that owns the pod wins while it drives the VM (precedence.ts).
      const driver = await drivingSet(this.#apiReader, pod, hib, signal);
      if (driver) {
        const message = `CocoonSet ${namespace}/${driver.set.metadata.name} ${driver.drive}: ` +
          `this request to ${hib.spec.desire} pod ${podName} waits and does not touch VM ${vmName}`;
        await markYielded(this.#client, this.#recorder, hib, message, this.#clock.now(), signal);
        return { requeueAfter: REQUEUE_INTERVAL_MS };
      }
      await clearYielded(this.#client, hib, this.#clock.now(), signal);
      return await this.#step({ hib, pod, vmName, signal });
    } finally {
      release();
    }
  }

  /** Routes to hibernate or wake; a reversed desire first finishes the transition in flight. */
  #step(pass: Pass): Promise<Result> {
    const deps: StepDeps = {
      client: this.#client,
      registry: this.#registry,
      reader: this.#apiReader,
      transitions: this.#transitions,
      clock: this.#clock,
    };
    return direction(pass.hib) === HibernationDesireHibernate
      ? reconcileHibernate(deps, pass)
      : reconcileWake(deps, pass);
  }

  /**
   * The target pod: from the cache, else straight from the API server — the pod cache may hold
   * only CocoonSet pods, and a request may target any pod. undefined when it does not exist.
   */
  async #targetPod(namespace: string, name: string, signal: AbortSignal): Promise<Pod | undefined> {
    for (const reader of [this.#client, this.#apiReader]) {
      try {
        return await reader.get(Pods, namespace, name, { signal });
      } catch (err) {
        if (!isNotFound(err)) {
          throw wrapError(`get target pod ${namespace}/${name}`, err);
        }
      }
    }
    return undefined;
  }

  /**
   * The request's own claim on the tag, which the gate leaves to it: it was Waking and the VM of
   * its pod does not run yet, so vk-cocoon is restoring from the tag. Every other claimant (a
   * hibernated or restoring pod, a set, another request) is the gate's.
   */
  async #ownWakeNeedsTag(
    hib: CocoonHibernation,
    vmName: string,
    signal: AbortSignal,
  ): Promise<boolean> {
    if (hib.status?.phase !== CocoonHibernationPhaseWaking) return false;
    const pod = await this.#targetPod(hib.metadata.namespace ?? "", hib.spec.podRef.name, signal);
    if (pod === undefined || parseVMSpec(pod).vmName !== vmName) return false;
    return !vmLive(pod);
  }

  /** A Warning naming a VM name this request may not act or delete under. */
  #refuseName(hib: CocoonHibernation, message: string): void {
    this.#recorder.event(
      { object: hib, resource: CocoonHibernations },
      "Warning",
      ReasonVMNameRefused,
      message,
    );
  }

  /**
   * The finalizer: drops the `:hibernate` tag of the VM this request recorded, unless another
   * live request still tracks that VM or its pod still needs it (#podStillNeedsTag), then lets
   * the request go. A registry failure is logged at error level and never holds the deletion
   * (the snapshot may then be left behind).
   */
  async #finalize(hib: CocoonHibernation, signal: AbortSignal): Promise<void> {
    const vmName = hib.status?.vmName ?? "";
    // Lock the recorded VM: that is the tag touched here, whatever the spec names now.
    const release = vmName ? await this.#locks.lock(vmName, signal) : () => {};
    try {
      if (vmName) {
        const peers = await this.#client.list(CocoonHibernations, {
          namespace: hib.metadata.namespace,
          signal,
        });
        if (vmHeldByAnother(hib, peers.items)) {
          log.info("keeping {vm}:{tag}: another CocoonHibernation still tracks it", {
            vm: vmName,
            tag: HibernateSnapshotTag,
            hibernation: `${hib.metadata.namespace}/${hib.metadata.name}`,
          });
        } else if (await this.#ownWakeNeedsTag(hib, vmName, signal)) {
          log.warn("keeping {vm}:{tag}: pod {pod} is restoring from it", {
            pod: hib.spec.podRef.name,
            vm: vmName,
            tag: HibernateSnapshotTag,
            hibernation: `${hib.metadata.namespace}/${hib.metadata.name}`,
          });
        } else {
          // The gate keeps the tag for any claimant (a released seat, a migration, a hibernated
          // pod), whoever's: that claimant's own flow drops it once done.
          const verdict = await dropHibernateTag(
            { reader: this.#apiReader, registry: this.#registry },
            vmName,
            hib,
            signal,
          );
          if (verdict && !verdict.allowed && verdict.kind !== "claimed") {
            this.#refuseName(hib, verdict.message);
          }
        }
      }
      await patchObject(this.#client, CocoonHibernations, hib, (h) => {
        removeFinalizer(h, HIBERNATION_FINALIZER);
      }, { optimisticLock: true, signal });
    } finally {
      release();
    }
  }
}
