/**
 * The flows users run in bulk, on the real system (tests/bench/system.ts: control plane, registry
 * behind its counting proxy, simulator, the operator under test behind the counting API proxy):
 *
 * - `hibernateWake`: 200 agent pods (the main and three sub-agents of 50 sets); one
 *   CocoonHibernation each, all created at once with desire Hibernate, until every one is
 *   Hibernated; then all switched to Wake until every one is Active.
 * - `suspendResume`: 100 sets suspended (retain policy: each pod hibernated in place, its seat
 *   kept) until every one is Suspended, then resumed until every one is Running with all five
 *   pods ready.
 * - `releaseWake`: 100 sets with hibernatePolicy release, a main agent each (the API takes the
 *   release policy only without sub-agents and toolboxes), suspended (the VM snapshotted, its
 *   pod deleted, the seat given back) until every one is Suspended, then woken until every one
 *   is Running with its main restored and ready.
 *
 * Each flow runs on a fresh system. The setup (the sets created and converged, the operator's
 * queue drained) is not counted. What counts starts with the flow's first write and is split in
 * two phases, each from its first write to the watch event at which the last object reached
 * the phase's state (its phase, for the object's current generation); the second phase's writes
 * start as soon as the first phase is complete.
 *
 * Figures per flow:
 * - seconds: the flow's first write → the last object in its final state.
 * - apiRequests (total, byVerb, byResource, conflicts, failedByResource) and registryRequests
 *   (with registryRequestsByMethod): what the operator asked of the API server (api_proxy.ts)
 *   and of the registry (the stack's registry proxy; the simulator pushes past it) from the
 *   first write until the operator went quiet after the flow (no request other than a watch
 *   for 3 s; drainSeconds, and drained: false when it did not within 60 s), so work that
 *   trails the last state change (tag deletes, status writes) counts toward the flow.
 * - cpuSeconds: the operator process's user + system CPU over the same span.
 * - peakRssMiB: its VmHWM at the end, lowered to its resident set at the flow's start
 *   (proc_stats.ts resetPeakRss), so the setup's peak is not counted; rssMiBAtStart beside it.
 * - phases: seconds, requests, registry requests and CPU of each phase.
 * - snapshotsLeft: how many of the flow's VMs still have a `:hibernate` (or `:latest`) tag in
 *   the registry once the operator is quiet (a retain resume keeps them by design).
 * - loadAverage: the machine's 1-minute load average at the flow's start and end (the machine
 *   may be shared: compare CPU seconds and request counts first).
 *
 * `--quick`: 40 pods, 10 and 10 sets. `--flows` picks some of them.
 * Run alone: `deno task bench:flows [--quick] [--flows …] [--operator-cmd "…"]`.
 *
 * @module
 */
import type { CocoonHibernation } from "../../common/apis/v1/cocoonhibernation_types.ts";
import type { CocoonSet } from "../../common/apis/v1/cocoonset_types.ts";
import { CocoonHibernations, CocoonSets } from "../../common/apis/v1/resources.ts";
import { toolboxPodName } from "../../cocoonset/pods.ts";
import { vmNameForPod } from "../../common/meta/vmname.ts";
import type { ApiClient } from "../../kube/api_client.ts";
import { errorMessage } from "../../kube/errors.ts";
import type { KubeObject } from "../../kube/object.ts";
import { type BenchFlags, benchFlagsOrExit, FLOW_NAMES, type FlowName } from "./flags.ts";
import {
  converged,
  createSets,
  inParallel,
  nodesFor,
  type ObjectWatch,
  progress,
  type SetRef,
  type SetShape,
  SUB_AGENTS,
  waitConverged,
  watchObjects,
} from "./load.ts";
import { loadAverage } from "./proc_stats.ts";
import { type RequestTally, tallyRequests } from "./request_info.ts";
import { type BenchSystem, startBenchSystem } from "./system.ts";

/** How many objects each flow moves. */
export interface FlowSizes {
  /** hibernateWake: agent pods with a CocoonHibernation. */
  hibernateWakePods: number;
  /** suspendResume: sets suspended and resumed. */
  suspendResumeSets: number;
  /** releaseWake: sets released and woken. */
  releaseWakeSets: number;
}

/** The sizes of the issue: 200 pods, 100 and 100 sets. */
export const FULL_SIZES: FlowSizes = {
  hibernateWakePods: 200,
  suspendResumeSets: 100,
  releaseWakeSets: 100,
};

/** `--quick`. */
export const QUICK_SIZES: FlowSizes = {
  hibernateWakePods: 40,
  suspendResumeSets: 10,
  releaseWakeSets: 10,
};

/** One phase's figures. */
export interface PhaseFigures {
  seconds: number;
  apiRequests: number;
  registryRequests: number;
  cpuSeconds: number;
}

/** One flow's figures (see the module doc). */
export interface FlowFigures {
  operator: string;
  /** What the flow moves: pods (hibernateWake) or sets. */
  objects: number;
  objectKind: "pods" | "sets";
  /** Every phase completed; otherwise `stalled` names the phase and how far it got. */
  completed: boolean;
  stalled?: string;
  seconds: number;
  apiRequests: RequestTally;
  registryRequests: number;
  registryRequestsByMethod: Record<string, number>;
  cpuSeconds: number;
  peakRssMiB: number;
  rssMiBAtStart: number;
  phases: Record<string, PhaseFigures>;
  /** Last object in its final state → the operator quiet. */
  drainSeconds: number;
  drained: boolean;
  /** The flow's VMs whose `:hibernate` / `:latest` tag is still in the registry at the end. */
  snapshotsLeft: Record<string, number>;
  setup: { sets: number; pods: number; simNodes: number; secondsToAllRunning: number };
  loadAverage: { atStart: number; atEnd: number };
}

/** Agents per set: the main and its sub-agents (the toolbox is not a hibernation target). */
const AGENTS_PER_SET = 1 + SUB_AGENTS;

/** How long the operator must make no request (other than a watch) for the flow to be over. */
const QUIET_MS = 3_000;

/** How long the drain may take before the figures are taken anyway. */
const DRAIN_TIMEOUT_MS = 60_000;

/** One step of a flow: its writes, issued at once, then the state every object must reach. */
interface Phase {
  name: string;
  write(admin: ApiClient): Promise<void>;
  /** Resolves at the watch event that completed the phase (performance.now()). */
  complete(): Promise<number>;
  /** The watched objects by phase (and whether at their generation), for a stalled phase. */
  states(): Record<string, number>;
}

/** A flow on a converged system: its phases and the watches they wait on. */
interface Plan {
  objects: number;
  objectKind: "pods" | "sets";
  /** The VMs the flow hibernates or releases (their registry tags are counted at the end). */
  vms: string[];
  phases: Phase[];
  stop(): Promise<void>;
}

/** How a flow sets its system up before it is measured. */
interface Setup {
  sets: number;
  /** The shape of every set (default: main + three sub-agents + one toolbox). */
  shape?: SetShape;
  plan(admin: ApiClient, refs: SetRef[]): Promise<Plan>;
}

/** Pods of a set of this shape. */
function podsPerSet(shape: SetShape = {}): number {
  return 1 + (shape.subAgents ?? SUB_AGENTS) + (shape.toolbox === false ? 0 : 1);
}

/** At its phase for its current generation. */
function reached(phase: string): (o: CocoonSet | CocoonHibernation) => boolean {
  return (o) => o.status?.phase === phase && o.status.observedGeneration === o.metadata.generation;
}

/** How long a phase moving n objects may take. */
function phaseTimeoutMs(n: number): number {
  return 120_000 + n * 2_000;
}

/** Merge-patches the spec of each set, 50 at a time. */
function patchSets(admin: ApiClient, refs: SetRef[], spec: Record<string, unknown>) {
  return inParallel(
    refs,
    50,
    (r) => admin.patch(CocoonSets, r.namespace, r.name, "merge", { spec }),
  );
}

/** An object's phase, marked when it was not written for the current generation. */
function stateOf(o: CocoonSet | CocoonHibernation): string {
  const phase = o.status?.phase ?? "(none)";
  return o.status?.observedGeneration === o.metadata.generation ? phase : `${phase} (stale)`;
}

/** Waits on a watch until every one of n objects satisfies done. */
function completion<T extends KubeObject>(
  watch: ObjectWatch<T>,
  n: number,
  done: (o: T) => boolean,
  what: string,
): () => Promise<number> {
  return () => watch.waitFor(n, done, what, phaseTimeoutMs(n));
}

/** suspendResume and releaseWake: every set suspended, then resumed. */
async function suspendThenResume(
  admin: ApiClient,
  refs: SetRef[],
  shape: SetShape = {},
): Promise<Plan> {
  const sets = await watchObjects(admin, CocoonSets);
  const pods = (r: SetRef) => [
    ...Array.from(
      { length: 1 + (shape.subAgents ?? SUB_AGENTS) },
      (_, s) => `${r.name}-${s}`,
    ),
    ...(shape.toolbox === false ? [] : [toolboxPodName(r.name, "tools")]),
  ];
  return {
    objects: refs.length,
    objectKind: "sets",
    vms: refs.flatMap((r) => pods(r).map((p) => vmNameForPod(r.namespace, p))),
    phases: [
      {
        name: "suspend",
        write: () => patchSets(admin, refs, { suspend: true }),
        complete: completion(sets, refs.length, reached("Suspended"), "CocoonSets Suspended"),
        states: () => sets.countBy(stateOf),
      },
      {
        name: "resume",
        write: () => patchSets(admin, refs, { suspend: false }),
        complete: completion(sets, refs.length, converged, "CocoonSets Running"),
        states: () => sets.countBy(stateOf),
      },
    ],
    stop: () => sets.stop(),
  };
}

/** A release set: a main agent alone. */
const RELEASE_SHAPE: SetShape = { subAgents: 0, toolbox: false, hibernatePolicy: "release" };

/** How many of the VMs still have each snapshot tag in the registry. */
async function tagsLeft(system: BenchSystem, vms: string[]): Promise<Record<string, number>> {
  const out: Record<string, number> = { hibernate: 0, latest: 0 };
  await inParallel(vms, 20, async (vm) => {
    for (const tag of await system.stack.tagsOf(vm)) out[tag] = (out[tag] ?? 0) + 1;
  });
  return out;
}

/** The flows, each with its setup. */
function setups(sizes: FlowSizes): Record<FlowName, Setup> {
  return {
    hibernateWake: {
      sets: Math.ceil(sizes.hibernateWakePods / AGENTS_PER_SET),
      async plan(admin, refs) {
        const targets = refs.flatMap((r) =>
          Array.from({ length: AGENTS_PER_SET }, (_, slot) => ({
            namespace: r.namespace,
            pod: `${r.name}-${slot}`,
          }))
        ).slice(0, sizes.hibernateWakePods);
        const n = targets.length;
        const requests = await watchObjects(admin, CocoonHibernations);
        return {
          objects: n,
          objectKind: "pods",
          vms: targets.map((t) => vmNameForPod(t.namespace, t.pod)),
          phases: [
            {
              name: "hibernate",
              write: () =>
                inParallel(targets, 50, (t) =>
                  admin.create(CocoonHibernations, {
                    apiVersion: "cocoonset.cocoonstack.io/v1",
                    kind: "CocoonHibernation",
                    metadata: { name: `night-${t.pod}`, namespace: t.namespace },
                    spec: { podRef: { name: t.pod }, desire: "Hibernate" },
                  })),
              complete: completion(requests, n, reached("Hibernated"), "requests Hibernated"),
              states: () => requests.countBy(stateOf),
            },
            {
              name: "wake",
              write: () =>
                inParallel(
                  targets,
                  50,
                  (t) =>
                    admin.patch(CocoonHibernations, t.namespace, `night-${t.pod}`, "merge", {
                      spec: { desire: "Wake" },
                    }),
                ),
              complete: completion(requests, n, reached("Active"), "requests Active"),
              states: () => requests.countBy(stateOf),
            },
          ],
          stop: () => requests.stop(),
        };
      },
    },
    suspendResume: {
      sets: sizes.suspendResumeSets,
      plan: (admin, refs) => suspendThenResume(admin, refs),
    },
    releaseWake: {
      sets: sizes.releaseWakeSets,
      // The release policy takes a main alone (the API refuses it with sub-agents or toolboxes).
      shape: RELEASE_SHAPE,
      plan: (admin, refs) => suspendThenResume(admin, refs, RELEASE_SHAPE),
    },
  };
}

/** Registry requests the operator made from wall-clock time `from` on, by method. */
function registrySince(system: BenchSystem, from: number, to = Infinity) {
  const byMethod: Record<string, number> = {};
  let total = 0;
  for (const r of system.stack.proxy.requests) {
    if (r.at < from || r.at >= to) continue;
    byMethod[r.method] = (byMethod[r.method] ?? 0) + 1;
    total++;
  }
  return { total, byMethod };
}

/** Runs one flow on a fresh system. */
export async function benchFlow(
  operatorCmd: string,
  name: FlowName,
  sizes: FlowSizes = FULL_SIZES,
): Promise<FlowFigures> {
  const setup = setups(sizes)[name];
  const nodes = nodesFor(setup.sets);
  await using system = await startBenchSystem({ operatorCmd, nodes });
  const admin = system.stack.admin;
  const op = await system.startOperator();
  progress(`${name}: setting up ${setup.sets} CocoonSets`);
  const tSetup = performance.now();
  const refs = await createSets(admin, 0, setup.sets, 100, setup.shape);
  const tRunning = await waitConverged(admin, setup.sets, phaseTimeoutMs(setup.sets));
  if (!await system.waitQuiet(QUIET_MS, DRAIN_TIMEOUT_MS)) {
    progress(`${name}: the operator was still busy ${DRAIN_TIMEOUT_MS / 1000} s after the setup`);
  }
  const plan = await setup.plan(admin, refs);
  try {
    await op.resetPeakRss();
    const start = await op.usage();
    const loadAtStart = (await loadAverage())[0];
    const phases: Record<string, PhaseFigures> = {};
    const t0 = performance.now();
    const wall0 = Date.now();
    let tDone = t0;
    let incomplete: string | undefined;
    for (const [i, phase] of plan.phases.entries()) {
      const from = i === 0 ? t0 : performance.now();
      const wallFrom = i === 0 ? wall0 : Date.now();
      const cpuFrom = i === 0 ? start.cpuSeconds : (await op.usage()).cpuSeconds;
      progress(`${name}: ${phase.name} (${plan.objects} ${plan.objectKind})`);
      const completed = phase.complete();
      await phase.write(admin);
      try {
        tDone = await completed;
      } catch (err) {
        // Figures up to here are still worth having; the flow says where it stalled.
        tDone = performance.now();
        incomplete = `${phase.name}: ${errorMessage(err)}; by phase: ${
          JSON.stringify(phase.states())
        }`;
        progress(`${name}: ${incomplete}`);
      }
      const wallTo = Date.now();
      if (!incomplete) {
        progress(`${name}: ${phase.name} done in ${((tDone - from) / 1000).toFixed(1)} s`);
      }
      phases[phase.name] = {
        seconds: +((tDone - from) / 1000).toFixed(2),
        apiRequests: system.api.between(from, performance.now()).length,
        registryRequests: registrySince(system, wallFrom, wallTo).total,
        cpuSeconds: +((await op.usage()).cpuSeconds - cpuFrom).toFixed(2),
      };
      if (incomplete) break;
    }
    const drained = await system.waitQuiet(QUIET_MS, DRAIN_TIMEOUT_MS);
    const tEnd = performance.now();
    const end = await op.usage();
    const registry = registrySince(system, wall0);
    const snapshotsLeft = await tagsLeft(system, plan.vms);
    return {
      operator: await op.describe(),
      objects: plan.objects,
      objectKind: plan.objectKind,
      completed: !incomplete,
      ...(incomplete ? { stalled: incomplete } : {}),
      seconds: +((tDone - t0) / 1000).toFixed(2),
      apiRequests: tallyRequests(system.api.between(t0, tEnd)),
      registryRequests: registry.total,
      registryRequestsByMethod: registry.byMethod,
      cpuSeconds: +(end.cpuSeconds - start.cpuSeconds).toFixed(2),
      peakRssMiB: end.peakRssMiB,
      rssMiBAtStart: start.rssMiB,
      phases,
      drainSeconds: +((tEnd - tDone) / 1000).toFixed(2),
      drained,
      snapshotsLeft,
      setup: {
        sets: setup.sets,
        pods: setup.sets * podsPerSet(setup.shape),
        simNodes: nodes.length,
        secondsToAllRunning: +((tRunning - tSetup) / 1000).toFixed(2),
      },
      loadAverage: { atStart: loadAtStart, atEnd: (await loadAverage())[0] },
    };
  } finally {
    await plan.stop();
  }
}

/** The flows the command line asks for (`--quick`: smaller; `--flows`: some), keyed by name. */
export async function flowsFromFlags(
  flags: BenchFlags,
): Promise<Partial<Record<FlowName, FlowFigures>>> {
  const out: Partial<Record<FlowName, FlowFigures>> = {};
  for (const name of flags.flows ?? FLOW_NAMES) {
    out[name] = await benchFlow(flags.operatorCmd, name, flags.quick ? QUICK_SIZES : FULL_SIZES);
  }
  return out;
}

if (import.meta.main) {
  const flags = benchFlagsOrExit(Deno.args);
  console.log(
    JSON.stringify({ flows: await flowsFromFlags(flags), quick: flags.quick }, null, 2),
  );
}
