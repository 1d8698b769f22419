/**
 * The spec check: a spec the API server accepts but no pod can be built from (requests above
 * limits, a label over 63 characters) must never take a running VM down. Before a pod is created,
 * replaced or quiesced, the spec's shapes are dry-run created, at most once per pass and once per
 * generation; a refusal blocks that part alone, with Ready=False InvalidSpec and a Warning.
 */
import {
  apiErrorOf,
  errorMessage,
  isAlreadyExists,
  isInvalid,
  type Pod,
  Pods,
} from "../kube/mod.ts";
import { ANNOTATION_COCOON_SET_GENERATION } from "../common/meta/mod.ts";
import { CONDITION_TYPE_READY } from "../common/k8s/condition.ts";
import { forEachLimited } from "./_fanout.ts";
import {
  emit,
  GO_ON,
  type SetLimits,
  type SetPass,
  type SpecVerdict,
  type Step,
  type Stop,
  stop,
} from "./pass.ts";
import { buildAgentPod, buildToolboxPod } from "./pods.ts";
import type { CocoonSetSpec } from "../common/apis/v1/cocoonset_types.ts";

/** Reason of problems with the spec itself (Ready=False, Warning). */
export const REASON_INVALID_SPEC = "InvalidSpec";

/** Dry-run creates in flight at once (a spec may list many toolboxes). */
export const DRY_RUN_CONCURRENCY = 8;

/** Verified shapes kept per process before the set is cleared (a bound on memory). */
export const MAX_VERIFIED_SHAPES = 10_000;

/** The error of a pass whose spec cannot produce valid pods: retried with backoff. */
export class InvalidSpecError extends Error {
  override name = "InvalidSpecError";
}

/**
 * The verdict on the spec's pod shapes, each refused part recorded on the pass. With `skipMain`
 * the caller is about to create the main, and that create is its check (invalidMainCreate).
 */
export async function checkSpec(
  pass: SetPass,
  opts: { skipMain?: boolean } = {},
): Promise<SpecVerdict> {
  const { cs, deps } = pass;
  const known = deps.specChecks.get(cs.metadata.uid ?? "");
  if (known?.generation === (cs.metadata.generation ?? 0) && known.refused.length === 0) {
    return { toolboxes: new Map() };
  }
  const wantMain = !opts.skipMain;
  const prev = pass.specCheck;
  if (prev && (prev.mainChecked || !wantMain)) return prev.verdict;
  // Nothing checked yet, or only the other parts and now the main too.
  const fresh = await dryRunShapes(pass, { main: wantMain, others: prev === undefined });
  const verdict = prev ? { ...prev.verdict, main: fresh.main } : fresh;
  pass.specCheck = { verdict, mainChecked: wantMain };
  recordVerdict(pass, verdict);
  if (wantMain && refusedParts(verdict).length === 0) markGenerationValid(pass);
  return verdict;
}

/**
 * Before the main is created, replaced or quiesced: the pass stops, keeping its phase, unless its
 * shape is buildable (creatingMain: checkSpec's skipMain).
 */
export async function ensureSpecBuildable(
  pass: SetPass,
  opts: { creatingMain?: boolean } = {},
): Promise<Step> {
  const verdict = await checkSpec(pass, { skipMain: opts.creatingMain });
  return verdict.main === undefined ? GO_ON : stopOnInvalidSpec(pass, verdict.main);
}

/** Whether the sub-agents' pods (or, given its name, a toolbox's) can be built from the spec. */
export async function partBuildable(pass: SetPass, toolbox?: string): Promise<boolean> {
  const verdict = await checkSpec(pass, { skipMain: true });
  return toolbox === undefined ? verdict.subAgents === undefined : !verdict.toolboxes.has(toolbox);
}

/** The main was created, which was its check: the generation passed if the other shapes did. */
export function markSpecChecked(pass: SetPass): void {
  if (!refusedByServer(pass)) markGenerationValid(pass);
}

/** A create of the main answered Invalid: reported as a refusal, and the pass stops. */
export function invalidMainCreate(pass: SetPass, err: unknown): Stop | undefined {
  if (!isInvalid(err)) return undefined;
  const problem = `main agent: ${serverMessage(err)}`;
  addInvalidSpecProblem(pass, problem);
  emit(pass, "Warning", REASON_INVALID_SPEC, problem);
  return stopOnInvalidSpec(pass, problem);
}

/**
 * The parts the server refused this pass, joined; undefined when none. Problems found without it
 * (names, limits) are not among them: only a spec change, which wakes the set, fixes those.
 */
export function refusedByServer(pass: SetPass): string | undefined {
  const parts = pass.specCheck ? refusedParts(pass.specCheck.verdict) : [];
  return parts.length > 0 ? parts.join("; ") : undefined;
}

/** Adds a part's problem to the pass's one InvalidSpec problem; whether it was new. */
export function addInvalidSpecProblem(pass: SetPass, message: string): boolean {
  const reason = REASON_INVALID_SPEC;
  const existing = pass.problems.find((p) => p.reason === reason);
  if (existing?.message.split("; ").includes(message)) return false;
  if (existing) existing.message += `; ${message}`;
  else pass.problems.push({ condition: CONDITION_TYPE_READY, reason, message });
  return true;
}

/** A pass that checks nothing still shows the parts refused for this generation. */
export function rememberInvalidSpec(pass: SetPass): void {
  const known = pass.deps.specChecks.get(pass.cs.metadata.uid ?? "");
  if (known?.generation !== (pass.cs.metadata.generation ?? 0)) return;
  for (const part of known.refused) addInvalidSpecProblem(pass, part);
}

function stopOnInvalidSpec(pass: SetPass, problem: string): Stop {
  // The phase stays: a released or migrating set must not lose the phase its next steps read.
  const message = pass.problems.find((p) => p.reason === REASON_INVALID_SPEC)?.message ?? problem;
  return stop({}, pass.cs.status?.phase ?? "", new InvalidSpecError(message));
}

function refusedParts(v: SpecVerdict): string[] {
  return [v.main, v.subAgents, ...v.toolboxes.values()].filter((p) => p !== undefined);
}

function markGenerationValid(pass: SetPass): void {
  const generation = pass.cs.metadata.generation ?? 0;
  pass.deps.specChecks.set(pass.cs.metadata.uid ?? "", { generation, refused: [] });
}

/** Remembers the verdict for this generation and reports each refused part once per pass. */
function recordVerdict(pass: SetPass, v: SpecVerdict): void {
  const parts = refusedParts(v);
  const uid = pass.cs.metadata.uid ?? "";
  if (parts.length > 0) {
    pass.deps.specChecks.set(uid, { generation: pass.cs.metadata.generation ?? 0, refused: parts });
  } else if (pass.deps.specChecks.get(uid)?.refused.length) {
    pass.deps.specChecks.delete(uid);
  }
  for (const problem of parts) {
    if (addInvalidSpecProblem(pass, problem)) emit(pass, "Warning", REASON_INVALID_SPEC, problem);
  }
}

/** Dry-runs the requested shapes (a part over its limit has none) and returns the refused ones. */
async function dryRunShapes(
  pass: SetPass,
  want: { main: boolean; others: boolean },
): Promise<SpecVerdict> {
  const { cs } = pass;
  const over = overLimit(cs.spec, pass.deps.limits);
  const replicas = cs.spec.agent.replicas ?? 0;
  const shapes: {
    what: string;
    part: "main" | "sub" | "toolbox";
    name?: string;
    build: () => Pod;
  }[] = [];
  if (want.main) {
    shapes.push({
      what: "main agent",
      part: "main",
      build: () => buildAgentPod(cs, 0),
    });
  }
  if (want.others && replicas > 0 && !over.agents) {
    // The highest slot has the longest name; bound to a placeholder node like a real sub-agent.
    const build = () => buildAgentPod(cs, replicas, "vk-main", "node");
    shapes.push({ what: `sub-agent slot ${replicas}`, part: "sub", build });
  }
  for (const tb of want.others && !over.toolboxes ? cs.spec.toolboxes ?? [] : []) {
    const build = () => buildToolboxPod(cs, tb);
    shapes.push({ what: `toolbox ${tb.name}`, part: "toolbox", name: tb.name, build });
  }
  const refused: (string | undefined)[] = [];
  const pods: { i: number; pod: Pod }[] = [];
  shapes.forEach((shape, i) => {
    try {
      pods.push({ i, pod: shape.build() });
    } catch (err) {
      // The builder itself refused (an unparsable quantity): as invalid as a server refusal.
      refused[i] = errorMessage(err);
    }
  });
  await forEachLimited(pods, DRY_RUN_CONCURRENCY, pass.signal, async ({ i, pod }, signal) => {
    refused[i] = await dryRunRefusal(pass, pod, signal);
  });
  const verdict: SpecVerdict = { toolboxes: new Map() };
  shapes.forEach(({ what, part, name = "" }, i) => {
    if (refused[i] === undefined) return;
    const problem = `${what}: ${refused[i]}`;
    if (part === "main") verdict.main = problem;
    else if (part === "sub") verdict.subAgents = problem;
    else if (!verdict.toolboxes.has(name)) verdict.toolboxes.set(name, problem);
  });
  return verdict;
}

/**
 * The server's message when it refuses pod as Invalid (a 403 says nothing about the shape). A
 * shape another set passed is not dry-run again; one in flight lends its acceptance only, as its
 * refusal would name the other pod.
 */
async function dryRunRefusal(
  pass: SetPass,
  pod: Pod,
  signal: AbortSignal,
): Promise<string | undefined> {
  const { deps } = pass;
  const key = shapeKey(pass.cs.metadata.name ?? "", pod);
  if (deps.verifiedShapes.has(key)) return undefined;
  const pending = deps.dryRunsInFlight.get(key);
  if (pending && await pending) return undefined;
  // An existing pod of that name means the shape is valid: validation runs before that check.
  const answer = deps.client.create(Pods, pod, { dryRun: true, signal }).then(
    () => undefined,
    (err: unknown) => isAlreadyExists(err) ? undefined : { err },
  );
  if (!pending) {
    const accepted = answer.then((a) => a === undefined);
    deps.dryRunsInFlight.set(key, accepted);
    accepted.finally(() => {
      if (deps.dryRunsInFlight.get(key) === accepted) deps.dryRunsInFlight.delete(key);
    });
  }
  const refusal = await answer;
  if (refusal === undefined) {
    if (deps.verifiedShapes.size >= MAX_VERIFIED_SHAPES) deps.verifiedShapes.clear();
    deps.verifiedShapes.add(key);
    return undefined;
  }
  if (isInvalid(refusal.err)) return serverMessage(refusal.err);
  if (apiErrorOf(refusal.err)?.status?.code === 403) return undefined;
  throw refusal.err;
}

/** The API server's message without our "resource name: Reason:" prefix. */
export function serverMessage(err: unknown): string {
  return apiErrorOf(err)?.status?.message ?? errorMessage(err);
}

/**
 * The key under which sets share a dry-run verdict: the set's name masked by one of its length (the
 * server checks a name's length and characters only), without owner and generation stamp.
 */
export function shapeKey(setName: string, pod: Pod): string {
  const mask = (v: string) =>
    setName === "" ? v : v.split(setName).join("\u0000".repeat(setName.length));
  const maskAll = (m: Record<string, string> = {}) =>
    Object.fromEntries(
      Object.keys(m).sort().filter((k) => k !== ANNOTATION_COCOON_SET_GENERATION)
        .map((k) => [k, mask(m[k])]),
    );
  return JSON.stringify({
    namespace: pod.metadata.namespace ?? "",
    name: mask(pod.metadata.name ?? ""),
    labels: maskAll(pod.metadata.labels),
    annotations: maskAll(pod.metadata.annotations),
    spec: pod.spec,
  });
}

/** The defaults (--max-replicas-per-set, --max-toolboxes-per-set). */
export const DEFAULT_SET_LIMITS: SetLimits = { maxReplicas: 1_000, maxToolboxes: 100 };

/** The parts of spec above their limit, each with the message the set reports (InvalidSpec). */
export function overLimit(spec: CocoonSetSpec, limits: SetLimits): OverLimit {
  const out: OverLimit = {};
  const replicas = spec.agent.replicas ?? 0;
  if (replicas > limits.maxReplicas) {
    out.agents = `spec.agent.replicas ${replicas} is above the limit of ${limits.maxReplicas} ` +
      "sub-agents per set (--max-replicas-per-set, MAX_REPLICAS_PER_SET); " +
      "no sub-agent is created or deleted";
  }
  const toolboxes = spec.toolboxes?.length ?? 0;
  if (toolboxes > limits.maxToolboxes) {
    out.toolboxes = `spec.toolboxes lists ${toolboxes} toolboxes, above the limit of ` +
      `${limits.maxToolboxes} per set (--max-toolboxes-per-set, MAX_TOOLBOXES_PER_SET); ` +
      "no toolbox is created or deleted";
  }
  return out;
}

type OverLimit = { agents?: string; toolboxes?: string };
