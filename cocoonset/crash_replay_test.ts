/**
 * Crash replay of the persisted-phase flows (release suspend, released-seat wake, migration, and
 * the two restores that go through the migration path: a released seat woken onto a pinned node,
 * a pinned main lost while suspended): the operator may be killed between any two of its writes,
 * and a fresh operator started on what the API server and the registry show must finish the flow
 * — no pod lost, no second pod for a slot, no VM state lost, no snapshot dropped early.
 *
 * How: each flow first runs uninterrupted and its operator writes (API create / update / patch /
 * delete and registry manifest DELETE, the stand-in's own writes not counted) are numbered. Then,
 * for every N, the flow runs again from scratch and the operator is killed right after write N
 * has landed: the write is stored, the call throws, the process's AbortSignal fires and every
 * later call of that process throws too, so nothing it would still have done happens. A new
 * reconciler (nothing carried over) then drives the flow on the same fake API and registry.
 *
 * The kill is done by wrapping the operator's client and registry rather than by a FakeClient
 * reactor: reactors run before the store is touched, so they cannot let a write land and then
 * cut the process off before its next statement.
 *
 * Reconciles are triggered as the controller would trigger them: at start-up, on a requeue or a
 * failed pass, on a spec change of the set, and on the owned-pod changes the real predicate lets
 * through. A flow that waits for a trigger that never comes stalls and fails.
 *
 * The stand-in for vk-cocoon binds pods (to the required, else the preferred node,
 * else node-a), boots them with fresh VM ids (restoring from `:hibernate` when the pod asks or
 * when its VM hibernated in place), pushes `:hibernate` and writes lifecycle `hibernated` with
 * the observed generation when asked to hibernate (clearing the VM id), and finalizes deleted
 * pods with grace 0. It models the main VM's state as a version that moves on while the VM runs,
 * so it can tell when the only copy of that state is destroyed.
 */
import assert from "node:assert/strict";
import { errorMessage, isNotFound, Nodes, Pods } from "../kube/mod.ts";
import type {
  Client,
  DeleteOptions,
  GetOptions,
  KubeObject,
  ListOptions,
  ObjectList,
  PatchBody,
  PatchOptions,
  PatchType,
  Pod,
  ResourceType,
  WatchEvent,
  WatchOptions,
  WriteOptions,
} from "../kube/mod.ts";
import { FakeClient, FakeClock, RecordingRecorder } from "../kube/testing/mod.ts";
import type { CocoonSet, CocoonSetSpec } from "../common/apis/v1/cocoonset_types.ts";
import { CocoonSets } from "../common/apis/v1/resources.ts";
import {
  ANNOTATION_HIBERNATED_ON_NODE,
  ANNOTATION_LIFECYCLE_OBSERVED_GENERATION,
  ANNOTATION_LIFECYCLE_STATE,
  ANNOTATION_VMID,
  isContainerRunning,
  LABEL_SLOT,
  LIFECYCLE_STATE_HIBERNATED,
  LIFECYCLE_STATE_READY,
  parseVMRuntime,
  readCocoonSetGeneration,
  readHibernateState,
  readLifecycleState,
  readRestoreFromHibernate,
} from "../common/meta/mod.ts";
import type { Registry } from "../snapshot/registry.ts";
import { FakeRegistry } from "../snapshot/testing/fake.ts";
import { podRelevantChange } from "./predicate.ts";
import { CocoonSetReconciler } from "./reconciler.ts";
import { counterValue, poolNode, TEST_NAMESPACE as ns } from "./_test_support.ts";
import { mainVMName, SEAT_SET_NAME as setName, seatSet } from "./_seats_test_support.ts";
import { HIBERNATE_SNAPSHOT_TAG } from "../snapshot/registry.ts";

/** Steps a flow may take to converge after its kill before the run counts as stuck. */
const STEP_BUDGET = 60;

/** What the killed operator process throws from its killing write on. */
class Killed extends Error {
  constructor(write: number) {
    super(`operator killed after write ${write}`);
    this.name = "Killed";
  }
}

/** The operator's writes of one run, across its restarts; the process dies after write killAt. */
class WriteLog {
  readonly writes: string[] = [];
  constructor(readonly killAt = 0) {}
}

/**
 * One operator process: a CocoonSetReconciler whose client and registry go through this
 * process, so that killing it stops every call it would still make.
 */
class OperatorProcess {
  readonly #abort = new AbortController();
  dead = false;
  readonly reconciler: CocoonSetReconciler;

  constructor(readonly world: World) {
    const client = new ProcessClient(this, world.fake);
    const registry: Registry = {
      hasManifest: (name, reference, signal) => {
        this.ensureAlive();
        return world.registry.hasManifest(name, reference, signal);
      },
      deleteManifest: (name, reference, signal) =>
        this.write(
          `registry DELETE ${name}:${reference}`,
          () => world.kubelet.tagDeleteViolation(name, reference),
          () => world.registry.deleteManifest(name, reference, signal),
        ),
    };
    this.reconciler = new CocoonSetReconciler({
      client,
      apiReader: client,
      registry,
      recorder: world.recorder,
      clock: world.clock,
    });
  }

  get signal(): AbortSignal {
    return this.#abort.signal;
  }

  ensureAlive(): void {
    if (this.dead) throw new Killed(this.world.log.killAt);
  }

  /**
   * Sends one write. check runs before it and names a violation the write would commit; it is
   * recorded only if the write then lands. After the write numbered killAt lands, the process
   * dies.
   */
  async write<T>(
    what: string,
    check: () => Promise<string | undefined> | string | undefined,
    send: () => Promise<T>,
  ): Promise<T> {
    this.ensureAlive();
    const violation = await check();
    const out = await send();
    if (violation) this.world.kubelet.violations.push(violation);
    const log = this.world.log;
    log.writes.push(what);
    if (log.writes.length === log.killAt) {
      this.dead = true;
      this.#abort.abort(new Killed(log.killAt));
      throw new Killed(log.killAt);
    }
    return out;
  }
}

/** The process's view of the API: reads and writes of the fake, through the process. */
class ProcessClient implements Client {
  constructor(readonly proc: OperatorProcess, readonly fake: FakeClient) {}

  get<T extends KubeObject>(
    rt: ResourceType<T>,
    namespace: string,
    name: string,
    opts?: GetOptions,
  ): Promise<T> {
    this.proc.ensureAlive();
    return this.fake.get(rt, namespace, name, opts);
  }

  list<T extends KubeObject>(rt: ResourceType<T>, opts?: ListOptions): Promise<ObjectList<T>> {
    this.proc.ensureAlive();
    return this.fake.list(rt, opts);
  }

  watch<T extends KubeObject>(
    rt: ResourceType<T>,
    opts: WatchOptions,
  ): AsyncIterable<WatchEvent<T>> {
    this.proc.ensureAlive();
    return this.fake.watch(rt, opts);
  }

  create<T extends KubeObject>(rt: ResourceType<T>, obj: T, opts?: WriteOptions): Promise<T> {
    if (opts?.dryRun) {
      // Validation only: nothing lands, so it is no write to count or kill after.
      this.proc.ensureAlive();
      return this.fake.create(rt, obj, opts);
    }
    return this.proc.write(
      `create ${rt.plural} ${obj.metadata.name}`,
      () => rt === Pods ? this.proc.world.kubelet.createViolation(obj as Pod) : undefined,
      () => this.fake.create(rt, obj, opts),
    );
  }

  update<T extends KubeObject>(rt: ResourceType<T>, obj: T, opts?: WriteOptions): Promise<T> {
    return this.proc.write(
      `update ${rt.plural} ${obj.metadata.name}`,
      () => undefined,
      () => this.fake.update(rt, obj, opts),
    );
  }

  createSubresource<T extends KubeObject>(
    rt: ResourceType<T>,
    namespace: string,
    name: string,
    subresource: string,
    body: KubeObject,
    opts?: WriteOptions,
  ): Promise<unknown> {
    return this.proc.write(
      `create ${rt.plural}/${subresource} ${name}`,
      () => undefined,
      () => this.fake.createSubresource(rt, namespace, name, subresource, body, opts),
    );
  }

  updateStatus<T extends KubeObject>(rt: ResourceType<T>, obj: T, opts?: WriteOptions): Promise<T> {
    return this.proc.write(
      `update ${rt.plural}/status ${obj.metadata.name}`,
      () => undefined,
      () => this.fake.updateStatus(rt, obj, opts),
    );
  }

  patch<T extends KubeObject>(
    rt: ResourceType<T>,
    namespace: string,
    name: string,
    type: PatchType,
    patch: PatchBody,
    opts?: PatchOptions,
  ): Promise<T> {
    return this.proc.write(
      describePatch(rt, name, patch, opts?.subresource),
      () => undefined,
      () => this.fake.patch(rt, namespace, name, type, patch, opts),
    );
  }

  delete<T extends KubeObject>(
    rt: ResourceType<T>,
    namespace: string,
    name: string,
    opts?: DeleteOptions,
  ): Promise<T | undefined> {
    return this.proc.write(
      `delete ${rt.plural} ${name}`,
      () => rt === Pods ? this.proc.world.kubelet.deleteViolation(name) : undefined,
      () => this.fake.delete(rt, namespace, name, opts),
    );
  }
}

/** A short name for a write, for test step names: what it changes, not its full body. */
function describePatch(
  rt: ResourceType,
  name: string,
  patch: PatchBody,
  subresource: string | undefined,
): string {
  const body = patch as {
    metadata?: { annotations?: Record<string, unknown> };
    status?: Record<string, unknown>;
  };
  if (subresource === "status") {
    const phase = body.status?.phase;
    const fields = phase ? `phase=${phase}` : Object.keys(body.status ?? {}).join(",");
    return `status ${rt.plural} ${name} ${fields}`;
  }
  const keys = Object.entries(body.metadata?.annotations ?? {}).map(([k, v]) =>
    `${k.slice(k.indexOf("/") + 1)}${v === null ? "-" : "+"}`
  );
  return `patch ${rt.plural} ${name} ${keys.join(",") || Object.keys(patch).join(",")}`;
}

/** A VM the stand-in runs, with the version of the state it holds. */
interface RunningVM {
  pod: string;
  version: number;
}

/**
 * The scripted vk-cocoon of the module doc. Also the judge of the VM-state invariants: every
 * violation it sees is recorded in `violations`.
 */
class VmKubelet {
  readonly violations: string[] = [];
  /** Newest version of the main VM's state; 0 before its first boot. */
  latest = 0;
  #tagVersion = 0;
  readonly #running = new Map<string, RunningVM>(); // by pod uid
  #vmIds = 0;

  constructor(readonly fake: FakeClient, readonly registry: FakeRegistry) {}

  /** The state version `:hibernate` holds, or undefined when the tag is absent. */
  tagHolds(): number | undefined {
    return this.registry.contains(mainVMName, HIBERNATE_SNAPSHOT_TAG)
      ? this.#tagVersion
      : undefined;
  }

  /** The running VM of a pod, if any. */
  runningOn(pod: Pod): RunningVM | undefined {
    return this.#running.get(pod.metadata.uid ?? "");
  }

  /** Whether a running VM holds the newest state. */
  #runningHoldsLatest(): boolean {
    return [...this.#running.values()].some((vm) => vm.version === this.latest);
  }

  /** One round over every pod (one transition each); returns whether it changed anything. */
  async step(): Promise<boolean> {
    let changed = false;
    for (const pod of (await this.fake.list(Pods, { namespace: ns })).items) {
      if (await this.#advance(pod)) changed = true;
    }
    // A running VM's memory moves on: any snapshot taken before now is behind it.
    for (const vm of this.#running.values()) {
      if (vm.version === this.latest) vm.version = ++this.latest;
    }
    if (this.latest > 0 && !this.#runningHoldsLatest() && this.tagHolds() !== this.latest) {
      this.violations.push(`VM state v${this.latest} is neither in a running VM nor in :hibernate`);
    }
    return changed;
  }

  async #advance(pod: Pod): Promise<boolean> {
    const name = pod.metadata.name ?? "";
    const uid = pod.metadata.uid ?? "";
    const vm = this.#running.get(uid);
    if (pod.metadata.deletionTimestamp) {
      if (vm && vm.version === this.latest && this.tagHolds() !== this.latest) {
        this.violations.push(`${name} was finalized while its VM held the only copy of its state`);
      }
      this.#running.delete(uid);
      await this.fake.delete(Pods, ns, name, { gracePeriodSeconds: 0 });
      return true;
    }
    if (!pod.spec?.nodeName) {
      const node = placementOf(pod);
      // A node that is not registered takes no pod: it stays Pending.
      if (!await nodeExists(this.fake, node)) return false;
      await this.fake.patch(Pods, ns, name, "merge", { spec: { nodeName: node } });
      return true;
    }
    if (vm) {
      if (!readHibernateState(pod)) return false;
      this.registry.put(mainVMName, HIBERNATE_SNAPSHOT_TAG);
      this.#tagVersion = vm.version;
      this.#running.delete(uid);
      await this.#publish(pod, {
        [ANNOTATION_VMID]: null,
        [ANNOTATION_LIFECYCLE_STATE]: LIFECYCLE_STATE_HIBERNATED,
        [ANNOTATION_LIFECYCLE_OBSERVED_GENERATION]: String(readCocoonSetGeneration(pod)),
      }, false);
      return true;
    }
    // No VM runs for this pod: boot one, unless it is (to stay) hibernated.
    if (readHibernateState(pod)) return false;
    let version: number;
    if (readRestoreFromHibernate(pod) || readLifecycleState(pod) === LIFECYCLE_STATE_HIBERNATED) {
      const held = this.tagHolds();
      if (held === undefined) {
        this.violations.push(`${name} must restore but ${mainVMName}:hibernate is gone`);
        return false;
      }
      if (held !== this.latest) {
        this.violations.push(`${name} restores state v${held}, newest is v${this.latest}`);
      }
      version = held;
    } else {
      if (this.latest > 0) {
        this.violations.push(`${name} boots fresh over VM state v${this.latest}`);
      }
      version = ++this.latest;
    }
    if (this.#running.size > 0) this.violations.push(`${name} boots while another main VM runs`);
    this.#running.set(uid, { pod: name, version });
    await this.#publish(pod, {
      [ANNOTATION_VMID]: `vm-${++this.#vmIds}`,
      [ANNOTATION_LIFECYCLE_STATE]: LIFECYCLE_STATE_READY,
      [ANNOTATION_LIFECYCLE_OBSERVED_GENERATION]: String(readCocoonSetGeneration(pod)),
    }, true);
    return true;
  }

  /** Writes the VM's annotations, then the pod status (Running; Ready while the VM runs). */
  async #publish(pod: Pod, annotations: Record<string, string | null>, up: boolean) {
    const name = pod.metadata.name ?? "";
    await this.fake.patch(Pods, ns, name, "merge", { metadata: { annotations } });
    await this.fake.patch(Pods, ns, name, "merge", {
      status: {
        phase: "Running",
        conditions: [{ type: "Ready", status: up ? "True" : "False" }],
        containerStatuses: [{
          name: "agent",
          ready: up,
          restartCount: 0,
          image: "x",
          imageID: "x",
          state: { running: {} },
        }],
      },
    }, { subresource: "status" });
  }

  /** A pod create that would put two pods, or two VMs, on one slot. */
  async createViolation(pod: Pod): Promise<string | undefined> {
    const slot = pod.metadata.labels?.[LABEL_SLOT];
    const pods = (await this.fake.list(Pods, { namespace: ns })).items;
    const alive = pods.find((p) =>
      p.metadata.labels?.[LABEL_SLOT] === slot && !p.metadata.deletionTimestamp
    );
    if (alive) return `created ${pod.metadata.name} while ${alive.metadata.name} is alive`;
    if (slot === "0" && this.#running.size > 0) {
      return `created ${pod.metadata.name} while a main VM still runs`;
    }
    return undefined;
  }

  /** A pod delete that would destroy the only copy of the main VM's state. */
  async deleteViolation(name: string): Promise<string | undefined> {
    let pod: Pod;
    try {
      pod = await this.fake.get(Pods, ns, name);
    } catch (err) {
      if (isNotFound(err)) return undefined;
      throw err;
    }
    if (pod.metadata.deletionTimestamp) return undefined;
    if (this.runningOn(pod)) return `deleted ${name} while its VM runs (state not in :hibernate)`;
    if (this.latest > 0 && this.tagHolds() !== this.latest) {
      return `deleted ${name} before :hibernate holds its VM state`;
    }
    return undefined;
  }

  /** A tag delete that would drop the only copy of the main VM's state. */
  tagDeleteViolation(name: string, reference: string): string | undefined {
    if (name !== mainVMName || reference !== HIBERNATE_SNAPSHOT_TAG) return undefined;
    if (this.tagHolds() === this.latest && !this.#runningHoldsLatest()) {
      return `dropped ${name}:${reference} while it held the only copy of the VM state`;
    }
    return undefined;
  }
}

async function nodeExists(fake: FakeClient, name: string): Promise<boolean> {
  try {
    await fake.get(Nodes, "", name);
    return true;
  } catch (err) {
    if (isNotFound(err)) return false;
    throw err;
  }
}

/** Where the stand-in binds a pod: the required node, else the preferred one, else node-a. */
function placementOf(pod: Pod): string {
  const affinity = pod.spec?.affinity?.nodeAffinity;
  const required = affinity?.requiredDuringSchedulingIgnoredDuringExecution?.nodeSelectorTerms[0]
    ?.matchExpressions?.[0]?.values?.[0];
  const preferred = affinity?.preferredDuringSchedulingIgnoredDuringExecution?.[0]?.preference
    .matchExpressions?.[0]?.values?.[0];
  return required ?? preferred ?? "node-a";
}

/** The API server, the registry, the stand-in and the current operator process of one run. */
class World {
  readonly clock = new FakeClock(Date.parse("2025-01-01T00:00:00Z"));
  readonly fake = new FakeClient({ clock: this.clock });
  readonly registry = new FakeRegistry();
  readonly recorder = new RecordingRecorder();
  readonly kubelet = new VmKubelet(this.fake, this.registry);

  constructor() {
    for (const node of ["node-a", "node-b"]) this.fake.seed(Nodes, poolNode(node));
  }
  log = new WriteLog();
  proc: OperatorProcess = new OperatorProcess(this);
  kills = 0;
  /** After a kill, the new process reconciles before the stand-in acts again. */
  restartFirst = false;
  /** Messages of failed passes that were not the kill (retried with backoff). */
  readonly failures: string[] = [];

  /** Starts counting writes anew with a new process that dies after write killAt (0: never). */
  measure(killAt: number): void {
    this.log = new WriteLog(killAt);
    this.proc = new OperatorProcess(this);
  }

  async set(): Promise<CocoonSet> {
    return await this.fake.get(CocoonSets, ns, setName);
  }

  async pods(): Promise<Pod[]> {
    return (await this.fake.list(Pods, { namespace: ns })).items;
  }

  /** Edits the spec, as a user would (the generation moves). */
  async editSpec(spec: Partial<CocoonSetSpec>): Promise<void> {
    await this.fake.patch(CocoonSets, ns, setName, "merge", { spec });
  }
}

/** Why the world is not in the awaited state yet, or undefined when it is. */
type EndState = (world: World) => Promise<string | undefined>;

interface DriveOutcome {
  converged: boolean;
  steps: number;
  why?: string;
}

/**
 * Runs reconciles (when one is due) and stand-in rounds until the end state holds at rest, an
 * invariant breaks, nothing is left to trigger a reconcile, or the budget is spent. A killed
 * process is replaced by a fresh one, which reconciles at once (its informers list everything).
 */
async function drive(
  world: World,
  endState: EndState,
  budget = STEP_BUDGET,
): Promise<DriveOutcome> {
  const relevant = podRelevantChange();
  let due = true;
  let pods = new Map((await world.pods()).map((p) => [p.metadata.uid ?? "", p]));
  let generation = (await world.set()).metadata.generation;
  for (let step = 1; step <= budget; step++) {
    let wrote = false;
    let killed = false;
    if (due) {
      const proc = world.proc;
      const before = world.log.writes.length;
      try {
        const result = await proc.reconciler.reconcile(
          { namespace: ns, name: setName },
          proc.signal,
        );
        due = result.requeue === true || (result.requeueAfter ?? 0) > 0;
      } catch (err) {
        if (proc.dead) {
          killed = true;
          world.kills++;
          world.proc = new OperatorProcess(world);
        } else {
          world.failures.push(errorMessage(err));
        }
        due = true;
      }
      wrote = world.log.writes.length > before;
    }
    // Either the restarted operator or vk-cocoon moves first after a kill.
    const changed = killed && world.restartFirst ? false : await world.kubelet.step();
    const now = new Map((await world.pods()).map((p) => [p.metadata.uid ?? "", p]));
    for (const [uid, pod] of now) {
      const old = pods.get(uid);
      if (old ? relevant.update(old, pod) : relevant.create(pod)) due = true;
    }
    for (const uid of pods.keys()) if (!now.has(uid)) due = true;
    pods = now;
    const gen = (await world.set()).metadata.generation;
    if (gen !== generation) due = true;
    generation = gen;
    if (world.kubelet.violations.length > 0) {
      return { converged: false, steps: step, why: world.kubelet.violations.join("; ") };
    }
    const notYet = await endState(world);
    if (!notYet && !changed && (!due || !wrote)) return { converged: true, steps: step };
    if (!due && !changed) {
      return {
        converged: false,
        steps: step,
        why: `stalled, nothing triggers a reconcile: ${notYet}`,
      };
    }
  }
  return { converged: false, steps: budget, why: `no convergence in ${budget} steps` };
}

/** The set's phase, or why it is not the expected one. */
async function phaseIs(world: World, phase: string): Promise<string | undefined> {
  const got = (await world.set()).status?.phase;
  return got === phase ? undefined : `phase ${got}, want ${phase}`;
}

/** Exactly one main pod, not terminating, on node, with a live VM holding the newest state. */
async function liveMainOn(world: World, node: string): Promise<string | undefined> {
  const pods = await world.pods();
  if (pods.length !== 1) return `${pods.length} pods, want the main alone`;
  const main = pods[0];
  if (main.metadata.name !== "demo-0" || main.metadata.deletionTimestamp) return "no live main";
  if (main.spec?.nodeName !== node) return `main on ${main.spec?.nodeName}, want ${node}`;
  if (parseVMRuntime(main).vmID === "" || !isContainerRunning(main)) return "main VM not live";
  if (world.kubelet.runningOn(main)?.version !== world.kubelet.latest) {
    return "the main VM does not hold the newest state";
  }
  return undefined;
}

const runningOnNodeA: EndState = async (world) =>
  await phaseIs(world, "Running") ?? await liveMainOn(world, "node-a");

const released: EndState = async (world) => {
  const set = await world.set();
  const pods = await world.pods();
  if (pods.length > 0) return `${pods.length} pods left`;
  if (world.kubelet.tagHolds() !== world.kubelet.latest) return ":hibernate lacks the VM state";
  if (set.metadata.annotations?.[ANNOTATION_HIBERNATED_ON_NODE] !== "node-a") return "no node hint";
  return await phaseIs(world, "Suspended");
};

/** Woken from a released seat onto node: restored, running, tag and hint gone. */
function wokenOn(node: string): EndState {
  return async (world) => {
    const set = await world.set();
    if (world.kubelet.tagHolds() !== undefined) return ":hibernate still there";
    if (set.metadata.annotations?.[ANNOTATION_HIBERNATED_ON_NODE] !== undefined) {
      return "hint still set";
    }
    const live = await liveMainOn(world, node);
    if (live) return live;
    if (!readRestoreFromHibernate((await world.pods())[0])) return "main was not restored";
    return await phaseIs(world, "Running");
  };
}

/** Suspended under the retain policy: the main kept, hibernated, its state in :hibernate. */
const suspendedRetained: EndState = async (world) => {
  const pods = await world.pods();
  if (pods.length !== 1 || !readHibernateState(pods[0])) return "no hibernated main";
  if (world.kubelet.tagHolds() !== world.kubelet.latest) return ":hibernate lacks the VM state";
  return await phaseIs(world, "Suspended");
};

/** Restored from :hibernate onto node: live, running, tag gone. */
function restoredOn(node: string): EndState {
  return async (world) => {
    if (world.kubelet.tagHolds() !== undefined) return ":hibernate still there";
    const live = await liveMainOn(world, node);
    if (live) return live;
    if (!readRestoreFromHibernate((await world.pods())[0])) return "main was not restored";
    return await phaseIs(world, "Running");
  };
}

const migrated: EndState = async (world) => {
  if (world.kubelet.tagHolds() !== undefined) return ":hibernate still there";
  return await liveMainOn(world, "node-b") ?? await phaseIs(world, "Running");
};

/**
 * A crash-replayed flow: how its start is reached, what begins it (a spec edit, or any change
 * to the world), where it must end.
 */
interface Flow {
  name: string;
  /** Brings a fresh world to the moment just before the flow's edit. */
  prepare(world: World): Promise<void>;
  /** The spec edit that starts the flow (when begin is absent). */
  edit?: Partial<CocoonSetSpec>;
  /** What starts the flow instead of a spec edit. */
  begin?(world: World): Promise<void>;
  endState: EndState;
  /** For wakes: the slot_release_wake_total increments the flow must make, by placement. */
  wakeScores?: { hintNode: number; pool: number };
}

/** Drives a fresh world to a released seat: Running on node-a, then suspended and released. */
async function startReleased(world: World): Promise<void> {
  await startRunning(world, { hibernatePolicy: "release" });
  await world.editSpec({ suspend: true });
  await expectConverged(world, released, "prelude: released");
}

/** Seeds the set and drives it, uninterrupted, to Running with a live main on node-a. */
async function startRunning(world: World, spec: Partial<CocoonSetSpec>): Promise<void> {
  world.fake.seed(CocoonSets, seatSet((cs) => Object.assign(cs.spec, spec)));
  await expectConverged(world, runningOnNodeA, "prelude: Running");
}

async function expectConverged(world: World, end: EndState, what: string): Promise<void> {
  const outcome = await drive(world, end);
  assert.ok(outcome.converged, `${what}: ${outcome.why}`);
}

/**
 * Runs the uninterrupted operator and the stand-in alternately, a reconcile or a stand-in round
 * at a time, until reached holds: a prelude that stops a flow half-way.
 */
async function stepUntil(world: World, reached: (world: World) => Promise<boolean>) {
  for (let i = 0; i < STEP_BUDGET; i++) {
    if (await reached(world)) return;
    await world.proc.reconciler.reconcile({ namespace: ns, name: setName }, world.proc.signal);
    if (await reached(world)) return;
    await world.kubelet.step();
  }
  assert.fail("the prelude never reached its state");
}

/** Starts a migration from node-a to node-b and stops it where reached says. */
async function migrationStoppedAt(
  world: World,
  reached: (world: World) => Promise<boolean>,
): Promise<void> {
  await startRunning(world, {});
  await world.editSpec({ nodeName: "node-b" });
  await stepUntil(world, reached);
}

/** The old main quiesced on node-a: its state in :hibernate, the pod still there. */
async function oldMainHibernated(world: World): Promise<boolean> {
  const pods = await world.pods();
  return pods.length === 1 && readHibernateState(pods[0]) && !pods[0].metadata.deletionTimestamp &&
    world.kubelet.tagHolds() === world.kubelet.latest;
}

/** The old main gone and no new one yet: the state only in :hibernate. */
async function oldMainGone(world: World): Promise<boolean> {
  return (await world.pods()).length === 0 && world.kubelet.tagHolds() === world.kubelet.latest;
}

/** The restore pod created, pinned to node-b, not bound yet. */
async function restorePodWaiting(world: World): Promise<boolean> {
  const pods = await world.pods();
  return pods.length === 1 && readRestoreFromHibernate(pods[0]) && !pods[0].spec?.nodeName;
}

/** node-b leaves the cluster. */
async function removeNodeB(world: World): Promise<void> {
  await world.fake.delete(Nodes, "", "node-b");
}

/** Running live on node-a, nothing in :hibernate, the status saying the target is unknown. */
const stayedInPool: EndState = async (world) => {
  if (world.kubelet.tagHolds() !== undefined) return ":hibernate still there";
  const reason = (await world.set()).status?.conditions?.find((c) => c.type === "Progressing")
    ?.reason;
  if (reason !== "MigrationTargetUnknown") return `Progressing reason ${reason}`;
  return await runningOnNodeA(world);
};

const flows: Flow[] = [
  {
    name: "release suspend",
    prepare: (world) => startRunning(world, { hibernatePolicy: "release" }),
    edit: { suspend: true },
    endState: released,
  },
  {
    name: "released-seat wake",
    prepare: startReleased,
    edit: { suspend: false },
    endState: wokenOn("node-a"),
    wakeScores: { hintNode: 1, pool: 0 },
  },
  {
    // The migration path restores the main on the pinned node; the wake then retires the hint.
    name: "released-seat wake onto a pinned node",
    prepare: startReleased,
    edit: { suspend: false, nodeName: "node-b" },
    endState: wokenOn("node-b"),
    wakeScores: { hintNode: 0, pool: 1 },
  },
  {
    // A pinned set suspended under retain loses its hibernated main (node gone, pod
    // force-deleted) and is unsuspended: the migration path restores it from :hibernate.
    name: "restore of a pinned main lost while suspended",
    prepare: async (world) => {
      await startRunning(world, { nodeName: "node-a" });
      await world.editSpec({ suspend: true });
      await expectConverged(world, suspendedRetained, "prelude: suspended");
      await world.fake.delete(Pods, ns, "demo-0", { gracePeriodSeconds: 0 });
    },
    edit: { suspend: false },
    endState: restoredOn("node-a"),
  },
  {
    name: "migration",
    prepare: (world) => startRunning(world, {}),
    edit: { nodeName: "node-b" },
    endState: migrated,
  },
  {
    // Nothing may be hibernated or deleted: the set keeps running where it is.
    name: "migration toward a node that does not exist",
    prepare: (world) => startRunning(world, {}),
    edit: { nodeName: "node-z" },
    endState: stayedInPool,
  },
  {
    name: "migration whose target leaves once the old main hibernated",
    prepare: (world) => migrationStoppedAt(world, oldMainHibernated),
    begin: removeNodeB,
    endState: stayedInPool,
  },
  {
    name: "migration whose target leaves once the old main is gone",
    prepare: (world) => migrationStoppedAt(world, oldMainGone),
    begin: removeNodeB,
    endState: stayedInPool,
  },
  {
    name: "migration whose target leaves while the restore pod waits for it",
    prepare: (world) => migrationStoppedAt(world, restorePodWaiting),
    begin: removeNodeB,
    endState: stayedInPool,
  },
];

/**
 * One run of a flow, killed after write killAt (0: uninterrupted); restartFirst picks who moves
 * first after the kill.
 */
async function runFlow(flow: Flow, killAt: number, restartFirst = false) {
  const world = new World();
  world.restartFirst = restartFirst;
  await flow.prepare(world);
  world.measure(killAt);
  const wakeScores = {
    hintNode: await wakeScore("hint-node"),
    pool: await wakeScore("pool"),
  };
  if (flow.begin) await flow.begin(world);
  else await world.editSpec(flow.edit ?? {});
  const outcome = await drive(world, flow.endState);
  return {
    world,
    outcome,
    wakeScored: {
      hintNode: await wakeScore("hint-node") - wakeScores.hintNode,
      pool: await wakeScore("pool") - wakeScores.pool,
    },
  };
}

function wakeScore(placement: string): Promise<number> {
  return counterValue("cocoon_operator_slot_release_wake_total", {
    namespace: ns,
    cocoonset: setName,
    placement,
  });
}

for (const flow of flows) {
  Deno.test(`crash replay: ${flow.name} converges after a kill following any write`, async (t) => {
    const clean = await runFlow(flow, 0);
    assert.ok(clean.outcome.converged, `uninterrupted: ${clean.outcome.why}`);
    assert.equal(clean.world.kills, 0);
    const writes = clean.world.log.writes;
    assert.ok(writes.length > 0, "the flow writes");
    if (flow.wakeScores) assert.deepEqual(clean.wakeScored, flow.wakeScores);

    for (let n = 1; n <= writes.length; n++) {
      await t.step(`killed after write ${n}/${writes.length}: ${writes[n - 1]}`, async () => {
        for (const restartFirst of [false, true]) {
          const order = restartFirst ? "restart first" : "vk-cocoon first";
          const run = await runFlow(flow, n, restartFirst);
          assert.deepEqual(
            run.world.log.writes.slice(0, n),
            writes.slice(0, n),
            `${order}: the run replays the same writes up to the kill`,
          );
          assert.equal(run.world.kills, 1, `${order}: the operator was killed once`);
          assert.ok(run.outcome.converged, `${order}: ${run.outcome.why}`);
          assert.deepEqual(run.world.failures, [], `${order}: no pass failed but the killed one`);
          if (flow.wakeScores) {
            assert.deepEqual(run.wakeScored, flow.wakeScores, `${order}: the wake scored once`);
          }
        }
      });
    }
  });
}
