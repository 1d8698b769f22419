/**
 * Every Kubernetes API request the operator sends, as RBAC rules: the one table config/rbac is
 * written from (tests/integration/manifests_test.ts compares them), the start-up check asks the
 * API server about (rbac_check.ts), and docs/installation.md lists.
 *
 * Each row says whether the Go original's ClusterRole grants it. Those rows are required: an
 * operator without one cannot do what the Go original does, and stops at start naming it. The
 * other rows serve one feature of this port each; without them that feature is off, with a
 * Warning, and the operator runs as the Go original would.
 *
 * @module
 */
import { LEADER_ELECTION_ID } from "./config.ts";
import { type AccessNeed, rbacResource } from "./kube/access_review.ts";

/** A feature of this port that needs more than the Go original's ClusterRole. */
export type RbacFeature = "node-checks" | "metrics-authn";

/** Which configurations send a row's requests. */
export type RbacWhen = "always" | "leader-election" | "sharded" | "secure-metrics";

/** One rule's worth of requests. */
export interface RbacPermission {
  /** API group; "" for the core group. */
  group: string;
  resource: string;
  subresource?: string;
  verbs: readonly string[];
  /**
   * cluster: every namespace (a ClusterRole and its binding); namespace: only the operator's own
   * namespace (a Role there).
   */
  scope: "cluster" | "namespace";
  /** The one object the verbs are limited to (resourceNames). */
  name?: string;
  when: RbacWhen;
  /**
   * Absent: the Go original's ClusterRole grants this and the operator does not start without
   * it. Present: only this feature needs it, and turns off without it.
   */
  feature?: RbacFeature;
  /** The code that sends the requests. */
  why: string;
}

const CRD_GROUP = "cocoonset.cocoonstack.io";
const LEASE_GROUP = "coordination.k8s.io";

/** Every rule the operator's code needs, by configuration. */
export const OPERATOR_RBAC: readonly RbacPermission[] = [
  {
    group: CRD_GROUP,
    resource: "cocoonsets",
    verbs: ["get", "list", "watch", "patch"],
    scope: "cluster",
    when: "always",
    why: "the informer cache (list, watch); merge patches of finalizers and annotations, never " +
      "update; cocoonset/finalizer.ts reads the live set (get) before the registry cleanup",
  },
  {
    group: CRD_GROUP,
    resource: "cocoonhibernations",
    verbs: ["list", "watch", "patch"],
    scope: "cluster",
    when: "always",
    why: "the informer cache (list, watch) and merge patches; never read live",
  },
  {
    group: CRD_GROUP,
    resource: "cocoonsets",
    subresource: "status",
    verbs: ["patch"],
    scope: "cluster",
    when: "always",
    why: "status merge patches",
  },
  {
    group: CRD_GROUP,
    resource: "cocoonhibernations",
    subresource: "status",
    verbs: ["patch"],
    scope: "cluster",
    when: "always",
    why: "status merge patches",
  },
  {
    group: CRD_GROUP,
    resource: "cocoonsets",
    subresource: "finalizers",
    verbs: ["update"],
    scope: "cluster",
    when: "always",
    why: "owner references with blockOwnerDeletion on the pods a set owns " +
      "(OwnerReferencesPermissionEnforcement)",
  },
  {
    group: "",
    resource: "pods",
    verbs: ["get", "list", "watch", "create", "delete", "patch"],
    scope: "cluster",
    when: "always",
    why: "the set's pods: the label-scoped cache, creates (dry runs too), deletes, merge " +
      "patches; live gets in cocoonset/create.ts, cocoonset/seat_release.ts and the " +
      "hibernation reconciler",
  },
  {
    group: "",
    resource: "nodes",
    verbs: ["list", "watch"],
    scope: "cluster",
    when: "always",
    feature: "node-checks",
    why: "the node cache of cocoonset/nodes.ts and the node watch of cocoonset/predicate.ts",
  },
  {
    group: "",
    resource: "events",
    verbs: ["create", "patch"],
    scope: "cluster",
    when: "always",
    why: "kube/events.ts: create, then merge-patch the count of a repeated Event",
  },
  {
    group: LEASE_GROUP,
    resource: "leases",
    name: LEADER_ELECTION_ID,
    verbs: ["get", "update", "watch"],
    scope: "namespace",
    when: "leader-election",
    why: "kube/leader.ts reads and renews the one Lease; standbys watch it to take over at once",
  },
  {
    group: LEASE_GROUP,
    resource: "leases",
    verbs: ["create"],
    scope: "namespace",
    when: "leader-election",
    why: "kube/leader.ts creates the Lease (a create cannot be limited by name)",
  },
  {
    group: LEASE_GROUP,
    resource: "leases",
    verbs: ["get", "list", "create", "update", "delete"],
    scope: "namespace",
    when: "sharded",
    why: "kube/sharding/membership.ts: each replica's member Lease, the quorum list of all of " +
      "them, dead members' Leases deleted",
  },
  {
    group: "authentication.k8s.io",
    resource: "tokenreviews",
    verbs: ["create"],
    scope: "cluster",
    when: "secure-metrics",
    feature: "metrics-authn",
    why: "kube/metrics_auth.ts: each scrape's bearer token",
  },
  {
    group: "authorization.k8s.io",
    resource: "subjectaccessreviews",
    verbs: ["create"],
    scope: "cluster",
    when: "secure-metrics",
    feature: "metrics-authn",
    why: "kube/metrics_auth.ts: whether the scraper may get /metrics",
  },
];

/** What each optional feature does, and what the operator does without it. */
export const RBAC_FEATURES: Record<RbacFeature, { does: string; whenOff: string }> = {
  "node-checks": {
    does: "node checks of spec.nodeName and node pools, and the node watch",
    whenOff: "spec.nodeName and pools are taken as given, as the Go original does " +
      "(no MigrationTargetUnknown or NoNodesInPool)",
  },
  "metrics-authn": {
    does: "authenticated /metrics (a TokenReview and a SubjectAccessReview per scraper)",
    whenOff: "/metrics refuses every scrape with 503 (--metrics-secure=false serves plain http)",
  },
};

/** What the configuration turns on, for the rows that depend on it. */
export interface RbacConfiguration {
  leaderElection: boolean;
  sharded: boolean;
  /** /metrics served over HTTPS with reviewed callers (--metrics-secure, the listener on). */
  secureMetrics: boolean;
}

/** The rows this configuration's requests need. */
export function permissionsFor(c: RbacConfiguration): RbacPermission[] {
  return OPERATOR_RBAC.filter((p) =>
    p.when === "always" ||
    (p.when === "leader-election" && c.leaderElection && !c.sharded) ||
    (p.when === "sharded" && c.sharded) ||
    (p.when === "secure-metrics" && c.secureMetrics)
  );
}

/** One verb of one row, as the API server is asked about it. */
export interface RbacNeed {
  permission: RbacPermission;
  need: AccessNeed;
}

/** Each verb of each row, namespaced rows in `namespace`, cluster rows across all namespaces. */
export function needsOf(permissions: readonly RbacPermission[], namespace: string): RbacNeed[] {
  return permissions.flatMap((permission) =>
    permission.verbs.map((verb) => ({
      permission,
      need: {
        verb,
        group: permission.group,
        resource: permission.resource,
        ...(permission.subresource ? { subresource: permission.subresource } : {}),
        namespace: permission.scope === "namespace" ? namespace : "",
        // A create names no object yet: RBAC cannot limit it by name.
        ...(permission.name && verb !== "create" ? { name: permission.name } : {}),
      },
    }))
  );
}

/** Kinds of the table that live outside namespaces. */
const CLUSTER_SCOPED_KINDS = new Set(["nodes", "tokenreviews", "subjectaccessreviews"]);

/** "pods", "leases.coordination.k8s.io", "cocoonsets.cocoonset.cocoonstack.io/status". */
function qualifiedResource(p: Pick<RbacPermission, "group" | "resource" | "subresource">): string {
  const base = p.group ? `${p.resource}.${p.group}` : p.resource;
  return p.subresource ? `${base}/${p.subresource}` : base;
}

/**
 * Missing needs grouped by row, one text each: `create, delete pods (all namespaces)`,
 * `get, update leases.coordination.k8s.io "cocoon-operator…" in namespace cocoon-system`.
 */
export function describeNeeds(needs: readonly RbacNeed[]): string[] {
  const byRow = new Map<RbacPermission, RbacNeed[]>();
  for (const n of needs) byRow.set(n.permission, [...(byRow.get(n.permission) ?? []), n]);
  return [...byRow.entries()].map(([p, ns]) => {
    const verbs = ns.map((n) => n.need.verb).join(", ");
    const name = p.name ? ` "${p.name}"` : "";
    const where = p.scope === "namespace"
      ? ` in namespace ${ns[0].need.namespace}`
      : CLUSTER_SCOPED_KINDS.has(p.resource)
      ? ""
      : " (all namespaces)";
    return `${verbs} ${qualifiedResource(p)}${name}${where}`;
  });
}

/**
 * The RBAC rule that grants needs, as one line of YAML (a flow mapping) to paste under a
 * ClusterRole's (or, for a namespaced row, a Role's) `rules:`.
 */
export function ruleYaml(needs: readonly RbacNeed[]): string {
  const q = (items: readonly string[]) => `[${items.map((i) => JSON.stringify(i)).join(", ")}]`;
  const byRow = new Map<RbacPermission, string[]>();
  for (const n of needs) byRow.set(n.permission, [...(byRow.get(n.permission) ?? []), n.need.verb]);
  return [...byRow.entries()].map(([p, verbs]) =>
    `- {apiGroups: ${q([p.group])}, resources: ${q([rbacResource(p)])}, ` +
    (p.name ? `resourceNames: ${q([p.name])}, ` : "") +
    `verbs: ${q(verbs)}}`
  ).join(" ");
}
