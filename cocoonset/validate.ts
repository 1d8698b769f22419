/**
 * Specs the API server accepts but no pod can be built from (a negative storage quantity,
 * requests above limits, a label value over 63 characters from a long set or toolbox name):
 * before a pod of a generation is created — and before a pod is deleted to be replaced for
 * drift or a rebuild, or a migration quiesces the main, so that an edit no pod can be built from
 * never takes a running VM down — the pod shapes the spec implies are dry-run created.
 *
 * A refusal blocks only the pods built from that part of the spec (the main, the sub-agents, one
 * toolbox): the part is named in a Warning Event and in Ready=False `InvalidSpec`, the other
 * parts are created and replaced as usual, and the pass is retried with backoff. The Go operator
 * only logged the failing create and retried it in a loop (after deleting the drifted pod);
 * nothing on the object said why, and one bad toolbox stopped the whole set.
 *
 * Only Invalid answers make a spec invalid. A quota or another admission refusal (Forbidden) says
 * nothing about the shape: the replacement goes ahead as the original's did (delete, then
 * create), and the create's own refusal is reported (quota.ts).
 *
 * A generation whose shapes all passed is remembered per process (the answer cannot change until
 * the spec does), and checks run only when something is about to be created or replaced, so sets
 * at rest cost nothing. Within a pass the dry-runs run once however many steps ask, and a shape
 * another set already passed (the same spec in the same namespace, names of the same length:
 * shape_key.ts) is not dry-run again, nor one whose dry-run another worker has in flight (its
 * acceptance is borrowed; any other answer is not).
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
import { emit, GO_ON, type SetPass, type SpecVerdict, type Step, type Stop, stop } from "./pass.ts";
import { buildAgentPod, buildToolboxPod } from "./pods.ts";
import { overLimit } from "./limits.ts";

/** Reason of problems with the spec itself (Ready=False, Warning Event). */
export const REASON_INVALID_SPEC = "InvalidSpec";

/** Dry-run creates in flight at once (a spec may list many toolboxes). */
export const DRY_RUN_CONCURRENCY = 8;

/** Thrown when the spec cannot produce valid pods; the reconcile is retried with backoff. */
export class InvalidSpecError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "InvalidSpecError";
  }
}

const clean = (): SpecVerdict => ({ toolboxes: new Map() });

/**
 * The verdict on the spec's pod shapes, checked once per pass (and not at all once the
 * generation passed). Each refused part is recorded on the pass (one InvalidSpec problem naming
 * every part, a Warning per part) the first time it is seen. With `skipMain` the caller is about
 * to create the main for real: that create is the main's check (invalidMainCreate).
 */
export async function checkSpec(
  pass: SetPass,
  opts: { skipMain?: boolean } = {},
): Promise<SpecVerdict> {
  const { cs, deps } = pass;
  if (deps.validGenerations.get(cs.metadata.uid ?? "") === (cs.metadata.generation ?? 0)) {
    return clean();
  }
  const wantMain = !(opts.skipMain ?? false);
  const prev = pass.specCheck;
  if (prev && (prev.mainChecked || !wantMain)) return prev.verdict;
  // Nothing checked yet, or only the other parts and now the main too.
  const fresh = await dryRunShapes(pass, { main: wantMain, others: prev === undefined });
  const verdict = prev ? { ...prev.verdict, main: fresh.main } : fresh;
  const mainChecked = wantMain || (prev?.mainChecked ?? false);
  pass.specCheck = { verdict, mainChecked };
  recordVerdict(pass, verdict);
  if (mainChecked && isClean(verdict)) markGenerationValid(pass);
  return verdict;
}

/**
 * Before the main is created, replaced or quiesced: its shape must be buildable, else the pass
 * stops (the status keeps its phase, the pass fails with InvalidSpecError). Problems of the other
 * parts are recorded on the pass and do not stop it. `creatingMain` as checkSpec's skipMain.
 */
export async function ensureSpecBuildable(
  pass: SetPass,
  opts: { creatingMain?: boolean } = {},
): Promise<Step> {
  const verdict = await checkSpec(pass, { skipMain: opts.creatingMain });
  return verdict.main === undefined ? GO_ON : stopOnInvalidSpec(pass, verdict.main);
}

/** Whether sub-agent pods can be built from the spec (checked before any create or delete). */
export async function subAgentsBuildable(pass: SetPass): Promise<boolean> {
  return (await checkSpec(pass, { skipMain: true })).subAgents === undefined;
}

/** Whether toolbox `name`'s pod can be built from the spec. */
export async function toolboxBuildable(pass: SetPass, name: string): Promise<boolean> {
  return !(await checkSpec(pass, { skipMain: true })).toolboxes.has(name);
}

/**
 * The main was created: its create was its check, so the generation is checked when the other
 * shapes passed too.
 */
export function markSpecChecked(pass: SetPass): void {
  const verdict = pass.specCheck?.verdict;
  if (verdict && !isClean(verdict)) return;
  markGenerationValid(pass);
}

/**
 * A real create of the main answered Invalid: reported exactly like a dry-run refusal (Warning,
 * a stop with InvalidSpecError). Undefined for any other error, which the caller handles.
 */
export function invalidMainCreate(pass: SetPass, err: unknown): Stop | undefined {
  if (!isInvalid(err)) return undefined;
  const problem = `main agent: ${serverMessage(err)}`;
  addInvalidSpecProblem(pass, problem);
  emit(pass, "Warning", REASON_INVALID_SPEC, problem);
  return stopOnInvalidSpec(pass, problem);
}

/** Forgets what was checked for a CocoonSet (it was deleted). */
export function forgetSpecCheck(pass: SetPass): void {
  pass.deps.validGenerations.delete(pass.cs.metadata.uid ?? "");
  refusedParts.get(pass.deps)?.delete(pass.cs.metadata.uid ?? "");
}

/**
 * The parts this pass's dry-runs (or the main's create) refused, joined; undefined when none.
 * Problems found without the server (toolbox names, limits) are not among them: only a spec
 * change can fix those, and a spec change wakes the set.
 */
export function refusedByServer(pass: SetPass): string | undefined {
  const v = pass.specCheck?.verdict;
  const parts = v ? [v.main, v.subAgents, ...v.toolboxes.values()].filter((p) => p) : [];
  return parts.length > 0 ? parts.join("; ") : undefined;
}

/** The pass's InvalidSpec problem, if any part of the spec was refused. */
export function invalidSpecMessage(pass: SetPass): string | undefined {
  return pass.problems.find((p) => p.reason === REASON_INVALID_SPEC)?.message;
}

/**
 * Adds a part's problem to the pass's one InvalidSpec problem (the Ready condition shows one
 * reason, so every refused part is named in its message).
 */
export function addInvalidSpecProblem(pass: SetPass, message: string): void {
  const existing = pass.problems.find((p) => p.reason === REASON_INVALID_SPEC);
  if (existing) {
    if (!existing.message.split("; ").includes(message)) existing.message += `; ${message}`;
    return;
  }
  pass.problems.push({ condition: CONDITION_TYPE_READY, reason: REASON_INVALID_SPEC, message });
}

function stopOnInvalidSpec(pass: SetPass, problem: string): Stop {
  // The phase stays as it was: a released or migrating set must not lose the phase its next
  // steps depend on because the spec was edited into something unbuildable.
  const error = new InvalidSpecError(invalidSpecMessage(pass) ?? problem);
  return stop({}, pass.cs.status?.phase ?? "", error);
}

function isClean(v: SpecVerdict): boolean {
  return v.main === undefined && v.subAgents === undefined && v.toolboxes.size === 0;
}

function markGenerationValid(pass: SetPass): void {
  const uid = pass.cs.metadata.uid ?? "";
  pass.deps.validGenerations.set(uid, pass.cs.metadata.generation ?? 0);
  refusedParts.get(pass.deps)?.delete(uid);
}

/**
 * Per reconciler (its deps), by set UID: the parts last refused and the generation they belong
 * to, so a pass that runs no check (waiting for the main) still shows them without a dry-run.
 */
const refusedParts = new WeakMap<object, Map<string, { generation: number; parts: string[] }>>();

/** A pass that checks nothing: the parts refused for this generation are on its status too. */
export function rememberInvalidSpec(pass: SetPass): void {
  const known = refusedParts.get(pass.deps)?.get(pass.cs.metadata.uid ?? "");
  if (!known || known.generation !== (pass.cs.metadata.generation ?? 0)) return;
  for (const part of known.parts) addInvalidSpecProblem(pass, part);
}

function recordVerdict(pass: SetPass, v: SpecVerdict): void {
  const parts = [v.main, v.subAgents, ...v.toolboxes.values()].filter((p) => p !== undefined);
  let byUid = refusedParts.get(pass.deps);
  if (!byUid) refusedParts.set(pass.deps, byUid = new Map());
  const uid = pass.cs.metadata.uid ?? "";
  if (parts.length > 0) byUid.set(uid, { generation: pass.cs.metadata.generation ?? 0, parts });
  else byUid.delete(uid);
  for (const problem of parts) {
    if (invalidSpecMessage(pass)?.split("; ").includes(problem)) continue;
    addInvalidSpecProblem(pass, problem);
    emit(pass, "Warning", REASON_INVALID_SPEC, problem);
  }
}

type Part = { kind: "main" } | { kind: "sub" } | { kind: "toolbox"; name: string };

/**
 * Dry-runs the requested shapes (at most DRY_RUN_CONCURRENCY at a time) and returns the refused
 * ones. A part over its limit (limits.ts) is not dry-run: it builds nothing anyway.
 */
async function dryRunShapes(
  pass: SetPass,
  want: { main: boolean; others: boolean },
): Promise<SpecVerdict> {
  const { cs } = pass;
  const over = overLimit(cs.spec, pass.deps.limits);
  const shapes: { what: string; part: Part; build: () => Pod }[] = [];
  if (want.main) {
    shapes.push({ what: "main agent", part: { kind: "main" }, build: () => buildAgentPod(cs, 0) });
  }
  const replicas = cs.spec.agent.replicas ?? 0;
  if (want.others && replicas > 0 && !over.agents) {
    // The highest slot has the longest name; bound to a placeholder node like a real sub-agent.
    shapes.push({
      what: `sub-agent slot ${replicas}`,
      part: { kind: "sub" },
      build: () => buildAgentPod(cs, replicas, "vk-main", "node"),
    });
  }
  if (want.others && !over.toolboxes) {
    for (const tb of cs.spec.toolboxes ?? []) {
      shapes.push({
        what: `toolbox ${tb.name}`,
        part: { kind: "toolbox", name: tb.name },
        build: () => buildToolboxPod(cs, tb),
      });
    }
  }
  const verdict = clean();
  const refuse = (part: Part, problem: string) => {
    if (part.kind === "main") verdict.main ??= problem;
    else if (part.kind === "sub") verdict.subAgents ??= problem;
    else if (!verdict.toolboxes.has(part.name)) verdict.toolboxes.set(part.name, problem);
  };
  const pods: { what: string; part: Part; pod: Pod }[] = [];
  for (const { what, part, build } of shapes) {
    try {
      pods.push({ what, part, pod: build() });
    } catch (err) {
      // The builder itself refused (an unparsable quantity): as invalid as a server refusal.
      refuse(part, `${what}: ${errorMessage(err)}`);
    }
  }
  const verified = pass.deps.verifiedShapes;
  const setName = cs.metadata.name ?? "";
  await forEachLimited(
    pods,
    DRY_RUN_CONCURRENCY,
    pass.signal,
    async ({ what, part, pod }, signal) => {
      // A shape another set (or an earlier generation) already passed needs no request.
      const key = verified ? shapeKey(setName, pod) : "";
      if (verified?.has(key)) return;
      // Another worker is dry-running the same shape right now: its acceptance counts here too.
      // Anything else it meets (a refusal naming its own pod, its abort) is not borrowed: this
      // pass then asks for itself.
      const inFlight = verified ? inFlightOf(pass.deps) : undefined;
      const pending = inFlight?.get(key);
      if (pending && await pending) return;
      const answer = dryRunCreate(pass, pod, signal);
      if (inFlight && !pending) {
        const accepted = answer.then((a) => a.accepted);
        inFlight.set(key, accepted);
        accepted.finally(() => inFlight.get(key) === accepted && inFlight.delete(key));
      }
      const got = await answer;
      if (got.accepted) {
        if (verified) rememberShape(verified, key);
        return;
      }
      if (isInvalid(got.error)) return refuse(part, `${what}: ${serverMessage(got.error)}`);
      // A quota or an admission plugin: not a verdict on the shape (see the module doc).
      if (isAdmissionRefusal(got.error)) return;
      throw got.error;
    },
  );
  // The first refusal in shape order leads the message, as before.
  return orderVerdict(verdict, pods.map((p) => p.part));
}

/** The answer to one dry-run create: accepted, or the error the server (or the call) gave. */
type DryRunAnswer = { accepted: true } | { accepted: false; error: unknown };

async function dryRunCreate(pass: SetPass, pod: Pod, signal: AbortSignal): Promise<DryRunAnswer> {
  try {
    await pass.deps.client.create(Pods, pod, { dryRun: true, signal });
    return { accepted: true };
  } catch (err) {
    // The name is taken: validation ran before the existence check, so the shape is valid.
    if (isAlreadyExists(err)) return { accepted: true };
    return { accepted: false, error: err };
  }
}

/**
 * Per reconciler (its deps): shape key → whether the dry-run of that shape in flight was
 * accepted, so passes of sets with one spec running at once (the workers) send one request.
 */
const inFlightShapes = new WeakMap<object, Map<string, Promise<boolean>>>();

function inFlightOf(deps: object): Map<string, Promise<boolean>> {
  let m = inFlightShapes.get(deps);
  if (!m) inFlightShapes.set(deps, m = new Map());
  return m;
}

/** Toolbox problems in spec order, whatever order the dry-runs answered in. */
function orderVerdict(v: SpecVerdict, order: readonly Part[]): SpecVerdict {
  const toolboxes = new Map<string, string>();
  for (const p of order) {
    if (p.kind === "toolbox" && v.toolboxes.has(p.name)) {
      toolboxes.set(p.name, v.toolboxes.get(p.name)!);
    }
  }
  for (const [k, m] of v.toolboxes) if (!toolboxes.has(k)) toolboxes.set(k, m);
  return { ...v, toolboxes };
}

/** 403 from admission (a ResourceQuota, a webhook, a policy): the shape was not judged. */
function isAdmissionRefusal(err: unknown): boolean {
  return apiErrorOf(err)?.status?.code === 403;
}

/** The API server's message without our "resource name: Reason:" prefix. */
export function serverMessage(err: unknown): string {
  return apiErrorOf(err)?.status?.message ?? errorMessage(err);
}

/** Verified shapes kept per process before the set is cleared (a bound, not a cache policy). */
export const MAX_VERIFIED_SHAPES = 10_000;

/**
 * The key of pod (built for the set named setName) for sharing dry-run verdicts. The server checks
 * a name only for its length and characters, so the set's name in metadata is masked by one of the
 * same length; owner references and the generation stamp are left out, and the spec is kept whole.
 */
export function shapeKey(setName: string, pod: Pod): string {
  const mask = setName === ""
    ? (v: string) => v
    : (v: string) => v.split(setName).join("\u0000".repeat(setName.length));
  const maskAll = (m: Record<string, string> | undefined) => {
    const out: Record<string, string> = {};
    for (const k of Object.keys(m ?? {}).sort()) {
      if (k === ANNOTATION_COCOON_SET_GENERATION) continue;
      out[k] = mask(m![k]);
    }
    return out;
  };
  return JSON.stringify({
    namespace: pod.metadata.namespace ?? "",
    name: mask(pod.metadata.name ?? ""),
    labels: maskAll(pod.metadata.labels),
    annotations: maskAll(pod.metadata.annotations),
    spec: pod.spec,
  });
}

/** Remembers a verified key, keeping the set bounded. */
export function rememberShape(verified: Set<string>, key: string): void {
  if (verified.size >= MAX_VERIFIED_SHAPES) verified.clear();
  verified.add(key);
}
