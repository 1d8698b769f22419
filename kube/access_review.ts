/**
 * What the API server lets this client do, asked of the API server itself: one
 * SelfSubjectRulesReview lists the rules the client holds in a namespace, and a
 * SelfSubjectAccessReview confirms each need those rules do not cover. Both are allowed to every
 * authenticated identity (the bootstrap ClusterRole system:basic-user), so the check needs no
 * permission of its own.
 *
 * A rules review is a listing, not a decision: authorizers that cannot enumerate their rules (a
 * webhook) make it incomplete, so a need it does not cover is only taken as denied once an
 * access review for exactly that request says so. A need it does cover is taken as granted
 * without another request. Rules held through a RoleBinding of the reviewed namespace are part of
 * the listing, so a need of every namespace is only as exact as that namespace is free of them.
 *
 * @module
 */
import type { Client } from "./client.ts";
import { errorMessage } from "./errors.ts";
import type { KubeObject } from "./object.ts";
import { resourceType } from "./resource.ts";

/** One request a client needs to make, in the terms RBAC authorizes it. */
export interface AccessNeed {
  /** The API verb: get, list, watch, create, update, patch, delete. */
  verb: string;
  /** API group; "" for the core group. */
  group: string;
  /** Plural resource name ("pods", "leases"). */
  resource: string;
  /** Subresource ("status", "finalizers"), if any. */
  subresource?: string;
  /**
   * The namespace the request names; "" for cluster-scoped kinds and for requests across every
   * namespace (a list or watch of all pods).
   */
  namespace: string;
  /** The one object the request names (resourceNames); absent for collections and creates. */
  name?: string;
}

/** A resource rule as RBAC and the rules review express it. */
export interface ResourceRule {
  verbs: string[];
  apiGroups?: string[];
  resources?: string[];
  resourceNames?: string[];
}

/** authorization.k8s.io/v1 SelfSubjectRulesReview. */
export interface SelfSubjectRulesReview extends KubeObject {
  spec: { namespace: string };
  status?: {
    resourceRules?: ResourceRule[];
    nonResourceRules?: { verbs: string[]; nonResourceURLs?: string[] }[];
    incomplete?: boolean;
    evaluationError?: string;
  };
}

/** authorization.k8s.io/v1 SelfSubjectAccessReview (resource requests only). */
export interface SelfSubjectAccessReview extends KubeObject {
  spec: {
    resourceAttributes?: {
      namespace?: string;
      verb?: string;
      group?: string;
      resource?: string;
      subresource?: string;
      name?: string;
    };
    nonResourceAttributes?: { path?: string; verb?: string };
  };
  status?: { allowed?: boolean; denied?: boolean; reason?: string; evaluationError?: string };
}

/** The create-only selfsubjectrulesreviews resource. */
export const SelfSubjectRulesReviews = resourceType<SelfSubjectRulesReview>({
  group: "authorization.k8s.io",
  version: "v1",
  kind: "SelfSubjectRulesReview",
  plural: "selfsubjectrulesreviews",
  namespaced: false,
  statusSubresource: false,
});

/** The create-only selfsubjectaccessreviews resource. */
export const SelfSubjectAccessReviews = resourceType<SelfSubjectAccessReview>({
  group: "authorization.k8s.io",
  version: "v1",
  kind: "SelfSubjectAccessReview",
  plural: "selfsubjectaccessreviews",
  namespaced: false,
  statusSubresource: false,
});

/** The resource as RBAC names it: "pods", "cocoonsets/status". */
export function rbacResource(need: Pick<AccessNeed, "resource" | "subresource">): string {
  return need.subresource ? `${need.resource}/${need.subresource}` : need.resource;
}

/**
 * Whether rule allows need, matched as the RBAC authorizer matches (wildcards `*` for verbs,
 * groups and resources, `*\/<subresource>`, resourceNames only for requests that name one
 * object). A rule of one namespace is given only for needs in that namespace; the caller picks
 * the rules that apply.
 */
export function ruleAllows(rule: ResourceRule, need: AccessNeed): boolean {
  const verbs = rule.verbs ?? [];
  if (!verbs.includes("*") && !verbs.includes(need.verb)) return false;
  const groups = rule.apiGroups ?? [];
  if (!groups.includes("*") && !groups.includes(need.group)) return false;
  const resource = rbacResource(need);
  const resources = rule.resources ?? [];
  const resourceMatch = resources.some((r) =>
    r === "*" || r === resource || (need.subresource !== undefined && r === `*/${need.subresource}`)
  );
  if (!resourceMatch) return false;
  const names = rule.resourceNames ?? [];
  if (names.length === 0) return true;
  return need.name !== undefined && names.includes(need.name);
}

/** The answer about one need. */
export interface AccessAnswer {
  need: AccessNeed;
  /** true granted, false denied, undefined when the API server could not be asked. */
  allowed: boolean | undefined;
  /** How it was decided: the rules review's listing, an access review, or neither (error). */
  source: "rules" | "access-review" | "error";
  /** The access review's reason, or why no answer was had. */
  reason?: string;
}

/** What reviewAccess found. */
export interface AccessReport {
  answers: AccessAnswer[];
  /** The rules review said its listing is incomplete (an authorizer that cannot list rules). */
  incomplete: boolean;
  /** Why the rules review failed or was partial (its evaluationError, or the request's error). */
  rulesError?: string;
  /** Requests sent: the rules review plus one access review per need it did not cover. */
  requests: number;
}

/** Options of reviewAccess. */
export interface ReviewOptions {
  signal?: AbortSignal;
  /**
   * When a need the listing does not cover gets an access review: "always" (default: before
   * anything is decided on it), or "if-incomplete" (only when the listing is incomplete; a
   * complete listing's gap is then taken as denied without one, for a caller that only waits
   * for a grant and acts on nothing else).
   */
  confirm?: "always" | "if-incomplete";
}

/**
 * Answers each need: one rules review in `namespace` (which must not be empty: the API server
 * refuses a rules review without one), then, in parallel, one access review per need the listed
 * rules do not allow (see ReviewOptions.confirm). A failed rules review leaves every need to an access review; a failed
 * access review leaves its need unanswered (allowed undefined).
 */
export async function reviewAccess(
  client: Pick<Client, "create">,
  needs: readonly AccessNeed[],
  namespace: string,
  opts: ReviewOptions = {},
): Promise<AccessReport> {
  let rules: ResourceRule[] = [];
  let incomplete = false;
  let rulesError: string | undefined;
  let requests = 0;
  if (needs.length > 0) {
    requests++;
    try {
      const review = await client.create(SelfSubjectRulesReviews, {
        metadata: {},
        spec: { namespace },
      }, { signal: opts.signal });
      rules = review.status?.resourceRules ?? [];
      incomplete = review.status?.incomplete === true;
      if (review.status?.evaluationError) rulesError = review.status.evaluationError;
    } catch (err) {
      if (opts.signal?.aborted) throw err;
      incomplete = true;
      rulesError = errorMessage(err);
    }
  }
  const confirm = opts.confirm !== "if-incomplete" || incomplete;
  const answers = await Promise.all(needs.map(async (need): Promise<AccessAnswer> => {
    if (rules.some((rule) => ruleAllows(rule, need))) {
      return { need, allowed: true, source: "rules" };
    }
    if (!confirm) return { need, allowed: false, source: "rules" };
    requests++;
    try {
      const review = await client.create(SelfSubjectAccessReviews, {
        metadata: {},
        spec: { resourceAttributes: attributesOf(need) },
      }, { signal: opts.signal });
      const reason = review.status?.reason || review.status?.evaluationError || undefined;
      return {
        need,
        allowed: review.status?.allowed === true,
        source: "access-review",
        ...(reason ? { reason } : {}),
      };
    } catch (err) {
      if (opts.signal?.aborted) throw err;
      return { need, allowed: undefined, source: "error", reason: errorMessage(err) };
    }
  }));
  return { answers, incomplete, ...(rulesError ? { rulesError } : {}), requests };
}

/** The resourceAttributes of an access review for need. */
function attributesOf(need: AccessNeed): SelfSubjectAccessReview["spec"]["resourceAttributes"] {
  return {
    verb: need.verb,
    group: need.group,
    resource: need.resource,
    ...(need.subresource ? { subresource: need.subresource } : {}),
    ...(need.namespace ? { namespace: need.namespace } : {}),
    ...(need.name ? { name: need.name } : {}),
  };
}
