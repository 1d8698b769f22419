/**
 * One run of the model-based test, from one seed: the world (fake API server, fake clock, fake
 * registry, the vk-cocoon model), the operator process of the moment, the random schedule, the
 * claimants, and the checks after every step.
 *
 * A run has three parts:
 *
 * 1. **Prelude**: the user creates one CocoonSet (a main only), or two in different namespaces
 *    (sometimes two whose VM names collide: `team`/`x-prod` and `team-x`/`prod`), and the world
 *    runs without faults until they are Running.
 * 2. **Acting**: a few random steps, each one of: a CocoonSet pass or a CocoonHibernation pass
 *    (either may read from a stale cache copy and may be killed after its Nth write, after which
 *    a fresh process carries on), one vk-cocoon transition, a user action (suspend with the retain
 *    or release policy, unsuspend, migrate, CocoonHibernation create/delete with Hibernate or
 *    Wake, a request's desire flipped, main pod delete, set delete, and, with two namespaces, an edit of
 *    `delete-vm-names` naming the other namespace's VM), or the clock moving on.
 * 3. **Quiet**: the user stops; rounds of every reconciler once (fresh reads, no crash) and
 *    vk-cocoon until idle, the clock moving 5 s (one requeue interval) per round, until a round
 *    writes nothing and the world is steady, or the round budget runs out.
 *
 * Checks after every step: no registry delete removed the only copy of a VM state a claimant
 * expects back (judged before the delete lands), no pod was finalized while its VM held the only
 * copy of such state, no VM booted fresh over it or restored an older one, no restore found its
 * tag gone, no two live VMs share a name. After the quiet part: converged (steady phases, no
 * object left terminating) within the budget, with no hot loop.
 *
 * **Claimants** are defined from the model, not from the operator's code: a VM's state is
 * expected back as long as the CocoonSet that owns the VM name exists and is not being deleted,
 * unless the user threw that state away (deleted the pod) — that covers a released seat, a
 * pending migration, a hibernated pod and a Hibernated/Waking request, which all live inside a
 * set that still exists. The claimant text names them for the report.
 *
 * @module
 */
import { Nodes, type Pod, Pods } from "../../kube/core.ts";
import { errorMessage } from "../../kube/errors.ts";
import { FakeClient } from "../../kube/testing/fake.ts";
import { FakeClock } from "../../kube/testing/fake_clock.ts";
import type { CocoonSet } from "../../common/apis/v1/cocoonset_types.ts";
import type { CocoonHibernation } from "../../common/apis/v1/cocoonhibernation_types.ts";
import { CocoonHibernations, CocoonSets } from "../../common/apis/v1/resources.ts";
import {
  ANNOTATION_HIBERNATED_ON_NODE,
  LABEL_COCOON_SET,
  parseVMSpec,
  readHibernateState,
  readRestoreFromHibernate,
  vmNameForDeployment,
  vmNameForPod,
  vmUp,
} from "../../common/meta/mod.ts";
import { ANNOTATION_DELETE_VM_NAMES } from "../../cocoonset/teardown.ts";
import { podRelevantChange } from "../../cocoonset/predicate.ts";
import type { KubeObject } from "../../kube/object.ts";
import type { ResourceType } from "../../kube/resource.ts";
import { FakeRegistry } from "../../snapshot/testing/fake.ts";
import { poolNode } from "../../cocoonset/_test_support.ts";
import {
  copyStore,
  Killed,
  OperatorProcess,
  type ProcessWorld,
  type StoreCopy,
} from "./_operator.ts";
import { Rng } from "./_rng.ts";
import { type Violation, type VkMode, VkModel } from "./_vk_model.ts";
import { HIBERNATE_SNAPSHOT_TAG } from "../../snapshot/registry.ts";

/** A CocoonSet of the run and its main VM's name. */
export interface SetRef {
  ns: string;
  name: string;
  vm: string;
}

/** How a run is shaped; drawn from the seed unless forced. */
export interface RunOptions {
  mode?: VkMode;
  /** Sets of the run: one, two namespaces, or two whose VM names collide. */
  shape?: "one" | "two" | "collide";
  /** Steps of the acting part. */
  actingSteps?: number;
  /** Rounds the quiet part may take to converge. */
  quietRounds?: number;
  /** How often vk-cocoon's Remove after a push fails (default 0.1). */
  removeFailureRate?: number;
}

/** The outcome of one seed. */
export interface RunOutcome {
  seed: number;
  mode: VkMode;
  violations: Violation[];
  /** The step trace (printed on failure). */
  trace: string[];
  /** Operator writes over the run. */
  writes: number;
  kills: number;
  staleReads: number;
  /** Quiet rounds until steady (undefined when it did not converge). */
  convergedAfter?: number;
  /** Steady states that wait on lifecycle annotations vk-cocoon HEAD never writes. */
  contractGaps: number;
  /** Restores of a tag a set's suspend left behind, older than the VM's last run (not judged). */
  suspendLeftoverRestores: number;
  /** Restores of a tag again before any pass saw the VM back from it (not judged). */
  unseenReturnRestores: number;
}

const REQUEUE_MS = 5_000;

/** The run; see the module doc. */
export class ModelRun {
  readonly rng: Rng;
  readonly mode: VkMode;
  readonly clock = new FakeClock(T0);
  readonly fake = new FakeClient({ clock: this.clock });
  readonly registry = new FakeRegistry();
  readonly vk: VkModel;
  readonly world: ProcessWorld;
  proc: OperatorProcess;
  readonly sets: SetRef[];
  readonly trace: string[] = [];
  /** Copies of the store after each step, newest last (the cache lag draws from them). */
  readonly history: StoreCopy[] = [];
  /** The store as of the last step, for the claimants. */
  view: StoreCopy = new Map();
  readonly hibKeys: { ns: string; name: string }[] = [];
  kills = 0;
  staleReads = 0;
  contractGaps = 0;
  #hibCount = 0;
  /** When each reconcile is due (fake time), by keyId; absent: nothing asked for one. */
  readonly #due = new Map<string, number>();
  readonly #podPredicate = podRelevantChange();
  #vkLogSeen = 0;

  constructor(readonly seed: number, readonly opts: RunOptions = {}) {
    this.rng = new Rng(seed);
    this.mode = opts.mode ?? (this.rng.chance(0.5) ? "head" : "contract");
    const draw = this.rng.next();
    const shape = opts.shape === "one"
      ? 0
      : opts.shape === "two"
      ? 0.9
      : opts.shape === "collide"
      ? 0.99
      : draw;
    this.sets = shape < 0.85
      ? [ref("ns", "demo")]
      : shape < 0.97
      ? [ref("ns-a", "demo"), ref("ns-b", "demo")]
      : [ref("team", "x-prod"), ref("team-x", "prod")];
    this.vk = new VkModel(
      this.mode,
      this.fake,
      this.registry,
      this.rng,
      (vm) => this.claimant(vm),
      opts.removeFailureRate ?? 0.1,
      (vm) => this.#suspending(vm),
    );
    this.world = {
      fake: this.fake,
      registry: this.registry,
      clock: this.clock,
      vk: this.vk,
      writes: [],
      violations: [],
    };
    this.proc = new OperatorProcess(this.world);
    for (const node of ["node-a", "node-b"]) this.fake.seed(Nodes, poolNode(node));
  }

  /** All violations seen so far. */
  get violations(): Violation[] {
    return [...this.world.violations, ...this.vk.violations];
  }

  /** Runs prelude, acting and quiet parts; stops at the first violation. */
  async run(): Promise<RunOutcome> {
    await this.prelude();
    let convergedAfter: number | undefined;
    if (this.violations.length === 0) {
      const steps = this.opts.actingSteps ?? this.rng.int(8, 24);
      for (let i = 0; i < steps && this.violations.length === 0; i++) await this.actingStep();
    }
    if (this.violations.length === 0) {
      this.trace.push("-- user stops acting --");
      convergedAfter = await this.quiet(this.opts.quietRounds ?? 120, true);
    }
    return {
      seed: this.seed,
      mode: this.mode,
      violations: this.violations,
      trace: this.trace,
      writes: this.world.writes.length,
      kills: this.kills,
      staleReads: this.staleReads,
      convergedAfter,
      contractGaps: this.contractGaps,
      suspendLeftoverRestores: this.vk.suspendLeftoverRestores,
      unseenReturnRestores: this.vk.unseenReturnRestores,
    };
  }

  /** The prelude: the user creates the sets, and the world runs without faults until steady. */
  async prelude(): Promise<void> {
    this.trace.push(`seed ${this.seed}: vk-cocoon ${this.mode}, sets ${this.sets.map(setText)}`);
    for (const s of this.sets) {
      await this.fake.create(CocoonSets, newSet(s));
    }
    await this.#refresh();
    const steady = await this.quiet(40, false);
    if (steady === undefined && this.violations.length === 0) {
      this.world.violations.push({
        kind: "no convergence (prelude)",
        vm: "",
        what: this.#steadyText(),
      });
    }
  }

  /** A scripted user action (what the user does, then the world as it then is). */
  async user(text: string, act: () => Promise<unknown>): Promise<void> {
    await act();
    await this.#refresh();
    this.trace.push(`USER ${text}`);
  }

  /** One scripted vk-cocoon step or restart, the world refreshed after it. */
  async vkStep(restart = false): Promise<boolean> {
    const moved = restart ? await this.vk.restart() : await this.vk.step();
    await this.#refresh();
    return moved;
  }

  /** One random step of the acting part. */
  async actingStep(): Promise<void> {
    const what = this.rng.weighted({ set: 30, hib: 15, vk: 30, user: 20, clock: 5, restart: 2 });
    switch (what) {
      case "set":
      case "hib": {
        // Mostly a pass the controller would run now (requeue due, or an event); sometimes a
        // pass nothing asked for (a resync, an event this model does not track).
        const keys = what === "set" ? this.sets : this.hibKeys;
        const due = keys.filter((k) => this.#isDue(what, k));
        const key = due.length > 0 && this.rng.chance(0.85)
          ? this.rng.pick(due)
          : keys.length > 0 && this.rng.chance(0.3)
          ? this.rng.pick(keys)
          : undefined;
        if (key) await this.pass(what, key, true);
        else await this.vk.step();
        break;
      }
      case "vk":
        await this.vk.step();
        break;
      case "user":
        await this.userAction();
        break;
      case "clock":
        this.clock.advance(REQUEUE_MS * this.rng.int(1, 6));
        this.trace.push(`clock +${this.clock.now() - T0} ms total`);
        break;
      case "restart":
        if (!await this.vk.restart()) await this.vk.step();
        break;
    }
    await this.#refresh();
  }

  /** Whether the controller would reconcile key now. */
  #isDue(which: "set" | "hib", key: { ns: string; name: string }): boolean {
    const at = this.#due.get(keyId(which, key));
    return at !== undefined && at <= this.clock.now();
  }

  /** Schedules key at fake time at (the earlier of two schedules wins). */
  #schedule(which: "set" | "hib", key: { ns: string; name: string }, at: number): void {
    const id = keyId(which, key);
    const cur = this.#due.get(id);
    if (cur === undefined || at < cur) this.#due.set(id, at);
  }

  /** One reconcile pass; with faults, maybe from a stale copy and maybe killed part-way. */
  async pass(
    which: "set" | "hib",
    key: { ns: string; name: string },
    faults: boolean,
  ): Promise<number> {
    const proc = this.proc;
    const before = this.world.writes.length;
    const eventsBefore = proc.recorder.events.length;
    let note = "";
    if (faults && this.history.length > 1 && this.rng.chance(0.25)) {
      const back = this.rng.int(1, Math.min(4, this.history.length - 1));
      proc.lag = this.history[this.history.length - 1 - back];
      this.staleReads++;
      note += ` (cache ${back} steps behind)`;
    }
    if (faults && this.rng.chance(0.07)) {
      const n = this.rng.int(1, 3);
      proc.armKill(n);
      note += ` (dies after write ${n})`;
    }
    let result = "";
    this.#due.delete(keyId(which, key));
    const now = this.clock.now();
    this.world.acting = {
      kind: which === "set" ? "CocoonSet" : "CocoonHibernation",
      ns: key.ns,
      name: key.name,
    };
    try {
      const req = { namespace: key.ns, name: key.name };
      const r = which === "set"
        ? await proc.sets.reconcile(req, proc.signal)
        : await proc.hibernations.reconcile(req, proc.signal);
      result = r.requeueAfter ? `requeue ${r.requeueAfter} ms` : r.requeue ? "requeue" : "done";
      if (r.requeueAfter) this.#schedule(which, key, now + r.requeueAfter);
      else if (r.requeue) this.#schedule(which, key, now);
      // A whole pass on fresh reads has seen the VM as its pod shows it now.
      if (!proc.lag) this.#noteSeen(which, key);
    } catch (err) {
      if (proc.dead || err instanceof Killed) {
        this.kills++;
        this.proc = new OperatorProcess(this.world);
        result = "killed; a fresh process takes over";
        // The new process's informers list everything: every object is reconciled at start.
        for (const k of this.sets) this.#schedule("set", k, now);
        for (const k of this.hibKeys) this.#schedule("hib", k, now);
      } else {
        result = `error: ${errorMessage(err)}`;
        this.#schedule(which, key, now);
      }
    } finally {
      this.world.acting = undefined;
      // The cache catching up delivers the events the stale copy hid: another pass follows.
      if (proc.lag) this.#schedule(which, key, this.clock.now());
      proc.lag = undefined;
      proc.armKill(0);
    }
    const wrote = this.world.writes.slice(before);
    const events = proc.recorder.events.slice(eventsBefore).filter((e) => e.type === "Warning")
      .map((e) => `${e.reason}: ${e.message}`);
    await this.#refresh();
    this.trace.push(
      `${which === "set" ? "CocoonSet" : "CocoonHibernation"} ${key.ns}/${key.name} pass` +
        `${note}: ${result}${wrote.length ? `; wrote: ${wrote.join("; ")}` : ""}` +
        (events.length ? `; Warning ${events.join("; ")}` : ""),
    );
    return wrote.length;
  }

  /** One random user action. */
  async userAction(): Promise<void> {
    const s = this.rng.pick(this.sets);
    const set = await this.#getSet(s);
    const action = this.rng.weighted({
      suspend: 20,
      unsuspend: 16,
      migrate: 14,
      createCR: 16,
      deleteCR: 10,
      flipCR: 10,
      deletePod: 8,
      deleteSet: this.sets.length > 1 ? 8 : 3,
      stealNames: this.sets.length > 1 ? 10 : 0,
    });
    if (!set || set.metadata.deletionTimestamp) return;
    const text = await this.#applyUser(action, s, set);
    if (text) this.trace.push(`USER ${text}`);
  }

  async #applyUser(action: string, s: SetRef, set: CocoonSet): Promise<string | undefined> {
    switch (action) {
      case "suspend": {
        const policy = this.rng.pick(["retain", "release"] as const);
        await this.#patchSpec(s, { suspend: true, hibernatePolicy: policy });
        return `suspend ${setText(s)} (policy ${policy})`;
      }
      case "unsuspend":
        await this.#patchSpec(s, { suspend: false });
        return `unsuspend ${setText(s)}`;
      case "migrate": {
        const node = this.rng.pick(["node-a", "node-b", null]);
        await this.#patchSpec(s, { nodeName: node });
        return `set ${setText(s)} spec.nodeName=${node ?? "(none)"}`;
      }
      case "createCR": {
        const desire = this.rng.pick(["Hibernate", "Wake"] as const);
        const name = `h-${++this.#hibCount}`;
        const hib: CocoonHibernation = {
          apiVersion: "cocoonset.cocoonstack.io/v1",
          kind: "CocoonHibernation",
          metadata: { name, namespace: s.ns },
          spec: { podRef: { name: `${s.name}-0` }, desire },
        };
        await this.fake.create(CocoonHibernations, hib);
        this.hibKeys.push({ ns: s.ns, name });
        return `create CocoonHibernation ${s.ns}/${name} ${desire} ${s.name}-0`;
      }
      case "deleteCR": {
        const live = this.hibKeys.filter((k) => this.#find(CocoonHibernations, k.ns, k.name));
        if (live.length === 0) return undefined;
        const k = this.rng.pick(live);
        await this.fake.delete(CocoonHibernations, k.ns, k.name);
        return `delete CocoonHibernation ${k.ns}/${k.name}`;
      }
      case "flipCR": {
        const live = this.hibKeys.map((k) => this.#find(CocoonHibernations, k.ns, k.name))
          .filter((h): h is CocoonHibernation => h !== undefined && !h.metadata.deletionTimestamp);
        if (live.length === 0) return undefined;
        const h = this.rng.pick(live);
        const desire = h.spec.desire === "Hibernate" ? "Wake" : "Hibernate";
        await this.fake.patch(
          CocoonHibernations,
          h.metadata.namespace ?? "",
          h.metadata.name ?? "",
          "merge",
          {
            spec: { desire },
          },
        );
        return `CocoonHibernation ${h.metadata.namespace}/${h.metadata.name} desire ${desire}`;
      }
      case "deletePod": {
        const pod = this.#find(Pods, s.ns, `${s.name}-0`) as Pod | undefined;
        if (!pod || pod.metadata.deletionTimestamp) return undefined;
        this.vk.noteUserDelete(pod);
        await this.fake.delete(Pods, s.ns, `${s.name}-0`);
        return `delete pod ${s.ns}/${s.name}-0 (its VM state is the user's to lose)`;
      }
      case "deleteSet":
        this.vk.noteReleased(s.vm);
        await this.fake.delete(CocoonSets, s.ns, s.name);
        return `delete CocoonSet ${setText(s)}`;
      case "stealNames": {
        const other = this.sets.find((o) => o !== s)!;
        const names = [set.metadata.annotations?.[ANNOTATION_DELETE_VM_NAMES], other.vm]
          .filter(Boolean).join(",");
        await this.fake.patch(CocoonSets, s.ns, s.name, "merge", {
          metadata: { annotations: { [ANNOTATION_DELETE_VM_NAMES]: names } },
        });
        return `annotate ${
          setText(s)
        } ${ANNOTATION_DELETE_VM_NAMES}=${names} (another tenant's VM)`;
      }
    }
    return undefined;
  }

  async #patchSpec(s: SetRef, spec: Record<string, unknown>): Promise<void> {
    await this.fake.patch(CocoonSets, s.ns, s.name, "merge", { spec });
  }

  /**
   * The quiet part: rounds in which every reconcile the controller would run now (a requeue that
   * is due, or an event it watches) runs once, in an order drawn from the seed, with vk-cocoon
   * working until idle somewhere in between; a busy round moves the clock 1 s, an idle one jumps
   * to the next requeue (or a minute when nothing is scheduled). Returns the round that found
   * the world idle and steady, or undefined. With judge, a failure to converge is recorded as a
   * violation: a hot loop (writes in every recent round, with their rate per 5 s requeue
   * interval) or a world stuck in an unsteady state.
   */
  async quiet(rounds: number, judge: boolean): Promise<number | undefined> {
    const writesPerRound: { at: number; writes: number }[] = [];
    for (let round = 1; round <= rounds; round++) {
      let writes = 0;
      let vkMoves = 0;
      const due = [
        ...this.sets.filter((k) => this.#isDue("set", k)).map((k) => ["set", k] as const),
        ...this.hibKeys.filter((k) => this.#isDue("hib", k)).map((k) => ["hib", k] as const),
      ];
      const actors: (() => Promise<void>)[] = due.map(([which, k]) => async () => {
        writes += await this.pass(which, k, false);
      });
      actors.push(async () => {
        while (vkMoves < 30 && await this.vk.step()) vkMoves++;
        await this.#refresh();
      });
      for (const actor of this.rng.shuffle(actors)) await actor();
      if (this.violations.length > 0) return undefined;
      writesPerRound.push({ at: this.clock.now(), writes });
      if (due.length === 0 && vkMoves === 0) {
        const why = this.#unsteady();
        if (why === undefined) return round;
        const next = Math.min(...this.#due.values());
        if (!Number.isFinite(next)) {
          // Nothing is scheduled and nothing moves: no event or requeue will ever come.
          if (judge) {
            this.world.violations.push({
              kind: "no convergence (stalled)",
              vm: "",
              what: `nothing left to trigger a reconcile, world not steady: ${why}`,
            });
          }
          return undefined;
        }
        const jump = Math.max(next - this.clock.now(), 1_000);
        this.clock.advance(jump);
        this.trace.push(`quiet round ${round}: idle, not steady (${why}); clock +${jump} ms`);
      } else {
        this.clock.advance(1_000);
      }
    }
    if (judge) {
      const recent = writesPerRound.slice(-20);
      const busy = recent.every((r) => r.writes > 0);
      const total = recent.reduce((n, r) => n + r.writes, 0);
      const spanMs = Math.max(recent[recent.length - 1].at - recent[0].at, 1);
      const per = (total * REQUEUE_MS / spanMs).toFixed(1);
      const lastWrites = this.world.writes.slice(-4).join("; ");
      this.world.violations.push({
        kind: busy ? "hot loop" : "no convergence",
        vm: "",
        what: busy
          ? `still writing after ${rounds} quiet rounds: ${per} writes per 5 s requeue ` +
            `interval; last writes: ${lastWrites}; world: ${this.#steadyText()}`
          : `not steady after ${rounds} quiet rounds: ${this.#steadyText()}`,
      });
    }
    return undefined;
  }

  #steadyText(): string {
    return this.#unsteady() ?? "steady";
  }

  /** Why the world is not steady yet, or undefined when it is. */
  #unsteady(): string | undefined {
    const pods = (this.view.get(Pods) ?? []) as Pod[];
    for (const pod of pods) {
      if (pod.metadata.deletionTimestamp) return `pod ${pod.metadata.name} still terminating`;
    }
    const hibs = (this.view.get(CocoonHibernations) ?? []) as CocoonHibernation[];
    for (const s of this.sets) {
      const set = this.#find(CocoonSets, s.ns, s.name) as CocoonSet | undefined;
      if (!set) continue;
      if (set.metadata.deletionTimestamp) return `${setText(s)} teardown not finished`;
      const phase = set.status?.phase ?? "";
      const main = pods.find((p) =>
        p.metadata.namespace === s.ns && p.metadata.name === `${s.name}-0`
      );
      const heldByRequest = hibs.some((h) =>
        h.metadata.namespace === s.ns && h.spec.podRef.name === `${s.name}-0` &&
        !h.metadata.deletionTimestamp && h.spec.desire === "Hibernate"
      );
      // A set that lost to a request (or the other way round), or lost its VM name to another
      // namespace (suspended or not: it has no VM to suspend), says so in a condition.
      if (set.status?.conditions?.some((c) => /Conflict|Precedence|HeldBy/i.test(c.reason ?? ""))) {
        continue;
      }
      if (set.spec.suspend) {
        if (phase === "Suspended") continue;
        if (phase === "Suspending" && this.mode === "head" && main && this.#parked(main)) {
          // The VM is down and its snapshot pushed, but vk-cocoon HEAD never writes the
          // lifecycle pair the suspend gate waits for (a contract gap, counted, not judged).
          this.contractGaps++;
          continue;
        }
        return `${setText(s)} suspended but phase ${phase || "(none)"}${this.#mainText(main)}`;
      }
      if (phase === "Running" && main && vmUp(main)) continue;
      if (heldByRequest && ["Running", "Pending", "Suspended"].includes(phase)) continue;
      return `${setText(s)} phase ${phase || "(none)"}${this.#mainText(main)}`;
    }
    for (const h of hibs) {
      if (h.metadata.deletionTimestamp) return `CocoonHibernation ${h.metadata.name} deleting`;
      const phase = h.status?.phase ?? "";
      // A refused request (it lost to an earlier request or to the set) rests in Failed, or
      // in its phase with a condition naming what it yields to.
      if (phase === "Failed" || phase === "Pending") continue;
      if (
        h.status?.conditions?.some((c) =>
          c.status === "True" && /Blocked|Conflict|Yield|Precedence/i.test(`${c.type} ${c.reason}`)
        )
      ) continue;
      if (h.spec.desire === "Wake" && phase === "Active") continue;
      if (h.spec.desire === "Hibernate" && phase === "Hibernated") continue;
      const pod = pods.find((p) =>
        p.metadata.namespace === h.metadata.namespace && p.metadata.name === h.spec.podRef.name
      );
      // Its pod gone (a release suspend), a Wake keeps Hibernated or Waking until the set brings
      // the pod back, so that the pod is restored from the snapshot (hibernation/status.ts pending).
      if (!pod && (phase === "Hibernated" || phase === "Waking")) continue;
      if (
        h.spec.desire === "Hibernate" && phase === "Hibernating" && this.mode === "head" &&
        pod && this.#parked(pod)
      ) {
        this.contractGaps++;
        continue;
      }
      return `CocoonHibernation ${h.metadata.name} (${h.spec.desire}) phase ${phase || "(none)"}`;
    }
    return undefined;
  }

  /** The pod's VM is down with its `:hibernate` pushed (what vk-cocoon HEAD can show). */
  #parked(pod: Pod): boolean {
    const vm = parseVMSpec(pod).vmName;
    return readHibernateState(pod) && !vmUp(pod) &&
      this.vk.tagHolds(vm, HIBERNATE_SNAPSHOT_TAG) !== undefined;
  }

  #mainText(main: Pod | undefined): string {
    if (!main) return ", no main pod";
    const flags = [
      readHibernateState(main) ? "hibernate" : "",
      readRestoreFromHibernate(main) ? "restore" : "",
      vmUp(main) ? "VM up" : "VM down",
      main.spec?.nodeName ? `on ${main.spec.nodeName}` : "unbound",
    ].filter(Boolean);
    return `, main ${flags.join(" ")}`;
  }

  /**
   * Who expects vm's state back (see the module doc), described with what the store shows; or
   * undefined when the owning set is gone or being deleted.
   */
  claimant(vm: string): string | undefined {
    // Two sets of a colliding name: the one whose pod booted the VM holds its state (the other
    // never ran it); before any boot there is no state to claim, so either will do.
    const owners = this.sets.filter((r) => r.vm === vm);
    const booted = this.vk?.bootedBy(vm);
    const s = owners.find((r) => `${r.ns}/${r.name}-0` === booted) ?? owners[0];
    if (!s) return undefined;
    const set = this.#find(CocoonSets, s.ns, s.name) as CocoonSet | undefined;
    if (!set || set.metadata.deletionTimestamp) return undefined;
    const parts = [
      `set ${setText(s)} phase=${set.status?.phase ?? ""}`,
      `suspend=${set.spec.suspend ?? false}/${set.spec.hibernatePolicy ?? "retain"}`,
    ];
    if (set.spec.nodeName) parts.push(`nodeName=${set.spec.nodeName}`);
    const hint = set.metadata.annotations?.[ANNOTATION_HIBERNATED_ON_NODE];
    if (hint) parts.push(`hint=${hint}`);
    const main = ((this.view.get(Pods) ?? []) as Pod[]).find((p) =>
      p.metadata.namespace === s.ns && p.metadata.labels?.[LABEL_COCOON_SET] === s.name
    );
    parts.push(main ? `main${this.#mainText(main).slice(", main".length)}` : "no main pod");
    for (const h of (this.view.get(CocoonHibernations) ?? []) as CocoonHibernation[]) {
      if (h.metadata.namespace !== s.ns || h.spec.podRef.name !== `${s.name}-0`) continue;
      parts.push(
        `CR ${h.metadata.name} ${h.spec.desire}/${h.status?.phase ?? ""}` +
          (h.metadata.deletionTimestamp ? " deleting" : ""),
      );
    }
    return parts.join(", ");
  }

  /** A pass with fresh reads ran: the VM it is about has been seen as its pod shows it. */
  #noteSeen(which: "set" | "hib", key: { ns: string; name: string }): void {
    if (which === "set") {
      for (const s of this.sets) if (s.ns === key.ns && s.name === key.name) this.vk.noteSeen(s.vm);
      return;
    }
    const h = this.#find(CocoonHibernations, key.ns, key.name) as CocoonHibernation | undefined;
    if (h) this.vk.noteSeen(vmNameForPod(key.ns, h.spec.podRef.name));
  }

  /** Whether the set owning vm is in its suspend (asked, or phase Suspending or Suspended). */
  #suspending(vm: string): boolean {
    return this.sets.some((s) => {
      if (s.vm !== vm) return false;
      const set = this.#find(CocoonSets, s.ns, s.name) as CocoonSet | undefined;
      return set !== undefined &&
        (set.spec.suspend === true ||
          ["Suspending", "Suspended"].includes(set.status?.phase ?? ""));
    });
  }

  #find(rt: typeof Pods | typeof CocoonSets | typeof CocoonHibernations, ns: string, name: string) {
    return this.view.get(rt)?.find((o) => o.metadata.namespace === ns && o.metadata.name === name);
  }

  async #getSet(s: SetRef): Promise<CocoonSet | undefined> {
    try {
      return await this.fake.get(CocoonSets, s.ns, s.name);
    } catch {
      return undefined;
    }
  }

  async #refresh(): Promise<void> {
    const before = this.view;
    this.view = await copyStore(this.fake);
    for (const s of this.sets) {
      const set = this.#find(CocoonSets, s.ns, s.name) as CocoonSet | undefined;
      if (set?.status?.phase === "Suspended") this.vk.noteSuspended(s.vm);
    }
    this.history.push(this.view);
    if (this.history.length > 6) this.history.shift();
    this.#flushVkLog();
    this.#trigger(before, this.view);
  }

  /**
   * The watch events between two copies of the store, as the controllers would hear them: a
   * CocoonSet on its creation, deletion and generation change, and on its own pods' changes
   * that the pod predicate lets through; a CocoonHibernation on any change of itself and of
   * its target pod.
   */
  #trigger(before: StoreCopy, after: StoreCopy): void {
    const now = this.clock.now();
    const changed = <T extends KubeObject>(rt: ResourceType<T>) => {
      const old = new Map((before.get(rt) ?? []).map((o) => [objectKey(o), o as T]));
      const out: { old?: T; cur?: T }[] = [];
      for (const o of (after.get(rt) ?? []) as T[]) {
        const prev = old.get(objectKey(o));
        old.delete(objectKey(o));
        if (prev?.metadata.resourceVersion !== o.metadata.resourceVersion) {
          out.push({ old: prev, cur: o });
        }
      }
      for (const prev of old.values()) out.push({ old: prev });
      return out;
    };
    for (const { old, cur } of changed(CocoonSets)) {
      const obj = (cur ?? old)!;
      if (!old || !cur || old.metadata.generation !== cur.metadata.generation) {
        this.#schedule("set", refOf(obj), now);
      }
    }
    for (const { old, cur } of changed(Pods)) {
      const pod = (cur ?? old)!;
      const owner = pod.metadata.labels?.[LABEL_COCOON_SET];
      const relevant = !old || !cur || this.#podPredicate.update(old, cur);
      if (owner && relevant) {
        this.#schedule("set", { ns: pod.metadata.namespace ?? "", name: owner }, now);
      }
      for (const k of this.hibKeys) {
        const h = this.#find(CocoonHibernations, k.ns, k.name) as CocoonHibernation | undefined;
        if (h && k.ns === pod.metadata.namespace && h.spec.podRef.name === pod.metadata.name) {
          this.#schedule("hib", k, now);
        }
      }
    }
    for (const { old, cur } of changed(CocoonHibernations)) {
      this.#schedule("hib", refOf((cur ?? old)!), now);
    }
  }

  #flushVkLog(): void {
    const log = this.vk.log;
    for (; this.#vkLogSeen < log.length; this.#vkLogSeen++) this.trace.push(log[this.#vkLogSeen]);
  }
}

/** The fake clock's start. */
const T0 = Date.parse("2026-05-01T00:00:00Z");

function keyId(which: "set" | "hib", key: { ns: string; name: string }): string {
  return `${which} ${key.ns}/${key.name}`;
}

function objectKey(o: KubeObject): string {
  return `${o.metadata.namespace}/${o.metadata.name}`;
}

function refOf(o: KubeObject): { ns: string; name: string } {
  return { ns: o.metadata.namespace ?? "", name: o.metadata.name ?? "" };
}

function ref(ns: string, name: string): SetRef {
  return { ns, name, vm: vmNameForDeployment(ns, name, 0) };
}

function setText(s: SetRef): string {
  return `${s.ns}/${s.name}`;
}

/** A CocoonSet with a main only, as a user would create it. */
function newSet(s: SetRef): CocoonSet {
  return {
    apiVersion: "cocoonset.cocoonstack.io/v1",
    kind: "CocoonSet",
    metadata: { name: s.name, namespace: s.ns },
    spec: { agent: { image: "ghcr.io/cocoonstack/cocoon/ubuntu:24.04" } },
  };
}
