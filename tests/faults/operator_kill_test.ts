/**
 * SIGKILL of the operator at random points of every flow, on real processes: each round walks
 * one retain-policy set (with sub-agents and a toolbox) through create, scale-up, suspend,
 * resume, migration, a CocoonHibernation hibernate and wake, and delete, and one release-policy
 * set through create, suspend (seat released), wake and delete. In every phase the operator's
 * main.ts process is SIGKILLed at a seeded random moment after the phase's trigger (sometimes a
 * second time while it recovers) and restarted; the phase must still reach its end state.
 *
 * Watched for the whole run: no two live pods for one slot, no two VMs for one name, no
 * `:hibernate` snapshot deleted while its VM still needs it (with the VM's timeline when it
 * fails), and after each delete no pod and no registry tag left (snapshot policy `never`).
 *
 * `FAULT_SEED=<n>` replays a run's kill plan; the seed is in the figure and in every failure.
 * Figure: kills, how many landed while the phase was still in flight, restart and convergence
 * times, and the watch's counts.
 */
import assert from "node:assert/strict";
import {
  type CocoonHibernation,
  CocoonHibernations,
  type CocoonSet,
  CocoonSets,
} from "../../common/apis/v1/mod.ts";
import { type Pod, Pods } from "../../kube/core.ts";
import type { Stack } from "../harness/stack.ts";
import { waitUntil } from "../harness/wait.ts";
import {
  createSet,
  getSet,
  inPhase,
  patchSpec,
  podsOf,
  vmOf,
  waitGone,
} from "../harness/stack_objects.ts";
import {
  faultSeed,
  faultSuite,
  type Figure,
  killAndRestart,
  seededRandom,
  type SystemWatch,
  watchSystem,
} from "./_support.ts";

const ROUNDS = 3;
const CONVERGE_MS = 120_000;
const TOOLS_IMAGE = "ghcr.io/cocoonstack/cocoon/toolbox:1";
/** Chance of a second kill while the operator recovers from the first. */
const SECOND_KILL = 0.3;

/**
 * One phase: what starts it, when it is done, and the window its kill is drawn from (about the
 * phase's own length with the latencies below, so most kills land while it is in flight).
 */
interface Phase {
  name: string;
  /** Kill offsets are drawn from [0, windowMs) after the trigger. */
  windowMs: number;
  trigger(): Promise<void>;
  /** Resolves to true once the phase has reached its end state. */
  done(): Promise<boolean>;
}

/** A planned kill: offset after the phase trigger, and an optional second one after the restart. */
interface Kill {
  round: number;
  phase: string;
  offsetMs: number;
  secondOffsetMs?: number;
}

/** Running for this generation with the given agents and toolboxes ready. */
function settled(cs: CocoonSet, agents: number, toolboxes: number): boolean {
  return inPhase("Running")(cs) && cs.status?.readyAgents === agents &&
    cs.status.desiredAgents === agents && cs.status.readyToolboxes === toolboxes &&
    cs.status.desiredToolboxes === toolboxes;
}

async function podOrUndefined(stack: Stack, ns: string, name: string): Promise<Pod | undefined> {
  try {
    return await stack.admin.get(Pods, ns, name);
  } catch {
    return undefined;
  }
}

/** Whether the simulator runs the pod's VM (its own view, not the pod's annotations). */
async function vmRunning(stack: Stack, ns: string, pod: string): Promise<boolean> {
  const vm = await stack.sim.vm(ns, pod);
  return vm?.phase === "running" && vm.alive;
}

async function hibernation(stack: Stack, ns: string, name: string): Promise<CocoonHibernation> {
  return await stack.admin.get(CocoonHibernations, ns, name);
}

/** The phases of one round in namespace ns (set "k": retain, set "r": release). */
function roundPhases(stack: Stack, watch: SystemWatch, ns: string): Phase[] {
  let k: CocoonSet | undefined;
  let r: CocoonSet | undefined;
  let target = "";
  const kVms = [0, 1, 2, 3, 4, "tb"].map((m) => vmOf(ns, "k", m));
  const rVms = [vmOf(ns, "r", 0)];
  const setIs = (cs: () => CocoonSet | undefined, ok: (cs: CocoonSet) => boolean) => async () =>
    ok(await getSet(stack, cs()!));
  const hibIs = (phase: string) => async () =>
    (await hibernation(stack, ns, "hib")).status?.phase === phase;
  const deleted = (cs: () => CocoonSet | undefined) => async () => {
    const exists = await getSet(stack, cs()!).then(() => true, () => false);
    if (exists) return false;
    return (await podsOf(stack, cs()!)).length === 0;
  };
  const assertNoTags = async (vms: string[]) => {
    for (const vm of vms) assert.deepEqual(await stack.tagsOf(vm), [], `no tag of ${vm} is left`);
  };

  return [
    {
      name: "create (main, sub-agent, toolbox)",
      windowMs: 1_000,
      trigger: async () => {
        k = await createSet(stack, ns, "k", {
          snapshotPolicy: "never",
          agent: { replicas: 1 },
          toolboxes: [{ name: "tb", image: TOOLS_IMAGE }],
        });
      },
      done: setIs(() => k, (cs) => settled(cs, 2, 1)),
    },
    {
      name: "scale-up 1 → 4",
      windowMs: 1_000,
      trigger: async () => {
        k = await patchSpec(stack, k!, { agent: { replicas: 4 } });
      },
      done: setIs(() => k, (cs) => settled(cs, 5, 1)),
    },
    {
      name: "suspend (retain)",
      windowMs: 1_200,
      trigger: async () => {
        k = await patchSpec(stack, k!, { suspend: true });
      },
      done: setIs(() => k, inPhase("Suspended")),
    },
    {
      name: "resume (retain)",
      windowMs: 1_000,
      trigger: async () => {
        k = await patchSpec(stack, k!, { suspend: false });
      },
      done: setIs(() => k, (cs) => settled(cs, 5, 1)),
    },
    {
      name: "migration of the main",
      windowMs: 3_000,
      trigger: async () => {
        const main = await stack.admin.get(Pods, ns, "k-0");
        target = main.spec?.nodeName === "vk-a" ? "vk-b" : "vk-a";
        k = await patchSpec(stack, k!, { nodeName: target });
      },
      done: async () => {
        const cs = await getSet(stack, k!);
        const main = await podOrUndefined(stack, ns, "k-0");
        return settled(cs, 5, 1) && main?.spec?.nodeName === target &&
          await vmRunning(stack, ns, "k-0");
      },
    },
    {
      name: "CocoonHibernation hibernate (sub-agent)",
      windowMs: 900,
      trigger: async () => {
        await stack.admin.create(CocoonHibernations, {
          apiVersion: "cocoonset.cocoonstack.io/v1",
          kind: "CocoonHibernation",
          metadata: { name: "hib", namespace: ns },
          spec: { podRef: { name: "k-1" }, desire: "Hibernate" },
        });
      },
      done: hibIs("Hibernated"),
    },
    {
      name: "CocoonHibernation wake",
      windowMs: 1_200,
      trigger: async () => {
        await stack.admin.patch(CocoonHibernations, ns, "hib", "merge", {
          spec: { desire: "Wake" },
        });
      },
      done: async () => {
        return (await hibIs("Active")()) && await vmRunning(stack, ns, "k-1");
      },
    },
    {
      name: "delete (retain set)",
      windowMs: 600,
      trigger: async () => {
        await stack.admin.delete(CocoonHibernations, ns, "hib");
        await waitGone("hib", () => hibernation(stack, ns, "hib"), CONVERGE_MS);
        watch.release(kVms);
        await stack.admin.delete(CocoonSets, ns, "k");
      },
      done: async () => {
        if (!await deleted(() => k)()) return false;
        await assertNoTags(kVms);
        return true;
      },
    },
    {
      name: "create (release policy)",
      windowMs: 700,
      trigger: async () => {
        r = await createSet(stack, ns, "r", {
          snapshotPolicy: "never",
          hibernatePolicy: "release",
        });
      },
      done: setIs(() => r, (cs) => settled(cs, 1, 0)),
    },
    {
      name: "suspend (release: seat given back)",
      windowMs: 1_000,
      trigger: async () => {
        r = await patchSpec(stack, r!, { suspend: true });
      },
      done: async () =>
        inPhase("Suspended")(await getSet(stack, r!)) && (await podsOf(stack, r!)).length === 0,
    },
    {
      name: "wake (release: restored from the snapshot)",
      windowMs: 1_000,
      trigger: async () => {
        r = await patchSpec(stack, r!, { suspend: false });
      },
      done: async () => {
        const cs = await getSet(stack, r!);
        return settled(cs, 1, 0) && (await stack.tagsOf(rVms[0])).length === 0;
      },
    },
    {
      name: "delete (release set)",
      windowMs: 400,
      trigger: async () => {
        watch.release(rVms);
        await stack.admin.delete(CocoonSets, ns, "r");
      },
      done: async () => {
        if (!await deleted(() => r)()) return false;
        await assertNoTags(rVms);
        return true;
      },
    },
  ];
}

/**
 * Sleeps ms: places a fault at a chosen moment (not a synchronisation). A moment already past
 * (the trigger took longer than the offset) fires at once.
 */
function pause(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, Math.max(0, ms)));
}

faultSuite("operator SIGKILL at random points", {
  nodes: [{ name: "vk-a", seats: 16 }, { name: "vk-b", seats: 16 }],
  // Slower VMs widen each flow, so kills land inside them rather than after.
  latencies: { bootMs: 400, wakeMs: 400, hibernateMs: 600, deleteMs: 300 },
}, async (stack, scenario) => {
  await scenario(
    "SIGKILL across scale-up, suspend (both policies), migration, hibernation and delete",
    async (fig: Figure) => {
      const seed = faultSeed();
      fig.seed = seed;
      const random = seededRandom(seed);
      const watch = await watchSystem(stack);
      const kills: (Kill & { inFlight: boolean; restartMs: number; convergeMs: number })[] = [];
      try {
        for (let round = 0; round < ROUNDS; round++) {
          const ns = `faults-kill-${round}`;
          for (const phase of roundPhases(stack, watch, ns)) {
            const plan: Kill = {
              round,
              phase: phase.name,
              offsetMs: Math.floor(random() * phase.windowMs),
              secondOffsetMs: random() < SECOND_KILL
                ? Math.floor(random() * phase.windowMs)
                : undefined,
            };
            const what = `round ${round} ${phase.name} (FAULT_SEED=${seed})`;
            watch.notes.push({ at: Date.now(), text: `test: ${phase.name}` });
            const triggered = Date.now();
            await phase.trigger();
            await pause(plan.offsetMs - (Date.now() - triggered));
            const inFlight = !await phase.done().catch(() => false);
            const first = await killAndRestart(stack, 0);
            watch.notes.push({ at: first.at, text: `operator SIGKILLed (${phase.name})` });
            let restartMs = first.restartMs;
            if (plan.secondOffsetMs !== undefined) {
              await pause(plan.secondOffsetMs);
              const second = await killAndRestart(stack, 0);
              watch.notes.push({ at: second.at, text: `operator SIGKILLed again (${phase.name})` });
              restartMs += second.restartMs;
            }
            const restarted = Date.now();
            try {
              await waitUntil(() => phase.done(), {
                what: `${what} to finish after the kill`,
                timeoutMs: CONVERGE_MS,
                intervalMs: 200,
              });
            } catch (err) {
              throw new Error(
                `${(err as Error).message}\nkill plan so far: ${JSON.stringify(kills)}`,
              );
            }
            kills.push({ ...plan, inFlight, restartMs, convergeMs: Date.now() - restarted });
          }
        }
        const count = kills.reduce((n, k) => n + (k.secondOffsetMs === undefined ? 1 : 2), 0);
        fig.kills = count;
        fig.killsInFlight = kills.filter((k) => k.inFlight).length;
        fig.phases = kills.length;
        fig.maxRestartMs = Math.max(...kills.map((k) => k.restartMs));
        fig.maxConvergeMs = Math.max(...kills.map((k) => k.convergeMs));
        fig.plan = kills.map((k) =>
          `${k.round}:${k.phase}@${k.offsetMs}${
            k.secondOffsetMs === undefined ? "" : `+${k.secondOffsetMs}`
          }` +
          `${k.inFlight ? "" : "(at rest)"}`
        );
        assert.ok(count >= 20, `at least 20 kills (got ${count})`);
        await watch.judge(fig);
      } catch (err) {
        throw new Error(`FAULT_SEED=${seed}: ${(err as Error).message}`, { cause: err });
      } finally {
        await watch.stop();
      }
    },
  );
});
