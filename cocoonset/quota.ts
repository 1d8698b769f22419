/**
 * Creates a ResourceQuota refuses: the namespace is full, not the spec wrong. The pod is not
 * created, Ready=False `QuotaExceeded` and a Warning name the quota, the other pods carry on, and
 * the pass is retried with backoff (a pod freed elsewhere wakes no pass of this set).
 */
import { apiErrorOf } from "../kube/mod.ts";
import { CONDITION_TYPE_READY } from "../common/k8s/condition.ts";
import { emit, type SetPass } from "./pass.ts";
import { serverMessage } from "./validate.ts";

/** Ready=False reason (and Warning reason) of a create a ResourceQuota refused. */
export const REASON_QUOTA_EXCEEDED = "QuotaExceeded";

/** The error of a pass that met a quota refusal: retried with backoff. */
export class QuotaExceededError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "QuotaExceededError";
  }
}

/**
 * The quotas a refusal names ("exceeded quota: <name>, requested: …" in a 403), or undefined
 * when err is not a quota refusal.
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
 * Records a quota refusal of the create of `what` on the pass (one QuotaExceeded problem naming
 * every refused pod's quota, a Warning per quota and pass); false when err is something else.
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
