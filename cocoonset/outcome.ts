/**
 * How a normal pass ends once its pods are reconciled: what the conditions say about
 * dead-lettered sub-agents, and how the pass is retried.
 *
 * Conditions that can be waited on: Progressing=False `SubAgentDeadLetter` only once nothing else
 * moves (every other slot exists and is Ready, every toolbox too, no rebuild is waiting); while the
 * rest converges, Ready=False `SubAgentDeadLetter` names the slots and Progressing stays True. A
 * dead-lettered pod that recovered by itself is not reported (agents.ts).
 *
 * Retries that fit: problems that need a person or another object to change (NameConflict, a
 * part the server refused as InvalidSpec, QuotaExceeded) retry the pass with the controller's error backoff — unless the pass
 * also has a timed look-again of its own (a rebuild's backoff), which then stands unchanged: the
 * problems are looked at again with it, and one problem's backoff never delays another's retry.
 */
import { CONDITION_TYPE_PROGRESSING } from "../common/apis/v1/conditions.ts";
import { CONDITION_TYPE_READY } from "../common/k8s/condition.ts";
import { isPodReady } from "../common/meta/mod.ts";
import { type SetPass, type Stop, stop } from "./pass.ts";
import { MAX_REBUILD_ATTEMPTS } from "./rebuild.ts";
import { REASON_SUB_AGENT_DEAD_LETTER } from "./agents.ts";
import { NameConflictError, REASON_NAME_CONFLICT } from "./name_clash.ts";
import { InvalidSpecError, refusedByServer } from "./validate.ts";
import { QuotaExceededError, REASON_QUOTA_EXCEEDED } from "./quota.ts";

/**
 * Records dead-lettered slots on the pass: always on Ready, and on Progressing only when they are
 * all that keeps the set from its spec. pendingRebuild: some slot waits for its rebuild backoff.
 */
export function reportDeadLetters(
  pass: SetPass,
  deadLettered: readonly number[],
  pendingRebuild: boolean,
): void {
  if (deadLettered.length === 0) return;
  const message = `sub-agent slots ${deadLettered.join(", ")} exhausted ` +
    `${MAX_REBUILD_ATTEMPTS} rebuilds; edit the agent spec to retry them`;
  pass.problems.push({
    condition: CONDITION_TYPE_READY,
    reason: REASON_SUB_AGENT_DEAD_LETTER,
    message,
  });
  if (!pendingRebuild && onlyDeadLettersLeft(pass, new Set(deadLettered))) {
    pass.problems.push({
      condition: CONDITION_TYPE_PROGRESSING,
      reason: REASON_SUB_AGENT_DEAD_LETTER,
      message,
    });
  }
}

/** Every wanted pod exists and every one but the dead-lettered is Ready. */
function onlyDeadLettersLeft(pass: SetPass, dead: ReadonlySet<number>): boolean {
  const { cs, classified } = pass;
  if (!classified.main || !isPodReady(classified.main)) return false;
  const replicas = cs.spec.agent.replicas ?? 0;
  let present = 0;
  for (const [slot, pod] of classified.sub) {
    if (slot < 1 || slot > replicas) return false; // an extra slot is still being removed
    present++;
    if (!dead.has(slot) && !isPodReady(pod)) return false;
  }
  if (present !== replicas) return false;
  for (const tb of cs.spec.toolboxes ?? []) {
    const pod = classified.toolbox.get(tb.name);
    if (!pod || !isPodReady(pod)) return false;
  }
  return classified.toolbox.size === (cs.spec.toolboxes?.length ?? 0);
}

/**
 * How a pass whose pods are reconciled ends, with the status derived: requeueAfterMs (> 0) when
 * the pass has a timed look-again of its own; otherwise the first retry problem fails the pass
 * for the error backoff.
 */
export function passEnd(pass: SetPass, requeueAfterMs: number): Stop {
  if (requeueAfterMs > 0) return stop({ requeueAfter: requeueAfterMs }, "");
  const conflicts = pass.problems.filter((p) => p.reason === REASON_NAME_CONFLICT);
  if (conflicts.length > 0) return stop({}, "", new NameConflictError(conflicts));
  const refused = refusedByServer(pass);
  if (refused) return stop({}, "", new InvalidSpecError(refused));
  const quota = pass.problems.find((p) => p.reason === REASON_QUOTA_EXCEEDED);
  if (quota) return stop({}, "", new QuotaExceededError(quota.message));
  return stop({}, "");
}
