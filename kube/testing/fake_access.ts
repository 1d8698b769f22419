/**
 * RBAC for the FakeClient: the rules its one identity holds, every request checked against them
 * (403 Forbidden as the API server answers), and the two self-reviews answered from them as the
 * API server does: a SelfSubjectRulesReview lists the cluster rules plus the rules of the
 * reviewed namespace, a SelfSubjectAccessReview decides one request. Rules of an authorizer that
 * cannot list them (a webhook) answer access reviews but are missing from the listing, which
 * then says it is incomplete.
 *
 * @module
 */
import {
  type AccessNeed,
  type ResourceRule,
  ruleAllows,
  type SelfSubjectAccessReview,
  SelfSubjectAccessReviews,
  type SelfSubjectRulesReview,
  SelfSubjectRulesReviews,
} from "../access_review.ts";
import { ApiError, newApiError } from "../errors.ts";
import type { KubeObject } from "../object.ts";
import { resourceId, type ResourceType } from "../resource.ts";

/** The identity's rules; see the module doc. */
export interface FakeAccess {
  /** Rules held in every namespace and for cluster-scoped kinds (ClusterRoleBindings). */
  clusterRules: ResourceRule[];
  /** Rules held in one namespace only (RoleBindings), by namespace. */
  namespaceRules?: Record<string, ResourceRule[]>;
  /**
   * Rules a webhook-like authorizer grants: access reviews and requests are allowed by them, the
   * rules review does not list them and answers incomplete.
   */
  unlistedRules?: ResourceRule[];
}

/** The user name in Forbidden messages. */
const USER = "system:serviceaccount:fake:fake";

/** Whether rt is one of the self-review kinds (answered, never stored). */
export function isSelfReview(rt: ResourceType): boolean {
  return resourceId(rt) === resourceId(SelfSubjectRulesReviews) ||
    resourceId(rt) === resourceId(SelfSubjectAccessReviews);
}

/** Whether access lets the identity make request. */
export function allows(access: FakeAccess, need: AccessNeed): boolean {
  const rules = [
    ...access.clusterRules,
    ...(need.namespace ? access.namespaceRules?.[need.namespace] ?? [] : []),
    ...(access.unlistedRules ?? []),
  ];
  return rules.some((r) => ruleAllows(r, need));
}

/** The 403 the API server gives a request the rules do not allow. */
export function forbidden(rt: ResourceType, need: AccessNeed): ApiError {
  const scope = need.namespace ? `in the namespace "${need.namespace}"` : "at the cluster scope";
  const resource = need.subresource ? `${need.resource}/${need.subresource}` : need.resource;
  return newApiError(
    403,
    "Forbidden",
    { resource: resourceId(rt), namespace: need.namespace || undefined, name: need.name },
    `${resourceId(rt)}${need.name ? ` "${need.name}"` : ""} is forbidden: User "${USER}" ` +
      `cannot ${need.verb} resource "${resource}" in API group "${need.group}" ${scope}`,
  );
}

/** Everything allowed: what an identity without configured access holds. */
const ALL: ResourceRule[] = [{ verbs: ["*"], apiGroups: ["*"], resources: ["*"] }];

/** The answer to a self-review create: the object with its status filled in. */
export function answerSelfReview(
  rt: ResourceType,
  sent: KubeObject,
  access: FakeAccess | undefined,
): KubeObject {
  if (resourceId(rt) === resourceId(SelfSubjectRulesReviews)) {
    const review = sent as SelfSubjectRulesReview;
    const namespace = review.spec?.namespace ?? "";
    if (!namespace) {
      throw newApiError(400, "BadRequest", { resource: resourceId(rt) }, "no namespace on request");
    }
    const unlisted = (access?.unlistedRules ?? []).length > 0;
    return {
      ...review,
      status: {
        resourceRules: access
          ? [...access.clusterRules, ...(access.namespaceRules?.[namespace] ?? [])]
          : ALL,
        nonResourceRules: [],
        incomplete: unlisted,
        ...(unlisted ? { evaluationError: "webhook authorizer does not list rules" } : {}),
      },
    } as SelfSubjectRulesReview;
  }
  const review = sent as SelfSubjectAccessReview;
  const attrs = review.spec?.resourceAttributes ?? {};
  const need: AccessNeed = {
    verb: attrs.verb ?? "",
    group: attrs.group ?? "",
    resource: attrs.resource ?? "",
    ...(attrs.subresource ? { subresource: attrs.subresource } : {}),
    namespace: attrs.namespace ?? "",
    ...(attrs.name ? { name: attrs.name } : {}),
  };
  const allowed = access ? allows(access, need) : true;
  const answered: SelfSubjectAccessReview = {
    ...review,
    status: { allowed, ...(allowed ? {} : { reason: "no rule allows it" }) },
  };
  return answered;
}
