/**
 * The Create the main step, and createMainPod: the one way every step creates the main (a first
 * boot, a released-seat wake, a migration's restore, a main before a suspend).
 */
import { errorMessage, isAlreadyExists, type Pod, Pods, wrapError } from "../kube/mod.ts";
import type { CocoonSetPhase } from "../common/apis/v1/enums.ts";
import {
  GO_ON,
  podRef,
  REQUEUE_WAIT_FOR_MAIN_MS,
  type SetPass,
  type Step,
  type Stop,
  stop,
} from "./pass.ts";
import { buildAgentPod } from "./pods.ts";
import { markRestoreIfHibernated } from "./restore.ts";
import {
  ensureSpecBuildable,
  invalidMainCreate,
  InvalidSpecError,
  markSpecChecked,
  refusedByServer,
} from "./validate.ts";
import { settleMainCreateClash } from "./name_clash.ts";
import { QuotaExceededError, reportQuotaRefusal } from "./quota.ts";
import { refuseCollidingCreate, REQUEUE_VM_NAME_COLLISION_MS } from "./vm_collision.ts";

/**
 * Creates the missing main, restoring from its snapshot when a CocoonHibernation says it was
 * hibernated, and looks again at once: the sub-agents fork from it.
 */
export async function createMainAgent(pass: SetPass): Promise<Stop> {
  const buildable = await ensureSpecBuildable(pass, { creatingMain: true });
  if (buildable.stop) return buildable;
  const pod = buildAgentPod(pass.cs, 0);
  const intent = (await pass.intent()).has(pod.metadata.name ?? "");
  await markRestoreIfHibernated(pass.deps, pod, intent, pass.signal);
  const created = await createMainPod(pass, pod, {
    phase: "",
    clashWaitMs: REQUEUE_WAIT_FOR_MAIN_MS,
    context: "create main agent",
    reportQuota: true,
  });
  if (created.stop) return created;
  pass.log.info("created main agent {pod}", { pod: podRef(pod) });
  // Other parts refused: the main still comes up, the status names them, and the pass is retried
  // with backoff (the main's Ready flip brings it back sooner).
  const refused = refusedByServer(pass);
  if (refused) return stop({}, pass.cs.status?.phase ?? "", new InvalidSpecError(refused));
  return stop({ requeue: true });
}

/** How a step creates the main. */
export interface MainCreate {
  /** The phase the status shows when a VM-name collision or a name clash holds the create. */
  phase: CocoonSetPhase | "";
  /** How long to wait while our old main still holds the name (ms). */
  clashWaitMs: number;
  /** What the error of a failed create names. */
  context: string;
  /** A quota refusal stops the pass with QuotaExceeded (else it fails as any error). */
  reportQuota?: boolean;
}

/**
 * Creates the main unless another namespace holds its VM name. Invalid stops the pass as an
 * invalid spec, a foreign pod under the name as a name clash; our terminating old main is waited
 * for. A create that succeeded was the main's spec check. Goes on once the main is created.
 */
export async function createMainPod(pass: SetPass, pod: Pod, opts: MainCreate): Promise<Step> {
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
    return await settleMainCreateClash(pass, opts.phase, opts.clashWaitMs);
  }
  markSpecChecked(pass);
  return GO_ON;
}
