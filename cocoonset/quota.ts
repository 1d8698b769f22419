/**
 * Creates a ResourceQuota refuses. The namespace is full, not the spec wrong: the pod is not
 * created this pass, Ready=False `QuotaExceeded` and a Warning name the quota and the server's
 * words, and the pass is retried with backoff (a pod freed elsewhere in the namespace wakes no
 * pass of this set). The other pods of the pass carry on; a refusal never stops the pass.
 */
import { apiErrorOf } from "../kube/mod.ts";
import { CONDITION_TYPE_READY } from "../common/k8s/condition.ts";
import { emit, type SetPass } from "./pass.ts";
import { serverMessage } from "./validate.ts";

/** Ready=False reason (and Warning reason) of a create a ResourceQuota refused. */
export const REASON_QUOTA_EXCEEDED = "QuotaExceeded";

/** Thrown after a pass met a quota refusal, so the set is retried with backoff. */
export class QuotaExceededError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "QuotaExceededError";
  }
}

/**
 * The quota names in a refusal, or undefined when err is not a quota refusal. The API server
 * answers 403 with "exceeded quota: <name>, requested: …" (one quota) and names each quota it
 * checked that way.
 */
export function quotaRefusal(err: unknown): { quotas: string[]; message: string } | undefined {
  const status = apiErrorOf(err)?.status;
  if (status?.code !== 403) return undefined;
  const message = status.message ?? "";
  if (!message.includes("exceeded quota")) return undefined;
  const quotas = [...message.matchAll(/exceeded quota: ([^,\s]+)/g)].map((m) => m[1]);
  return { quotas, message };
}

/**
 * When err is a quota refusal of the create of `what`: records it on the pass (one
 * QuotaExceeded problem naming every refused pod's quota, a Warning per quota and pass) and
 * returns true. Otherwise false, for the caller to handle err.
 */
export function reportQuotaRefusal(pass: SetPass, what: string, err: unknown): boolean {
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
  const existing = pass.problems.find((p) => p.reason === REASON_QUOTA_EXCEEDED);
  if (existing) {
    // One Warning per quota and pass: a scale-up of many slots meets the same quota many times.
    if (!existing.message.includes(`ResourceQuota ${names} `)) {
      existing.message += `; ${message}`;
      emit(pass, "Warning", REASON_QUOTA_EXCEEDED, message);
    }
    return true;
  }
  pass.problems.push({ condition: CONDITION_TYPE_READY, reason: REASON_QUOTA_EXCEEDED, message });
  emit(pass, "Warning", REASON_QUOTA_EXCEEDED, message);
  return true;
}
