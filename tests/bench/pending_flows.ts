/**
 * What a pending flow costs in API requests: every request the operator under test sends in the
 * first `windowSeconds` (75 s) after its process is spawned, start-up included, while one
 * CocoonHibernation Hibernate and one CocoonSet migration are held by their VMs (the simulator
 * delays both hibernations by 30 minutes, so each flow polls and never finishes in the window).
 * Counted from the outside by the counting API proxy (api_proxy.ts), by verb and resource, so the
 * Go original (`--operator-cmd /tmp/gobase/operator`, with its RBAC in BENCH_OPERATOR_RBAC) is
 * measured the same way. The registry requests (HEAD probes) it sent in the window are reported
 * next to them.
 *
 * The population, in namespace `bench-pending` (its VM names split three ways, as
 * `vk-bench-pending-held-0`):
 *
 * - CocoonSet `held` (a main only), whose main a CocoonHibernation `hold` asks to hibernate;
 * - CocoonSet `mover` (a main only), whose spec.nodeName is moved to the other node.
 *
 * The operator under test itself drives both flows to their held state (request Hibernating, set
 * Migrating, both VMs reporting `hibernating`), is stopped, and is started again: the window is
 * that second process's first 75 s. At the end both flows must still be held, or the figures
 * are refused (they would count a flow's completion, not its wait).
 *
 * Run alone: `deno task bench:pending [--quick] [--operator-cmd "…"]` (`--quick`: a 30 s
 * window). Prints `{ "pendingFlows": … }`.
 *
 * @module
 */
import { CocoonHibernations, CocoonSets } from "../../common/apis/v1/resources.ts";
import type { CocoonHibernation } from "../../common/apis/v1/cocoonhibernation_types.ts";
import { ANNOTATION_LIFECYCLE_STATE, readHibernateState } from "../../common/meta/mod.ts";
import { Pods } from "../../kube/core.ts";
import { realClock, sleep } from "../../kube/clock.ts";
import { ANNOTATION_SIM_HIBERNATE_DELAY_MS } from "../../sim/knobs.ts";
import { createSet, inPhase, patchSpec, waitSet } from "../harness/stack_objects.ts";
import type { ApiClient } from "../../kube/api_client.ts";
import { waitUntil } from "../harness/wait.ts";
import type { ProxiedApiRequest } from "./api_proxy.ts";
import { type BenchFlags, benchFlagsOrExit } from "./flags.ts";
import { progress } from "./load.ts";
import { startBenchSystem } from "./system.ts";

const NS = "bench-pending";
/** Long enough that neither VM finishes its hibernation during setup and window. */
const HOLD_MS = 30 * 60_000;
const HOLD_ANNOTATION = { [ANNOTATION_SIM_HIBERNATE_DELAY_MS]: String(HOLD_MS) };
const SETUP_MS = 120_000;

/** What to run. */
export interface PendingFlowsOptions {
  operatorCmd: string;
  /** The counted window after the spawn (default 75). */
  windowSeconds?: number;
}

/** The figures of one run. */
export interface PendingFlowsResult {
  operator: string;
  windowSeconds: number;
  /** Every API request in the window. */
  requests: number;
  /** Requests by "verb resource" ("list pods", "watch cocoonsets.cocoonset.cocoonstack.io"). */
  byVerbResource: Record<string, number>;
  byVerb: Record<string, number>;
  /** Answers by HTTP status ("200", "404", …). */
  byStatus: Record<string, number>;
  /** The requests of the window's last 45 s (the polls, after start-up). */
  steadyRequests: number;
  steadyByVerbResource: Record<string, number>;
  /** Registry requests in the window, by "METHOD repository". */
  registryByMethod: Record<string, number>;
  /** Every request but the watches, in order: ms after the spawn, verb, path, status. */
  nonWatch: string[];
}

function countBy<T>(items: readonly T[], key: (t: T) => string): Record<string, number> {
  const out: Record<string, number> = {};
  for (const item of items) out[key(item)] = (out[key(item)] ?? 0) + 1;
  return Object.fromEntries(Object.entries(out).sort(([a], [b]) => a.localeCompare(b)));
}

const verbResource = (r: ProxiedApiRequest) => `${r.verb} ${r.resource}`;

/** Runs the benchmark (see the module doc). */
export async function benchPendingFlows(opts: PendingFlowsOptions): Promise<PendingFlowsResult> {
  const windowMs = (opts.windowSeconds ?? 75) * 1000;
  await using system = await startBenchSystem({ operatorCmd: opts.operatorCmd });
  const { stack } = system;
  await system.startOperator();

  progress("pending flows: two sets, then a held Hibernate and a held migration");
  const held = await createSet(stack, NS, "held");
  const mover = await createSet(stack, NS, "mover");
  for (const cs of [held, mover]) await waitSet(stack, cs, "Running", inPhase("Running"));
  for (const name of ["held-0", "mover-0"]) {
    await stack.admin.patch(Pods, NS, name, "merge", {
      metadata: { annotations: HOLD_ANNOTATION },
    });
  }
  const request: CocoonHibernation = {
    apiVersion: "cocoonset.cocoonstack.io/v1",
    kind: "CocoonHibernation",
    metadata: { name: "hold", namespace: NS },
    spec: { podRef: { name: "held-0" }, desire: "Hibernate" },
  };
  await stack.admin.create(CocoonHibernations, request);
  const moverMain = await stack.admin.get(Pods, NS, "mover-0");
  const from = moverMain.spec?.nodeName ?? "";
  const to = ["vk-a", "vk-b"].find((n) => n !== from) ?? "vk-a";
  await patchSpec(stack, mover, { nodeName: to });
  await waitHeld(stack.admin, SETUP_MS);

  progress(`pending flows: restarting the operator, counting for ${windowMs / 1000} s`);
  const op = await system.startOperator({ waitReady: false });
  const t0 = op.spawnedAt;
  // The registry proxy stamps wall-clock times, the API proxy performance.now() ones.
  const wallT0 = Date.now() - (performance.now() - t0);
  await sleep(
    realClock,
    Math.max(0, t0 + windowMs - performance.now()),
    new AbortController().signal,
  );
  const inWindow = system.api.between(t0, t0 + windowMs);
  const registry = stack.proxy.requests.filter((r) => r.at >= wallT0 && r.at < wallT0 + windowMs);
  const operator = await op.describe().catch(() => opts.operatorCmd);
  // Figures of a flow that finished (or never held) are no figures of a pending flow.
  await waitHeld(stack.admin, 1);
  const steady = inWindow.filter((r) => r.at >= t0 + windowMs - 45_000);
  return {
    operator,
    windowSeconds: windowMs / 1000,
    requests: inWindow.length,
    byVerbResource: countBy(inWindow, verbResource),
    byVerb: countBy(inWindow, (r) => r.verb),
    byStatus: countBy(inWindow, (r) => String(r.status)),
    steadyRequests: steady.length,
    steadyByVerbResource: countBy(steady, verbResource),
    registryByMethod: countBy(registry, (r) => `${r.method} ${r.repo}`),
    nonWatch: inWindow.filter((r) => r.verb !== "watch").map((r) =>
      `${Math.round(r.at - t0)} ms ${r.verb} ${r.path} ${r.status}`
    ),
  };
}

/**
 * Waits (at most timeoutMs; 1: checks once) until both flows are held: the request Hibernating
 * with its VM hibernating, the mover Migrating with its old main asked and hibernating.
 */
async function waitHeld(admin: ApiClient, timeoutMs: number): Promise<void> {
  let seen = "";
  try {
    await waitUntil(async () => {
      const hib = await admin.get(CocoonHibernations, NS, "hold");
      const set = await admin.get(CocoonSets, NS, "mover");
      const heldPod = await admin.get(Pods, NS, "held-0");
      const moverPod = await admin.get(Pods, NS, "mover-0").catch(() => undefined);
      const hibernating = (p: typeof heldPod | undefined) =>
        p !== undefined && readHibernateState(p) &&
        p.metadata.annotations?.[ANNOTATION_LIFECYCLE_STATE] === "hibernating";
      seen = `request ${hib.status?.phase}, set ${set.status?.phase}, ` +
        `held-0 ${heldPod.metadata.annotations?.[ANNOTATION_LIFECYCLE_STATE]}, ` +
        `mover-0 ${moverPod?.metadata.annotations?.[ANNOTATION_LIFECYCLE_STATE]}`;
      return hib.status?.phase === "Hibernating" && set.status?.phase === "Migrating" &&
        hibernating(heldPod) && hibernating(moverPod);
    }, { what: "a held Hibernate and a held migration", timeoutMs, intervalMs: 250 });
  } catch (err) {
    throw new Error(`${(err as Error).message} (last seen: ${seen})`);
  }
}

/** The benchmark as the command line asks for it (`--quick`: a 30 s window). */
export function pendingFlowsFromFlags(flags: BenchFlags): Promise<PendingFlowsResult> {
  return benchPendingFlows({
    operatorCmd: flags.operatorCmd,
    windowSeconds: flags.quick ? 30 : 75,
  });
}

if (import.meta.main) {
  const pendingFlows = await pendingFlowsFromFlags(benchFlagsOrExit(Deno.args));
  console.log(JSON.stringify({ pendingFlows }, null, 2));
}
