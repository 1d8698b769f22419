/**
 * Specs the API server accepts but no pod can be built from (a negative storage quantity,
 * requests above limits, a label value over 63 characters from a long set or toolbox name):
 * before the first pod of a generation is created — and before a pod is deleted to be replaced
 * for drift, or a migration quiesces the main, so that an edit no pod can be built from never
 * takes a running VM down — every pod shape the spec implies is dry-run created, and a refusal
 * stops the pass with the server's own message: Ready=False with reason InvalidSpec, a Warning
 * Event, and a retry with backoff. The Go operator only logged the failing create and retried it
 * in a loop (after deleting the drifted pod); nothing on the object said why.
 *
 * A generation is checked once per process (the answer cannot change until the spec does), and
 * only when something is about to be created or replaced, so sets at rest cost nothing.
 */
import { Pods } from "../kube/core.ts";
import { apiErrorOf, errorMessage, isAlreadyExists, isInvalid } from "../kube/errors.ts";
import { ConditionTypeReady } from "../common/k8s/condition.ts";
import { emit, type Pass } from "./pass.ts";
import { buildAgentPod, buildToolboxPod } from "./pods.ts";
import { writeSetStatus } from "./status.ts";

/** Reason of problems with the spec itself (Ready=False, Warning Event). */
export const ReasonInvalidSpec = "InvalidSpec";

/** Thrown when the spec cannot produce valid pods; the reconcile is retried with backoff. */
export class InvalidSpecError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "InvalidSpecError";
  }
}

/**
 * Checks, once per generation, that every pod shape of the spec is valid; on a refusal records
 * the problem (status + Event) and throws InvalidSpecError. With `creatingMain`, the caller is
 * about to create the main for real: its create is the main's check (see rethrowInvalidMain),
 * so only the other shapes are dry-run, and the caller marks the generation checked once that
 * create succeeded (markSpecChecked).
 */
export async function ensureSpecBuildable(
  pass: Pass,
  opts: { creatingMain?: boolean } = {},
): Promise<void> {
  const { cs, deps } = pass;
  const uid = cs.metadata.uid ?? "";
  const generation = cs.metadata.generation ?? 0;
  if (deps.validGenerations.get(uid) === generation) return;
  const problem = await firstInvalidPod(pass, opts.creatingMain ?? false);
  if (problem === undefined) {
    if (!opts.creatingMain) deps.validGenerations.set(uid, generation);
    return;
  }
  await reportInvalidSpec(pass, problem);
}

/** The main was created: together with the dry-run shapes, this generation is checked. */
export function markSpecChecked(pass: Pass): void {
  pass.deps.validGenerations.set(pass.cs.metadata.uid ?? "", pass.cs.metadata.generation ?? 0);
}

/**
 * A real create of the main answered Invalid: reported exactly like a dry-run refusal (status,
 * Warning, InvalidSpecError). Any other error returns for the caller to handle.
 */
export async function rethrowInvalidMain(pass: Pass, err: unknown): Promise<void> {
  if (isInvalid(err)) await reportInvalidSpec(pass, `main agent: ${serverMessage(err)}`);
}

async function reportInvalidSpec(pass: Pass, problem: string): Promise<never> {
  pass.problems.push({
    condition: ConditionTypeReady,
    reason: ReasonInvalidSpec,
    message: problem,
  });
  emit(pass, "Warning", ReasonInvalidSpec, problem);
  // The phase stays as it was: a released or migrating set must not lose the phase its next
  // steps depend on because the spec was edited into something unbuildable.
  await writeSetStatus(pass, pass.cs.status?.phase ?? "");
  throw new InvalidSpecError(problem);
}

/** Forgets what was checked for a CocoonSet (it was deleted). */
export function forgetSpecCheck(pass: Pass): void {
  pass.deps.validGenerations.delete(pass.cs.metadata.uid ?? "");
}

/** The first refusal among the spec's pod shapes, as "<what>: <server message>". */
async function firstInvalidPod(pass: Pass, skipMain: boolean): Promise<string | undefined> {
  const { cs } = pass;
  const shapes: { what: string; build: () => ReturnType<typeof buildAgentPod> }[] = skipMain
    ? []
    : [{ what: "main agent", build: () => buildAgentPod(cs, 0) }];
  if ((cs.spec.agent.replicas ?? 0) > 0) {
    const slot = cs.spec.agent.replicas ?? 1;
    // The highest slot has the longest name; bound to a placeholder node like a real sub-agent.
    shapes.push({
      what: `sub-agent slot ${slot}`,
      build: () => buildAgentPod(cs, slot, "vk-main", "node"),
    });
  }
  for (const tb of cs.spec.toolboxes ?? []) {
    shapes.push({ what: `toolbox ${tb.name}`, build: () => buildToolboxPod(cs, tb) });
  }
  // Built first (a builder refusal needs no request), then dry-run all at once; the first
  // refusal in shape order is reported.
  const pods = [];
  for (const { what, build } of shapes) {
    try {
      pods.push({ what, pod: build() });
    } catch (err) {
      // The builder itself refused (an unparsable quantity): as invalid as a server refusal.
      return `${what}: ${errorMessage(err)}`;
    }
  }
  const verdicts = await Promise.all(pods.map(async ({ what, pod }) => {
    try {
      await pass.deps.client.create(Pods, pod, { dryRun: true, signal: pass.signal });
      return undefined;
    } catch (err) {
      // The name is taken: validation ran before the existence check, so the shape is valid.
      if (isAlreadyExists(err)) return undefined;
      if (isInvalid(err)) return `${what}: ${serverMessage(err)}`;
      throw err;
    }
  }));
  const refused = verdicts.find((v) => v !== undefined);
  if (refused) return refused;
  return undefined;
}

/** The API server's message without our "resource name: Reason:" prefix. */
function serverMessage(err: unknown): string {
  return apiErrorOf(err)?.status?.message ?? errorMessage(err);
}
