/**
 * The create-the-main step: the missing main is created, restored from its `:hibernate` snapshot
 * when a CocoonHibernation says it was hibernated (restore.ts).
 */
import type { Result } from "../kube/reconcile.ts";
import { Pods } from "../kube/core.ts";
import { errorMessage, isAlreadyExists, wrapError } from "../kube/errors.ts";
import { podRef, requeueWaitForMainMs, type SetPass } from "./pass.ts";
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
import { refuseCollidingCreate, requeueVMNameConflictMs } from "./vm_collision.ts";

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
  if (await refuseCollidingCreate(pass, pod, "the main agent")) {
    await writeSetStatus(pass, "");
    return { requeueAfter: requeueVMNameConflictMs };
  }
  try {
    await pass.deps.client.create(Pods, pod, { signal: pass.signal });
  } catch (err) {
    await rethrowInvalidMain(pass, err);
    if (reportQuotaRefusal(pass, "the main agent", err)) {
      await writeSetStatus(pass, pass.cs.status?.phase ?? "");
      throw new QuotaExceededError(errorMessage(err));
    }
    if (!isAlreadyExists(err)) throw wrapError("create main agent", err);
    return await settleMainCreateClash(pass, "", requeueWaitForMainMs);
  }
  markSpecChecked(pass);
  pass.log.info("created main agent {pod}", { pod: podRef(pod) });
  // Other parts refused: the main still comes up; the status says which parts are invalid and
  // the pass is retried with backoff (the main's Ready flip brings it back sooner).
  const refused = refusedByServer(pass);
  if (refused) {
    await writeSetStatus(pass, pass.cs.status?.phase ?? "");
    throw new InvalidSpecError(refused);
  }
  return { requeue: true };
}
