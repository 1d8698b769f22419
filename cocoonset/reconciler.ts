/**
 * The CocoonSet reconciler: drives one CocoonSet toward its spec — a main agent (slot 0),
 * `replicas` sub-agents forked from it and one pod per toolbox — through suspend and wake, seat
 * release, migration, rebuilds and teardown.
 *
 * One pass, in order (the first step that owns the pass returns):
 * get → teardown (deleting) → finalizer (and snapshot ledger) → list and classify owned pods →
 * stamp the generation on every pod → record the snapshot ledger → failed main → suspend
 * (release or retain) → migration → released-seat wake → clear leftover hibernate requests →
 * main drift → create main → wait for the main to be Ready → sub-agents → toolboxes → status.
 */
import { getLogger } from "@logtape/logtape";
import type { Client, Reader } from "../kube/client.ts";
import { type Clock, realClock } from "../kube/clock.ts";
import { controllerManagedBy } from "../kube/builder.ts";
import { Nodes, Pods } from "../kube/core.ts";
import { enqueueFromMap } from "../kube/handler.ts";
import { addFinalizer, containsFinalizer } from "../kube/controllerutil.ts";
import { patchObject } from "../kube/client_patch.ts";
import {
  errorMessage,
  isAlreadyExists,
  isConflict,
  isNotFound,
  wrapError,
} from "../kube/errors.ts";
import type { EventRecorder } from "../kube/events.ts";
import type { Manager } from "../kube/manager.ts";
import { generationChanged } from "../kube/predicates.ts";
import type { Reconciler, Request, Result } from "../kube/reconcile.ts";
import type { CocoonSet } from "../common/apis/v1/cocoonset_types.ts";
import { CocoonSets } from "../common/apis/v1/resources.ts";
import { hibernatePolicyOrDefault } from "../common/apis/v1/enums.ts";
import { ConditionTypeReady } from "../common/k8s/condition.ts";
import { AnnotationLifecycleStateMessage, isPodReady, parseVMSpec } from "../common/meta/mod.ts";
import { lifecycleStateFailedObservedTotal } from "../metrics/metrics.ts";
import type { Registry } from "../snapshot/registry.ts";
import { ensureSubAgents, type SubAgentOutcome } from "./agents.ts";
import { finalizerName, reconcileDelete } from "./delete.ts";
import { syncCocoonSetGeneration } from "./lifecycle.ts";
import { reconcileMigration } from "./migrate.ts";
import { warnIfPoolEmpty } from "./nodes.ts";
import {
  NODE_NAME_INDEX,
  nodeNameIndexValues,
  nodePlacementEvents,
  setsTargetingNode,
} from "./node_watch.ts";
import { listOwnedPods } from "./ownership.ts";
import { type CocoonSetDeps, deletePod, emit, logFor, type Pass, podRef } from "./pass.ts";
import { mainPodFailedReason, ReasonPodLifecycleFailed } from "./pod_state.ts";
import { buildAgentPod, classifyPods, podSpecMatchesAgent } from "./pods.ts";
import { podRelevantChange } from "./predicate.ts";
import { markRestoreIfHibernated, newRestoreIntent } from "./restore.ts";
import { reconcileSuspendRelease, reconcileWake } from "./slot_release.ts";
import { startLedger, syncLedger } from "./snapshot_ledger.ts";
import { writeSetStatus } from "./status.ts";
import { applyUnsuspend, reconcileSuspend } from "./suspend.ts";
import { ensureToolboxes, toolboxNameProblem } from "./toolboxes.ts";
import {
  addInvalidSpecProblem,
  checkSpec,
  ensureSpecBuildable,
  InvalidSpecError,
  markSpecChecked,
  ReasonInvalidSpec,
  refusedByServer,
  rememberInvalidSpec,
  rethrowInvalidMain,
} from "./validate.ts";
import { settleMainCreateClash } from "./conflict.ts";
import { defaultSetLimits, overLimit, type SetLimits } from "./limits.ts";
import { passResult, reportDeadLetters } from "./outcome.ts";
import { QuotaExceededError, reportQuotaRefusal } from "./quota.ts";
import { refuseCollidingCreate, requeueVMNameConflictMs } from "./vm_collision.ts";

const log = getLogger(["cocoon-operator", "cocoonset"]);

/** Normal reason: the failed main is Ready again. */
export const ReasonRecoveredFromFailure = "RecoveredFromFailure";
/** How often to look again while the main is not Ready or an old pod still terminates (ms). */
export const requeueWaitForMainMs = 5_000;

/** What the reconciler is built from; clock defaults to the wall clock. */
export interface CocoonSetReconcilerOptions {
  client: Client;
  apiReader: Reader;
  registry?: Registry;
  recorder: EventRecorder;
  clock?: Clock;
  /** Per-set bounds; defaultSetLimits when absent. */
  limits?: SetLimits;
}

/** Reconciles CocoonSets; see the module doc for the order of a pass. */
export class CocoonSetReconciler implements Reconciler {
  readonly deps: CocoonSetDeps;

  constructor(opts: CocoonSetReconcilerOptions) {
    this.deps = {
      ...opts,
      clock: opts.clock ?? realClock,
      limits: opts.limits ?? defaultSetLimits,
      validGenerations: new Map(),
      verifiedShapes: new Set(),
      teardownDeletes: new Map(),
      writtenStatuses: new Map(),
      deferredDropEvents: new Map(),
    };
  }

  async reconcile(req: Request, signal: AbortSignal): Promise<Result> {
    try {
      return await this.#reconcile(req, signal);
    } catch (err) {
      // A write computed from a cached copy that has since moved on (the status write and the
      // finalizer carry the resourceVersion they were computed from): look again at once.
      if (isConflict(err)) {
        log.debug("conflict on {namespace}/{cocoonset}, retrying the pass: {error}", {
          namespace: req.namespace,
          cocoonset: req.name,
          error: errorMessage(err),
        });
        return { requeue: true };
      }
      throw err;
    }
  }

  async #reconcile(req: Request, signal: AbortSignal): Promise<Result> {
    const { deps } = this;
    let cs: CocoonSet;
    try {
      cs = await deps.client.get(CocoonSets, req.namespace, req.name, { signal });
    } catch (err) {
      if (isNotFound(err)) return {};
      throw wrapError(`get cocoonset ${req.namespace}/${req.name}`, err);
    }
    const pass: Pass = {
      deps,
      cs,
      classified: classifyPods([]),
      signal,
      intent: newRestoreIntent(deps, req.namespace, signal),
      log: logFor(cs),
      problems: [],
    };
    if (cs.metadata.deletionTimestamp) return await reconcileDelete(pass);

    if (!containsFinalizer(cs, finalizerName)) {
      await patchObject(deps.client, CocoonSets, cs, (c) => {
        addFinalizer(c, finalizerName);
        // Before the first pod: the snapshot ledger covers every pod the set will have.
        startLedger(c);
      }, { optimisticLock: true, signal });
      return { requeue: true };
    }

    let owned;
    try {
      owned = await listOwnedPods(deps.client, cs, signal);
    } catch (err) {
      throw wrapError("list owned pods", err);
    }
    pass.classified = classifyPods(owned);
    // Stamp first, so whatever the pods report next is tied to the spec this pass acts on.
    await syncCocoonSetGeneration(pass);
    // Before anything of this pass creates a pod under the spec's policy, or a hibernate request
    // seen on a pod (terminating ones too) is cleared.
    await syncLedger(pass, owned);

    const nameProblem = toolboxNameProblem(cs.spec.toolboxes);
    if (nameProblem) {
      pass.problems.push({
        condition: ConditionTypeReady,
        reason: ReasonInvalidSpec,
        message: nameProblem,
      });
    }
    // A part above its bound builds nothing; the rest of the set reconciles.
    const over = overLimit(cs.spec, deps.limits);
    for (const problem of [over.agents, over.toolboxes]) {
      if (problem) addInvalidSpecProblem(pass, problem);
    }

    const main = pass.classified.main;
    if (main) {
      const reason = mainPodFailedReason(main);
      if (reason) return await handleFailedMain(pass, reason);
      if (cs.status?.phase === "Failed" && isPodReady(main)) {
        emit(pass, "Normal", ReasonRecoveredFromFailure, `main pod ${podRef(main)} is Ready again`);
      }
    }

    if (cs.spec.suspend) {
      return hibernatePolicyOrDefault(cs.spec.hibernatePolicy) === "release"
        ? await reconcileSuspendRelease(pass)
        : await reconcileSuspend(pass);
    }
    // A migration in flight owns the pass; it runs before the unsuspend below so its own
    // hibernate request is not cleared.
    const migration = await reconcileMigration(pass);
    if (migration.handled) return migration.result ?? {};
    // The released-seat wake runs before the normal main create, which would boot the main
    // fresh over its snapshot.
    const wake = await reconcileWake(pass);
    if (wake.handled) return wake.result ?? {};
    await applyUnsuspend(pass);

    // Never replace a running main with one the server would refuse: it keeps running, and the
    // other parts of the set still reconcile.
    if (main && !podSpecMatchesAgent(main, cs, 0) && (await checkSpec(pass)).main === undefined) {
      pass.log.info("main agent {pod} drifted from the spec, deleting to recreate", {
        pod: podRef(main),
      });
      await deletePod(pass, main, "drifted main agent");
      return { requeue: true };
    }
    if (!main) return await createMainAgent(pass);
    // Sub-agents fork from the main's VM: they need it live first.
    if (!isPodReady(main)) {
      await warnIfPoolEmpty(pass, main);
      rememberInvalidSpec(pass);
      await writeSetStatus(pass, "Pending");
      return { requeueAfter: requeueWaitForMainMs };
    }

    const subs: SubAgentOutcome = over.agents
      ? { changed: false, requeueAfterMs: 0, deadLettered: [] }
      : await ensureSubAgents(pass, parseVMSpec(main).vmName, main.spec?.nodeName ?? "");
    // Bad toolbox names or counts: no toolbox is created or deleted; the Warning is given where
    // the part would have been reconciled (the status says it on every pass).
    for (const problem of [nameProblem, over.agents, over.toolboxes]) {
      if (problem) emit(pass, "Warning", ReasonInvalidSpec, problem);
    }
    const toolboxesBlocked = nameProblem !== undefined || over.toolboxes !== undefined;
    const toolboxesChanged = toolboxesBlocked ? false : await ensureToolboxes(pass);
    if (subs.changed || toolboxesChanged) return { requeue: true };

    reportDeadLetters(pass, subs.deadLettered, subs.requeueAfterMs > 0);
    await writeSetStatus(pass, "");
    return passResult(pass, subs.requeueAfterMs);
  }
}

/**
 * A failed main: recreated when it no longer matches the spec (waiting for it to turn Ready
 * would be forever), else the set is Failed with a Warning naming the cause.
 */
async function handleFailedMain(pass: Pass, reason: string): Promise<Result> {
  const { cs } = pass;
  const main = pass.classified.main!;
  if (!podSpecMatchesAgent(main, cs, 0)) {
    await ensureSpecBuildable(pass);
    await deletePod(pass, main, "failed, drifted main agent");
    return { requeue: true };
  }
  if (reason === ReasonPodLifecycleFailed) {
    lifecycleStateFailedObservedTotal.labels({ phase: cs.status?.phase || "Pending" }).inc();
  }
  const detail = main.metadata.annotations?.[AnnotationLifecycleStateMessage] ||
    (main.status?.phase ?? "");
  const message = `main pod ${podRef(main)}: ${detail}`;
  emit(pass, "Warning", reason, message);
  // The failure is what the Ready condition must say, ahead of any other problem.
  pass.problems.unshift({ condition: ConditionTypeReady, reason, message });
  await writeSetStatus(pass, "Failed");
  return {};
}

/**
 * Creates the missing main, restoring from its snapshot when a CocoonHibernation says it was
 * hibernated. Always requeues: the sub-agents fork from the new main.
 */
async function createMainAgent(pass: Pass): Promise<Result> {
  await ensureSpecBuildable(pass, { creatingMain: true });
  const pod = buildAgentPod(pass.cs, 0);
  const restorable = await pass.intent();
  await markRestoreIfHibernated(
    pass.deps,
    pod,
    restorable.has(pod.metadata.name ?? ""),
    pass.signal,
  );
  if (await refuseCollidingCreate(pass, pod, "the main agent")) {
    await writeSetStatus(pass, "");
    return { requeueAfter: requeueVMNameConflictMs };
  }
  try {
    await pass.deps.client.create(Pods, pod, { signal: pass.signal });
  } catch (err) {
    await rethrowInvalidMain(pass, err);
    if (reportQuotaRefusal(pass, "the main agent", err)) {
      await writeSetStatus(pass, pass.cs.status?.phase ?? "");
      throw new QuotaExceededError(errorMessage(err));
    }
    if (!isAlreadyExists(err)) throw wrapError("create main agent", err);
    return await settleMainCreateClash(pass, "", requeueWaitForMainMs);
  }
  markSpecChecked(pass);
  pass.log.info("created main agent {pod}", { pod: podRef(pod) });
  // Other parts refused: the main still comes up; the status says which parts are invalid and
  // the pass is retried with backoff (the main's Ready flip brings it back sooner).
  const refused = refusedByServer(pass);
  if (refused) {
    await writeSetStatus(pass, pass.cs.status?.phase ?? "");
    throw new InvalidSpecError(refused);
  }
  return { requeue: true };
}

/** How the CocoonSet controller is set up. */
export interface CocoonSetControllerOptions {
  registry?: Registry;
  /** Workers reconciling distinct CocoonSets at once; at least 1. */
  concurrency: number;
  clock?: Clock;
  /** Per-set bounds (--max-replicas-per-set, --max-toolboxes-per-set); defaultSetLimits. */
  limits?: SetLimits;
}

/**
 * Registers the CocoonSet controller: For CocoonSets (spec changes only), Owns pods (changes
 * the reconciler acts on only), Watches nodes (arrival, departure and relabelling of a node a
 * set's spec.nodeName names, through a cache index on spec.nodeName).
 */
export function setupCocoonSetController(
  mgr: Manager,
  opts: CocoonSetControllerOptions,
): CocoonSetReconciler {
  if (!Number.isInteger(opts.concurrency) || opts.concurrency < 1) {
    throw new Error(`cocoonset concurrency must be at least 1, got ${opts.concurrency}`);
  }
  const r = new CocoonSetReconciler({
    client: mgr.client,
    apiReader: mgr.apiReader,
    registry: opts.registry,
    recorder: mgr.recorder,
    clock: opts.clock,
    limits: opts.limits,
  });
  const sets = mgr.cache.informerFor(CocoonSets);
  if (!sets.hasIndex(NODE_NAME_INDEX)) {
    mgr.indexField(CocoonSets, NODE_NAME_INDEX, nodeNameIndexValues);
  }
  controllerManagedBy(mgr)
    .named("cocoonset")
    .for(CocoonSets, { predicates: [generationChanged()] })
    .owns(Pods, { predicates: [podRelevantChange()] })
    // A set pinned to a node that is missing or outside its pool waits for that node.
    .watches(
      Nodes,
      enqueueFromMap((node) =>
        setsTargetingNode((index, value) => sets.byIndex(index, value), node)
      ),
      { predicates: [nodePlacementEvents()] },
    )
    .withOptions({ maxConcurrentReconciles: opts.concurrency })
    .complete(r);
  return r;
}
