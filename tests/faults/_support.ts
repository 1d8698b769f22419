/**
 * What the fault suites share: the test wrapper (one stack per file, each scenario a step that
 * prints its figure as one JSON line whether it passes or fails), the seeded random source
 * (`FAULT_SEED=<n>` replays a run), the operator kill (SIGKILL of the main.ts process itself,
 * then a fresh process), and the watch every scenario keeps on the system while faults happen:
 * pods per slot (no duplicates), VMs per name (no second VM), and the registry's `:hibernate`
 * deletes against what the VMs still need. Private to tests/faults/.
 *
 * @module
 */
import assert from "node:assert/strict";
import type { CocoonSet } from "../../common/apis/v1/cocoonset_types.ts";
import {
  type CocoonHibernation,
  CocoonHibernations,
  CocoonSets,
} from "../../common/apis/v1/mod.ts";
import { type Pod, Pods } from "../../kube/core.ts";
import { errorMessage } from "../../kube/errors.ts";
import { type Stack, type StackOptions, stackTest } from "../harness/stack.ts";
import { type Observation, observe, type Observer } from "./_observer.ts";
import { SlotLedger } from "./_pod_slots.ts";
import { collectSimEvents, type SimLog } from "./_sim_log.ts";
import { judgeSnapshots, type Note } from "./_snapshot_guard.ts";
import { judgeVmUniqueness } from "./_vm_ledger.ts";

/** A scenario's figure: the numbers it measured (times in ms, counts). */
export type Figure = Record<string, unknown>;

/** Runs one named scenario as a step and prints its figure; a failed scenario stops the suite. */
export type Scenario = (name: string, fn: (fig: Figure) => Promise<void>) => Promise<void>;

/** What a suite's body may say about the health check the suite ends with. */
export interface SuiteHealth {
  /**
   * Forgives the 403s the API server has answered the operators so far, for a documented
   * reason (a restarted kube-apiserver answers 403 until its RBAC caches are filled); later
   * ones still fail the suite.
   */
  tolerateForbiddenSoFar(why: string): Promise<void>;
}

/**
 * Declares a fault suite: one stack for its scenarios, ends with every operator alive and never
 * answered 403 (but what the body tolerated), names the process logs when something fails, and
 * stops the stack in any case. Skipped (saying why) when the registry binary is missing.
 */
export function faultSuite(
  name: string,
  opts: StackOptions,
  body: (stack: Stack, scenario: Scenario, health: SuiteHealth) => Promise<void>,
): void {
  stackTest(`faults: ${name}`, opts, async (stack, t) => {
    const scenario: Scenario = async (stepName, fn) => {
      const ok = await t.step(stepName, async () => {
        const fig: Figure = {};
        const started = Date.now();
        let error: unknown;
        try {
          await fn(fig);
        } catch (err) {
          error = err;
          throw err;
        } finally {
          printFigure(stepName, fig, Date.now() - started, error);
        }
      });
      if (!ok) throw new Error(`scenario failed: ${stepName}`);
    };
    const tolerated = new Map<number, number>();
    const health: SuiteHealth = {
      async tolerateForbiddenSoFar(why) {
        for (const [i, op] of stack.operators.entries()) {
          if (!stack.alive(i)) continue;
          const n = await op.forbiddenRequests();
          if (n > 0) {
            console.error(`faults ${name}: ${n} 403s of replica ${i} tolerated: ${why}`);
          }
          tolerated.set(i, n);
        }
      },
    };
    await body(stack, scenario, health);
    await assertHealthy(stack, tolerated);
  });
}

/** stack.assertOperatorsHealthy, less the 403s a replica's current process was forgiven. */
async function assertHealthy(stack: Stack, tolerated: ReadonlyMap<number, number>): Promise<void> {
  if (tolerated.size === 0) return await stack.assertOperatorsHealthy();
  for (const [i, op] of stack.operators.entries()) {
    assert.ok(stack.alive(i), `operator replica ${i} exited:\n${op.proc.output.slice(-3000)}`);
    const n = await op.forbiddenRequests();
    assert.ok(
      n <= (tolerated.get(i) ?? 0),
      `the API server answered 403 to ${n} request(s) of replica ${i}, ` +
        `${tolerated.get(i) ?? 0} tolerated\n${op.proc.output.slice(-3000)}`,
    );
  }
}

/** One JSON line: `{"scenario", "ok", "ms", ...figure[, "error"]}`. */
function printFigure(name: string, fig: Figure, ms: number, error: unknown): void {
  const line: Figure = { scenario: name, ok: error === undefined, ms, ...fig };
  if (error !== undefined) {
    line.error = errorMessage(error).split("\n")[0];
  }
  console.log(JSON.stringify(line));
}

/** The run's seed: `FAULT_SEED` when set (to replay), else a fresh one. */
export function faultSeed(): number {
  const raw = Deno.env.get("FAULT_SEED");
  if (raw === undefined || raw === "") return crypto.getRandomValues(new Uint32Array(1))[0];
  if (!/^\d+$/.test(raw) || Number(raw) > 0xffffffff) {
    throw new Error(`FAULT_SEED: want a whole number below 2^32, got ${JSON.stringify(raw)}`);
  }
  return Number(raw);
}

/** A seeded random source in [0, 1) (mulberry32): the same seed gives the same sequence. */
export function seededRandom(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** What a kill and restart took. */
export interface KillRecord {
  /** When the signal was sent (ms since the epoch). */
  at: number;
  /** From the restart's start until the new process answered /readyz. */
  restartMs: number;
}

/**
 * SIGKILLs replica i — the `deno run … main.ts` process itself, checked through /proc before
 * the signal, not a wrapper — and waits for it to be reaped; returns when the signal was sent.
 */
export async function sigkillOperator(stack: Stack, i: number): Promise<number> {
  const op = stack.operators[i];
  const cmdline = await Deno.readTextFile(`/proc/${op.proc.pid}/cmdline`);
  assert.match(cmdline.replaceAll("\0", " "), /\bmain\.ts\b/, "the killed process runs main.ts");
  const at = Date.now();
  const status = await stack.killOperator(i, "SIGKILL");
  assert.equal(status.signal, "SIGKILL", `replica ${i} died of SIGKILL`);
  return at;
}

/** sigkillOperator, then a fresh process in its place (ready when this resolves). */
export async function killAndRestart(stack: Stack, i: number): Promise<KillRecord> {
  const at = await sigkillOperator(stack, i);
  const started = Date.now();
  await stack.restartOperator(i);
  return { at, restartMs: Date.now() - started };
}

/** One line of an operator's JSON log. */
export interface LogLine {
  at: number;
  level: string;
  message: string;
  properties: Record<string, unknown>;
}

/** The JSON log lines replica i's current process wrote at or after `since` (ms). */
export function operatorLog(stack: Stack, i: number, since = 0): LogLine[] {
  const lines: LogLine[] = [];
  for (const raw of stack.operators[i].proc.output.split("\n")) {
    if (!raw.startsWith("{")) continue;
    try {
      const rec = JSON.parse(raw) as {
        "@timestamp"?: string;
        level?: string;
        message?: string;
        properties?: Record<string, unknown>;
      };
      const at = Date.parse(rec["@timestamp"] ?? "");
      if (!(at >= since)) continue;
      lines.push({
        at,
        level: rec.level ?? "",
        message: rec.message ?? "",
        properties: rec.properties ?? {},
      });
    } catch {
      // Not a log record (a partial line, or something else on stdout).
    }
  }
  return lines;
}

/** The scenario-long watch on pods, VMs and snapshots (see the module doc). */
export interface SystemWatch {
  readonly pods: Observer<Pod>;
  readonly sets: Observer<CocoonSet>;
  readonly hibernations: Observer<CocoonHibernation>;
  readonly slots: SlotLedger;
  readonly sim: SimLog;
  /** Lines for the snapshot timeline (kills, phases). */
  readonly notes: Note[];
  /** Marks VMs whose owner the test is about to delete: their snapshots may go from now on. */
  release(vms: readonly string[]): void;
  /**
   * Writes the counts into fig, then asserts no duplicate pod, no VM name running twice and no
   * needed `:hibernate` deleted.
   */
  judge(fig: Figure): Promise<void>;
  stop(): Promise<void>;
}

/**
 * Notes every phase change of the observed objects on the timeline of the VMs named after them
 * (`vk-<ns>-<set>-…` for a set, `vk-<ns>-<pod>` for a request on a pod).
 */
function notePhases<T extends CocoonSet | CocoonHibernation>(
  notes: Note[],
  vmPrefix: (obj: T) => string,
): (o: Observation<T>) => void {
  const last = new Map<string, string>();
  return (o) => {
    const { namespace, name, uid } = o.object.metadata;
    const phase = o.type === "DELETED" ? "(deleted)" : o.object.status?.phase ?? "";
    if (last.get(uid ?? "") === phase) return;
    last.set(uid ?? "", phase);
    notes.push({
      at: o.at,
      text: `${o.object.kind} ${namespace}/${name} phase ${phase || "(none)"}`,
      vmPrefix: vmPrefix(o.object),
    });
  };
}

/** Starts watching; stop() it in a finally. */
export async function watchSystem(stack: Stack): Promise<SystemWatch> {
  const slots = new SlotLedger();
  const pods = await observe(stack.admin, Pods, { onChange: (o) => slots.observe(o) });
  const sim = await collectSimEvents(stack.sim);
  const notes: Note[] = [];
  const sets = await observe(stack.admin, CocoonSets, {
    onChange: notePhases<CocoonSet>(
      notes,
      (cs) => `vk-${cs.metadata.namespace}-${cs.metadata.name}-`,
    ),
  });
  const hibernations = await observe(stack.admin, CocoonHibernations, {
    onChange: notePhases<CocoonHibernation>(
      notes,
      (h) => `vk-${h.metadata.namespace}-${h.spec.podRef?.name}`,
    ),
  });
  const released = new Map<string, number>();
  return {
    pods,
    sets,
    hibernations,
    slots,
    sim,
    notes,
    release(vms) {
      const at = Date.now();
      for (const vm of vms) if (!released.has(vm)) released.set(vm, at);
    },
    async judge(fig) {
      await sim.sync();
      const vms = judgeVmUniqueness(sim.events);
      const snapshots = judgeSnapshots({
        prefix: stack.prefix,
        simEvents: sim.events,
        requests: stack.proxy.requests,
        released,
        notes,
      });
      Object.assign(fig, {
        podsObserved: slots.podsSeen,
        duplicatePods: slots.violations.length,
        vmStarts: vms.starts,
        duplicateVms: vms.violations.length,
        hibernateHolds: snapshots.holds,
        restoresFromHeldSnapshot: snapshots.restores,
        hibernateTagDeletes: snapshots.hibernateDeletes,
        neededTagsDeleted: snapshots.violations.length,
        watchRelists: pods.relists,
      });
      slots.assertNone();
      vms.assertNone();
      snapshots.assertNone();
    },
    async stop() {
      await Promise.all([pods.stop(), sets.stop(), hibernations.stop()]);
      await sim.stop().catch(() => {});
    },
  };
}
