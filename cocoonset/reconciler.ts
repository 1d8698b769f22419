/**
 * The CocoonSet reconciler: runSteps runs the steps of docs/cocoonset.md's "One reconcile pass" in
 * order; finishPass ends the pass as the step that stopped it decided.
 */
import {
  controllerManagedBy,
  enqueueFromMap,
  errorMessage,
  generationChanged,
  ignoreNotFound,
  isConflict,
  type Manager,
  type Node,
  Nodes,
  type Pod,
  Pods,
  realClock,
  type Reconciler,
  type Request,
  type Result,
} from "../kube/mod.ts";
import { patchCocoonSetGeneration } from "../common/k8s/pod_patch.ts";
import {
  type CocoonSetDeps,
  doing,
  emit,
  logFor,
  podRef,
  POLL_MS,
  type SetPass,
  type Stop,
  stop,
} from "./pass.ts";
import { classifyPods, listOwnedPods, podsByName } from "./pods.ts";
import {
  createMainAgent,
  NameConflictError,
  QuotaExceededError,
  REASON_NAME_CONFLICT,
  REASON_QUOTA_EXCEEDED,
} from "./create.ts";
import {
  addInvalidSpecProblem,
  DEFAULT_SET_LIMITS,
  InvalidSpecError,
  overLimit,
  REASON_INVALID_SPEC,
  refusedByServer,
  rememberInvalidSpec,
} from "./validate.ts";
import type { CocoonHibernation } from "../common/apis/v1/mod.ts";
import { CocoonHibernations, CocoonSets } from "../common/apis/v1/resources.ts";
import { hibernatePolicyOrDefault } from "../common/apis/v1/enums.ts";
import { isPodReady, parseVMSpec } from "../common/meta/mod.ts";
import {
  managerVMNameIndex,
  registerVMNameIndex,
  scannedVMNameIndex,
} from "../snapshotgate/mod.ts";
import { ensureSubAgents, reportDeadLetters, type SubAgentOutcome } from "./agents.ts";
import { ensureFinalizer } from "./finalizer.ts";
import { reconcileFailedMain } from "./failed_main.ts";
import { reconcileTeardown } from "./teardown.ts";
import { reconcileMigration } from "./migrate.ts";
import { type NodeChecks, warnIfPoolEmpty } from "./nodes.ts";
import {
  NODE_NAME_INDEX,
  nodeNameIndexValues,
  nodePlacementEvents,
  podRelevantChange,
  requestDeleted,
  setOfRequestTarget,
  setsTargetingNode,
} from "./predicate.ts";
import { settleOrphanTags } from "./orphan_tags.ts";
import { replaceDriftedMain } from "./drift.ts";
import { reconcileReleasedWake, reconcileSuspendRelease } from "./seat_release.ts";
import { syncLedger } from "./snapshot_ledger.ts";
import { writeSetStatus } from "./status.ts";
import { applyUnsuspend, reconcileSuspend } from "./suspend.ts";
import { ensureToolboxes, toolboxNameProblem } from "./toolboxes.ts";

/**
 * What the reconciler is built from. Defaults: vmNameIndex a scan through client (unit tests),
 * the wall clock, DEFAULT_SET_LIMITS, node checks always on.
 */
export type CocoonSetReconcilerOptions =
  & Pick<CocoonSetDeps, "client" | "apiReader" | "registry" | "recorder">
  & Partial<Pick<CocoonSetDeps, "vmNameIndex" | "clock" | "limits" | "nodeChecks">>;

/** Reconciles CocoonSets. */
export class CocoonSetReconciler implements Reconciler {
  readonly deps: CocoonSetDeps;

  constructor(opts: CocoonSetReconcilerOptions) {
    this.deps = {
      ...opts,
      nodeChecks: opts.nodeChecks ?? (() => true),
      vmNameIndex: opts.vmNameIndex ?? scannedVMNameIndex(opts.client),
      clock: opts.clock ?? realClock,
      limits: opts.limits ?? DEFAULT_SET_LIMITS,
      specChecks: new Map(),
      verifiedShapes: new Set(),
      dryRunsInFlight: new Map(),
      teardownDeletes: new Map(),
      writtenStatuses: new Map(),
      deferredDropEvents: new Map(),
    };
  }

  async reconcile(req: Request, signal: AbortSignal): Promise<Result> {
    const { deps } = this;
    const get = deps.client.get(CocoonSets, req.namespace, req.name, { signal });
    const cs = await doing(`get cocoonset ${req.namespace}/${req.name}`, get.catch(ignoreNotFound));
    if (!cs) return {};
    const pass: SetPass = {
      deps,
      cs,
      classified: classifyPods([]),
      signal,
      log: logFor(cs),
      problems: [],
    };
    try {
      return await finishPass(pass, await runSteps(pass));
    } catch (err) {
      // A locked write computed from a copy that has since moved on: the pass runs again.
      if (!isConflict(err)) throw err;
      pass.log.debug("conflict, retrying the pass: {error}", { error: errorMessage(err) });
      return { requeue: true };
    }
  }
}

/**
 * Ends the pass as its step decided: writes the status (again when an effect stops with a phase),
 * then returns the result or throws the error. An effect runs only once the status before it is
 * stored: a failed or conflicting write throws first.
 */
export async function finishPass(pass: SetPass, end: Stop): Promise<Result> {
  for (;;) {
    if (end.phase !== undefined) await writeSetStatus(pass, end.phase);
    if (!("effect" in end)) break;
    end = await end.effect();
  }
  if (end.error) throw end.error;
  return end.result;
}

/** The steps of one pass, in the order of docs/cocoonset.md's "One reconcile pass". */
async function runSteps(pass: SetPass): Promise<Stop> {
  const { cs } = pass;
  if (cs.metadata.deletionTimestamp) return await reconcileTeardown(pass);
  let step = await ensureFinalizer(pass);
  if (step.stop) return step;

  await listStampAndRecord(pass);
  await settleOrphanTags(pass);
  const bounds = recordSpecBounds(pass);

  if ((step = await reconcileFailedMain(pass)).stop) return step;
  const main = pass.classified.main;

  if (cs.spec.suspend) {
    return hibernatePolicyOrDefault(cs.spec.hibernatePolicy) === "release"
      ? await reconcileSuspendRelease(pass)
      : await reconcileSuspend(pass);
  }
  // A migration owns the pass; before the unsuspend, which would clear its hibernate request.
  if ((step = await reconcileMigration(pass)).stop) return step;
  // Before the main create, which would boot the main fresh over its snapshot.
  if ((step = await reconcileReleasedWake(pass)).stop) return step;
  await applyUnsuspend(pass);

  if ((step = await replaceDriftedMain(pass)).stop) return step;
  if (!main) return await createMainAgent(pass);
  // Sub-agents fork from the main's VM: they need it live first.
  if (!isPodReady(main)) {
    await warnIfPoolEmpty(pass, main);
    rememberInvalidSpec(pass);
    return stop({ requeueAfter: POLL_MS }, "Pending");
  }

  return await reconcileParts(pass, main, bounds);
}

/** The List and Stamp steps: the owned pods classified and stamped, the ledger recorded. */
async function listStampAndRecord(pass: SetPass): Promise<void> {
  const owned = await doing(
    "list owned pods",
    listOwnedPods(pass.deps.client, pass.cs, pass.signal),
  );
  pass.classified = classifyPods(owned);
  await syncCocoonSetGeneration(pass);
  await syncLedger(pass, owned);
}

/**
 * Stamps the current generation on every owned pod that does not carry it yet: vk-cocoon echoes
 * it back as the lifecycle observed generation, a completion signal immune to clock skew.
 */
export async function syncCocoonSetGeneration(pass: SetPass): Promise<void> {
  const generation = pass.cs.metadata.generation ?? 0;
  for (const pod of podsByName(pass.classified)) {
    pass.signal.throwIfAborted();
    await doing(
      `stamp cocoonset generation on ${podRef(pod)}`,
      patchCocoonSetGeneration(pass.deps.client, pod, generation, pass.signal),
    );
  }
}

/**
 * Records the problems of the spec found without the server (bad toolbox names, parts over their
 * bound): such a part builds nothing, the rest goes on.
 */
function recordSpecBounds(pass: SetPass) {
  const nameProblem = toolboxNameProblem(pass.cs.spec.toolboxes);
  const over = overLimit(pass.cs.spec, pass.deps.limits);
  const problems = [nameProblem, over.agents, over.toolboxes].filter((p) => p !== undefined);
  for (const problem of problems) addInvalidSpecProblem(pass, problem);
  const toolboxesBlocked = nameProblem !== undefined || over.toolboxes !== undefined;
  return { problems, agentsBlocked: over.agents !== undefined, toolboxesBlocked };
}

/**
 * The Sub-agents, Toolboxes and Status steps, once the main is Ready. A pass with a look-again of
 * its own (a rebuild's backoff) ends with it; otherwise a problem only a person or another object
 * can fix (NameConflict, a part the server refused, QuotaExceeded) fails it for the error backoff.
 */
async function reconcileParts(
  pass: SetPass,
  main: Pod,
  bounds: ReturnType<typeof recordSpecBounds>,
): Promise<Stop> {
  const subs: SubAgentOutcome = bounds.agentsBlocked
    ? { changed: false, requeueAfterMs: 0, deadLettered: [] }
    : await ensureSubAgents(pass, parseVMSpec(main).vmName, main.spec?.nodeName ?? "");
  // A blocked part gets its Warning where it would have been reconciled.
  for (const problem of bounds.problems) emit(pass, "Warning", REASON_INVALID_SPEC, problem);
  const toolboxesChanged = !bounds.toolboxesBlocked && await ensureToolboxes(pass);
  if (subs.changed || toolboxesChanged) return stop({ requeue: true });

  reportDeadLetters(pass, subs.deadLettered, subs.requeueAfterMs > 0);
  if (subs.requeueAfterMs > 0) return stop({ requeueAfter: subs.requeueAfterMs }, "");
  const clashes = pass.problems.filter((p) => p.reason === REASON_NAME_CONFLICT);
  const refused = refusedByServer(pass);
  const quota = pass.problems.find((p) => p.reason === REASON_QUOTA_EXCEEDED);
  const error = clashes.length > 0
    ? new NameConflictError(clashes.map((p) => p.message).join("; "))
    : refused
    ? new InvalidSpecError(refused)
    : quota && new QuotaExceededError(quota.message);
  return stop({}, "", error);
}

/**
 * Registers the controller: For sets, Owns pods, Watches requests and nodes (predicate.ts), with
 * concurrency workers (at least 1). While nodeChecks says the role cannot read nodes no node
 * informer runs; once it can, the node watch starts and every set that names a node is looked at.
 */
export function setupCocoonSetController(
  mgr: Manager,
  opts: Pick<CocoonSetReconcilerOptions, "registry" | "clock" | "limits"> & {
    concurrency: number;
    nodeChecks?: NodeChecks;
  },
): CocoonSetReconciler {
  if (!Number.isInteger(opts.concurrency) || opts.concurrency < 1) {
    throw new Error(`cocoonset concurrency must be at least 1, got ${opts.concurrency}`);
  }
  const nodeChecks = opts.nodeChecks;
  const r = new CocoonSetReconciler({
    client: mgr.client,
    apiReader: mgr.apiReader,
    vmNameIndex: managerVMNameIndex(mgr),
    registry: opts.registry,
    recorder: mgr.recorder,
    clock: opts.clock,
    limits: opts.limits,
    nodeChecks: nodeChecks ? () => nodeChecks.enabled() : undefined,
  });
  registerVMNameIndex(mgr);
  const sets = mgr.cache.informerFor(CocoonSets);
  const pods = mgr.cache.informerFor(Pods);
  if (!sets.hasIndex(NODE_NAME_INDEX)) {
    mgr.indexField(CocoonSets, NODE_NAME_INDEX, nodeNameIndexValues);
  }
  const nodeEvents = enqueueFromMap<Node>((node) =>
    setsTargetingNode((index, value) => sets.byIndex(index, value), node)
  );
  const builder = controllerManagedBy(mgr)
    .named("cocoonset")
    .for(CocoonSets, { predicates: [generationChanged()] })
    .owns(Pods, { predicates: [podRelevantChange()] })
    .watches(
      CocoonHibernations,
      enqueueFromMap<CocoonHibernation>((h) =>
        setOfRequestTarget((ns, name) => pods.getStored(ns, name), h)
      ),
      { predicates: [requestDeleted()] },
    );
  const watchNodesNow = !nodeChecks || nodeChecks.enabled();
  if (watchNodesNow) builder.watches(Nodes, nodeEvents, { predicates: [nodePlacementEvents()] });
  const ctrl = builder.withOptions({ maxConcurrentReconciles: opts.concurrency }).build(r);
  if (!watchNodesNow) {
    nodeChecks!.onEnabled(() => {
      // The node informer starts here, not before: the role could not have listed nodes.
      ctrl.watch(mgr.informerFor(Nodes), nodeEvents, nodePlacementEvents());
      // Sets that name a node were reconciled without the checks (a controller not started yet
      // reads every set when it starts).
      if (!ctrl.started) return;
      for (const cs of sets.listStored()) {
        if (!cs.spec?.nodeName) continue;
        ctrl.enqueue({ namespace: cs.metadata.namespace ?? "", name: cs.metadata.name ?? "" });
      }
    });
  }
  return r;
}
