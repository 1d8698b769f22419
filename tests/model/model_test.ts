/**
 * The model-based test of snapshot safety: both reconcilers against the fake API with a model of
 * vk-cocoon (as its HEAD runs, without lifecycle annotations, and one that writes them), random
 * interleavings of passes, random cache lag, random user actions and random crash points, all
 * drawn from one seed. See _world.ts for what a run does and checks.
 *
 * Knobs (environment, or arguments after `--`):
 *
 * - `MODEL_SEEDS=n` / `--seeds n`: how many seeds (default 2000), from `MODEL_SEED_BASE`
 *   (default 1) on;
 * - `MODEL_SEED=n` / `--seed n`: replay that one seed and print its whole step trace;
 * - `MODEL_VK=head|contract`: force the vk-cocoon mode (default: drawn from the seed);
 * - `MODEL_SHAPE=one|two|collide`: force one set, two sets in two namespaces, or two whose VM
 *   names collide (default: drawn from the seed).
 *
 * A failure prints every finding grouped by kind with example seeds, and the step trace of the
 * first failing seed; `MODEL_SEED=<seed>` replays it exactly.
 *
 * @module
 */
import { parseArgs } from "node:util";
import { ModelRun, type RunOutcome } from "./_world.ts";
import type { VkMode } from "./_vk_model.ts";

const args = parseArgs({
  args: Deno.args,
  options: { seeds: { type: "string" }, seed: { type: "string" } },
  strict: false,
}).values;

function env(name: string): string | undefined {
  try {
    return Deno.env.get(name);
  } catch {
    return undefined;
  }
}

function intKnob(arg: unknown, envName: string): number | undefined {
  const raw = typeof arg === "string" ? arg : env(envName);
  if (raw === undefined || raw === "") return undefined;
  const n = Number(raw);
  if (!Number.isInteger(n) || n < 0) throw new Error(`${envName}: not a whole number: ${raw}`);
  return n;
}

const single = intKnob(args.seed, "MODEL_SEED");
const count = intKnob(args.seeds, "MODEL_SEEDS") ?? 2000;
const base = intKnob(undefined, "MODEL_SEED_BASE") ?? 1;
const modeKnob = env("MODEL_VK");
if (modeKnob !== undefined && modeKnob !== "head" && modeKnob !== "contract") {
  throw new Error(`MODEL_VK: want head or contract, got ${modeKnob}`);
}
const mode = modeKnob as VkMode | undefined;
const shapeKnob = env("MODEL_SHAPE");
if (shapeKnob !== undefined && !["one", "two", "collide"].includes(shapeKnob)) {
  throw new Error(`MODEL_SHAPE: want one, two or collide, got ${shapeKnob}`);
}
const shape = shapeKnob as "one" | "two" | "collide" | undefined;

/** Runs the seeds and returns the outcomes. */
async function runSeeds(seeds: number[]): Promise<RunOutcome[]> {
  const out: RunOutcome[] = [];
  for (const seed of seeds) {
    const run = new ModelRun(seed, { mode, shape });
    try {
      out.push(await run.run());
    } catch (err) {
      // A model that breaks is reported with its seed like any finding, never as a bare throw.
      out.push({
        seed,
        mode: run.mode,
        violations: [{ kind: "model error", vm: "", what: String((err as Error).stack ?? err) }],
        trace: run.trace,
        writes: 0,
        kills: 0,
        staleReads: 0,
        contractGaps: 0,
        suspendLeftoverRestores: 0,
        unseenReturnRestores: 0,
      });
    }
  }
  return out;
}

/**
 * The situation a finding arose in, read from its claimant text (what the store showed), so the
 * summary separates, say, a tag lost in a migration's gap from one lost by a released seat.
 */
export function situation(what: string): string {
  const tags: string[] = [];
  if (/phase=Migrating|nodeName=/.test(what)) tags.push("migration");
  if (/suspend=true\/release/.test(what)) tags.push("release suspend");
  else if (/suspend=true/.test(what)) tags.push("retain suspend");
  if (/no main pod/.test(what)) tags.push("no pod");
  if (/hint=/.test(what)) tags.push("node hint");
  if (/CR [^,]* Wake\/Active/.test(what)) tags.push("finished Wake request");
  else if (/CR [^,]* Wake/.test(what)) tags.push("Wake request");
  if (/CR [^,]* Hibernate\//.test(what)) tags.push("Hibernate request");
  if (/deleting/.test(what)) tags.push("request deleted");
  if (/annotate .*delete-vm-names|another tenant/.test(what)) tags.push("tenancy");
  const stuck = what.match(/not steady[^:]*: (\S+ \S+)[^,]*?phase (\S+)/);
  if (stuck) {
    tags.push(`${stuck[1].startsWith("CocoonHibernation") ? "request" : "set"} stuck ${stuck[2]}`);
  }
  if (/nothing left to trigger/.test(what)) tags.push("stalled");
  return tags.join(", ") || "plain";
}

/** The findings grouped by kind and situation, with example seeds and one message each. */
export function summarize(outcomes: readonly RunOutcome[]): string {
  const groups = new Map<string, RunOutcome[]>();
  for (const o of outcomes) {
    const v = o.violations[0];
    if (!v) continue;
    const key = `${v.kind} [${situation(v.what)}]`;
    groups.set(key, [...groups.get(key) ?? [], o]);
  }
  const lines: string[] = [];
  for (const [key, runs] of [...groups].sort((a, b) => b[1].length - a[1].length)) {
    const modes = new Set(runs.map((r) => r.mode));
    lines.push(
      `${key}: ${runs.length} seed(s), vk ${[...modes].sort().join("+")}, e.g. ` +
        runs.slice(0, 5).map((r) => r.seed).join(", "),
    );
    lines.push(`    ${runs[0].violations[0].what}`);
  }
  return lines.join("\n");
}

/** The last lines of a trace (a hot loop repeats itself). */
function tail(trace: readonly string[], lines = 120): string {
  if (trace.length <= lines) return trace.join("\n");
  return [`... ${trace.length - lines} earlier lines (MODEL_SEED replays them all)`]
    .concat(trace.slice(-lines)).join("\n");
}

Deno.test(`model: snapshot safety, ${single !== undefined ? `seed ${single}` : `${count} seeds`}`, async () => {
  const seeds = single !== undefined ? [single] : Array.from({ length: count }, (_, i) => base + i);
  const outcomes = await runSeeds(seeds);
  const failed = outcomes.filter((o) => o.violations.length > 0);
  const stats = {
    seeds: outcomes.length,
    failed: failed.length,
    writes: outcomes.reduce((n, o) => n + o.writes, 0),
    kills: outcomes.reduce((n, o) => n + o.kills, 0),
    staleReads: outcomes.reduce((n, o) => n + o.staleReads, 0),
    contractGaps: outcomes.filter((o) => o.contractGaps > 0).length,
    suspendLeftoverRestores: outcomes.filter((o) => o.suspendLeftoverRestores > 0).length,
    unseenReturnRestores: outcomes.filter((o) => o.unseenReturnRestores > 0).length,
  };
  console.log(`model: ${JSON.stringify(stats)}`);
  if (single !== undefined) console.log(outcomes[0].trace.join("\n"));
  if (failed.length === 0) return;
  const first = failed[0];
  throw new Error(
    `${failed.length} of ${outcomes.length} seeds broke an invariant:\n${summarize(outcomes)}\n\n` +
      `trace of seed ${first.seed} (replay: MODEL_SEED=${first.seed}):\n` +
      `${tail(first.trace)}\n!! ${first.violations.map((v) => v.what).join("\n!! ")}`,
  );
});
