/**
 * The create-the-main step: the missing main is created, restored from its `:hibernate` snapshot
 * when a CocoonHibernation says it was hibernated (restore.ts).
 */
import { errorMessage, isAlreadyExists, Pods, wrapError } from "../kube/mod.ts";
import type { Pod, Result } from "../kube/mod.ts";
import type { CocoonSetPhase } from "../common/apis/v1/enums.ts";
import { PassStopped } from "./problem.ts";
import { podRef, REQUEUE_WAIT_FOR_MAIN_MS, type SetPass } from "./pass.ts";
import { buildAgentPod } from "./pods.ts";
import { markRestoreIfHibernated } from "./restore.ts";
import { writeSetStatus } from "./status.ts";
import {
  ensureSpecBuildable,
  InvalidSpecError,
  markSpecChecked,
  refusedByServer,
  rethrowInvalidMain,
} from "./validate.ts";
import { settleMainCreateClash } from "./name_clash.ts";
import { QuotaExceededError, reportQuotaRefusal } from "./quota.ts";
import { refuseCollidingCreate, REQUEUE_VM_NAME_COLLISION_MS } from "./vm_collision.ts";

/**
 * Creates the missing main, restoring from its snapshot when a CocoonHibernation says it was
 * hibernated. Always requeues: the sub-agents fork from the new main.
 */
export async function createMainAgent(pass: SetPass): Promise<Result> {
  await ensureSpecBuildable(pass, { creatingMain: true });
  const pod = buildAgentPod(pass.cs, 0);
  const restorable = await pass.intent();
  await markRestoreIfHibernated(
    pass.deps,
    pod,
    restorable.has(pod.metadata.name ?? ""),
    pass.signal,
  );
  const ended = await createMainPod(pass, pod, {
    phase: "",
    clashWaitMs: REQUEUE_WAIT_FOR_MAIN_MS,
    context: "create main agent",
    reportQuota: true,
  });
  if (ended) return ended;
  pass.log.info("created main agent {pod}", { pod: podRef(pod) });
  // Other parts refused: the main still comes up; the status says which parts are invalid and
  // the pass is retried with backoff (the main's Ready flip brings it back sooner).
  const refused = refusedByServer(pass);
  if (refused) throw new PassStopped(pass.cs.status?.phase ?? "", new InvalidSpecError(refused));
  return { requeue: true };
}

/** How a step creates the main (createMainPod). */
export interface MainCreate {
  /** The phase the status shows when a VM-name collision or a name clash holds the create. */
  phase: CocoonSetPhase | "";
  /** How long to wait when the name is held by our old main, still terminating (ms). */
  clashWaitMs: number;
  /** What the error of a failed create names. */
  context: string;
  /** A quota refusal stops the pass with QuotaExceeded (else it fails as any error). */
  reportQuota?: boolean;
}

/**
 * The one way every step creates the main (a first boot, a released-seat wake, a migration's
 * restore, a main before a suspend): refused when another namespace derives its VM name,
 * created, and the answer read — Invalid stops the pass as an invalid spec, a foreign pod under
 * the name stops it as a name clash, our terminating old main waits. A create that succeeded
 * was the main's spec check. Undefined once the main is created, else the result the pass ends
 * with.
 */
export async function createMainPod(
  pass: SetPass,
  pod: Pod,
  opts: MainCreate,
): Promise<Result | undefined> {
  if (await refuseCollidingCreate(pass, pod, "the main agent")) {
    await writeSetStatus(pass, opts.phase);
    return { requeueAfter: REQUEUE_VM_NAME_COLLISION_MS };
  }
  try {
    await pass.deps.client.create(Pods, pod, { signal: pass.signal });
  } catch (err) {
    rethrowInvalidMain(pass, err);
    if (opts.reportQuota && reportQuotaRefusal(pass, "the main agent", err)) {
      throw new PassStopped(
        pass.cs.status?.phase ?? "",
        new QuotaExceededError(errorMessage(err)),
      );
    }
    if (!isAlreadyExists(err)) throw wrapError(opts.context, err);
    return await settleMainCreateClash(pass, opts.phase, opts.clashWaitMs);
  }
  markSpecChecked(pass);
  return undefined;
}
