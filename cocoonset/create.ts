/**
 * How the set creates its pods (the Create the main step among them), and what holds a create back
 * while the rest of the set goes on: another namespace holding the VM name (VMNameConflict), a
 * ResourceQuota (QuotaExceeded) or a foreign pod holding the pod name (NameConflict, untouched).
 */
import {
  apiErrorOf,
  errorMessage,
  isAlreadyExists,
  isControlledBy,
  type Pod,
  Pods,
  wrapError,
} from "../kube/mod.ts";
import type { CocoonSetPhase } from "../common/apis/v1/enums.ts";
import { CONDITION_TYPE_READY } from "../common/k8s/condition.ts";
import { LABEL_ROLE, parseVMSpec, ROLE_TOOLBOX } from "../common/meta/mod.ts";
import { collisionClaims } from "../snapshotgate/mod.ts";
import {
  claimSources,
  doing,
  emit,
  GO_ON,
  podRef,
  POLL_MS,
  readStored,
  type SetPass,
  type Step,
  type Stop,
  stop,
} from "./pass.ts";
import { buildAgentPod } from "./pods.ts";
import { markRestoreIfHibernated, restoreIntent } from "./restore.ts";
import { setActor } from "./tag_gate.ts";
import {
  ensureSpecBuildable,
  invalidMainCreate,
  InvalidSpecError,
  markSpecChecked,
  refusedByServer,
  serverMessage,
} from "./validate.ts";

/** Reason (Ready=False and Warning): another namespace already holds the pod's VM name. */
export const REASON_VM_NAME_CONFLICT = "VMNameConflict";
/** Reason (Ready=False and Warning): a ResourceQuota refused a create. */
export const REASON_QUOTA_EXCEEDED = "QuotaExceeded";
/** Reason (Ready=False and Warning): a pod name the set needs belongs to something else. */
export const REASON_NAME_CONFLICT = "NameConflict";

/** How often a set that lost a VM name looks again (the holder may go away). */
const REQUEUE_VM_NAME_COLLISION_MS = 30_000;

/** The error of a pass that met a quota refusal: retried with backoff. */
export class QuotaExceededError extends Error {
  override name = "QuotaExceededError";
}

/** The error of a pass that met name clashes (their messages): retried with backoff. */
export class NameConflictError extends Error {
  override name = "NameConflictError";
}

/**
 * The Create the main step, restoring when a CocoonHibernation hibernated it (restore.ts). Ahead
 * of a suspend (Suspending) it restores whenever a snapshot exists, as the VM's state matters,
 * and leaves quota refusals and the other parts' refusals to the pass after the suspend.
 */
export async function createMainAgent(pass: SetPass): Promise<Stop> {
  const suspending = pass.cs.spec.suspend === true;
  const buildable = await ensureSpecBuildable(pass, { creatingMain: true });
  if (buildable.stop) return buildable;
  const pod = buildAgentPod(pass.cs, 0);
  const intent = suspending || (await restoreIntent(pass)).has(pod.metadata.name ?? "");
  await markRestoreIfHibernated(pass, pod, intent);
  const opts = suspending
    ? { phase: "Suspending", context: "create main agent before suspend" } as const
    : { phase: "", context: "create main agent", reportQuota: true } as const;
  const created = await createMainPod(pass, pod, opts);
  if (created.stop) return created;
  pass.log.info("created main agent {pod}", { pod: podRef(pod), suspending });
  // Other parts refused: the main still comes up, and the pass is retried with backoff.
  const refused = !suspending && refusedByServer(pass);
  if (refused) return stop({}, pass.cs.status?.phase ?? "", new InvalidSpecError(refused));
  return stop({ requeue: true });
}

/**
 * The one way every step creates the main; goes on once created (which was its spec check).
 * Invalid and a foreign pod under the name stop the pass (with `phase`); our old main still
 * terminating is waited for; with reportQuota a quota refusal stops it as QuotaExceeded.
 */
export async function createMainPod(
  pass: SetPass,
  pod: Pod,
  opts: { phase: CocoonSetPhase | ""; context: string; reportQuota?: boolean },
): Promise<Step> {
  if (await refuseCollidingCreate(pass, pod, "the main agent")) {
    return stop({ requeueAfter: REQUEUE_VM_NAME_COLLISION_MS }, opts.phase);
  }
  try {
    await pass.deps.client.create(Pods, pod, { signal: pass.signal });
  } catch (err) {
    const invalid = invalidMainCreate(pass, err);
    if (invalid) return invalid;
    if (opts.reportQuota && reportQuotaRefusal(pass, "the main agent", err)) {
      return stop({}, pass.cs.status?.phase ?? "", new QuotaExceededError(errorMessage(err)));
    }
    if (!isAlreadyExists(err)) throw wrapError(opts.context, err);
    const taken = await readStored(pass, Pods, pod, "get existing pod");
    if (!taken) return stop({ requeue: true });
    if (isControlledBy(taken, pass.cs)) return stop({ requeueAfter: POLL_MS });
    const clash = reportNameClash(pass, "the main agent", taken);
    return stop({}, opts.phase, new NameConflictError(clash));
  }
  markSpecChecked(pass);
  return GO_ON;
}

/**
 * Creates a sub-agent or toolbox pod (`what`), restoring when intent holds; whether it was created.
 * A name our own pod holds waits for its delete event; one a foreign pod (read past the cache: it
 * need not carry our label) or, for a toolbox, our pod of another role holds is a name clash.
 */
export async function createPart(
  pass: SetPass,
  pod: Pod,
  what: string,
  intent: boolean,
  signal: AbortSignal,
): Promise<boolean> {
  await doing(`mark restore on ${what}`, markRestoreIfHibernated(pass, pod, intent, signal));
  if (await refuseCollidingCreate(pass, pod, what)) return false;
  try {
    await pass.deps.client.create(Pods, pod, { signal });
    return true;
  } catch (err) {
    if (reportQuotaRefusal(pass, what, err)) return false;
    if (!isAlreadyExists(err)) throw wrapError(`create ${what}`, err);
  }
  const taken = await readStored(pass, Pods, pod, "get existing pod");
  const isToolbox = (p: Pod) => p.metadata.labels?.[LABEL_ROLE] === ROLE_TOOLBOX;
  if (taken && (!isControlledBy(taken, pass.cs) || (isToolbox(pod) && !isToolbox(taken)))) {
    reportNameClash(pass, what, taken);
  }
  return false;
}

/**
 * Whether pod must not be created: another namespace's pod derives or runs its VM name, or its
 * CocoonSet derives it and came first (a released seat keeps its names). Recorded with a Warning.
 */
async function refuseCollidingCreate(pass: SetPass, pod: Pod, what: string): Promise<boolean> {
  const vmName = parseVMSpec(pod).vmName;
  if (vmName === "") return false;
  // The cache's VM-name index names the candidates; only their namespaces are read past it.
  const actor = setActor(pass.cs);
  const claims = await collisionClaims(claimSources(pass), vmName, actor, "create", pass.signal);
  const holders = new Set(
    claims.filter((c) => c.holder !== "CocoonHibernation")
      .map((c) => `${c.holder === "Pod" ? "pod" : c.holder} ${c.namespace}/${c.name}`),
  );
  if (holders.size === 0) return false;
  const message = `${what} ${podRef(pod)} is not created: its VM name ${vmName} is already held ` +
    `by ${[...holders].join(", ")} (CocoonSet ${actor.namespace}/${actor.name} came second)`;
  pass.problems.push({ condition: CONDITION_TYPE_READY, reason: REASON_VM_NAME_CONFLICT, message });
  emit(pass, "Warning", REASON_VM_NAME_CONFLICT, message);
  pass.log.warn("not creating {pod}: {reason}", { pod: podRef(pod), reason: message });
  return true;
}

/** The quotas a 403 names ("exceeded quota: <name>, requested: …"); undefined for other errors. */
export function quotaRefusal(err: unknown): { quotas: string[]; message: string } | undefined {
  const status = apiErrorOf(err)?.status;
  if (status?.code !== 403) return undefined;
  const message = status.message ?? "";
  if (!message.includes("exceeded quota")) return undefined;
  const quotas = [...message.matchAll(/exceeded quota: ([^,\s]+)/g)].map((m) => m[1]);
  return { quotas, message };
}

/** Records a quota refusal (one problem, a Warning per quota); false for any other error. */
function reportQuotaRefusal(pass: SetPass, what: string, err: unknown): boolean {
  const refusal = quotaRefusal(err);
  if (!refusal) return false;
  const names = refusal.quotas.length > 0 ? refusal.quotas.join(", ") : "(unnamed)";
  const message = `${what}: ResourceQuota ${names} of namespace ` +
    `${pass.cs.metadata.namespace ?? ""}: ${serverMessage(err)}`;
  pass.log.warn("create of {what} refused by quota {quota}: {error}", {
    what,
    quota: names,
    error: refusal.message,
  });
  const reason = REASON_QUOTA_EXCEEDED;
  const existing = pass.problems.find((p) => p.reason === reason);
  if (existing?.message.includes(`ResourceQuota ${names} `)) return true;
  if (existing) existing.message += `; ${message}`;
  else pass.problems.push({ condition: CONDITION_TYPE_READY, reason, message });
  emit(pass, "Warning", REASON_QUOTA_EXCEEDED, message);
  return true;
}

/** Records a name clash on the pass (problem and Warning); its message. */
export function reportNameClash(pass: SetPass, what: string, other: Pod): string {
  const owner = other.metadata.ownerReferences?.find((r) => r.controller);
  const role = other.metadata.labels?.[LABEL_ROLE];
  const holder = owner
    ? `controlled by ${owner.kind} ${owner.name}${role ? `, role ${role}` : ""}`
    : "not controlled by any CocoonSet";
  const message = `${what} needs pod ${other.metadata.name}, which is taken by ` +
    `pod ${podRef(other)} (${holder})`;
  pass.problems.push({ condition: CONDITION_TYPE_READY, reason: REASON_NAME_CONFLICT, message });
  emit(pass, "Warning", REASON_NAME_CONFLICT, message);
  return message;
}
