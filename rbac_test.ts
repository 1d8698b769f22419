/**
 * The request table against the Go original's ClusterRole (tests/fixtures/go_original_rbac.yaml):
 * a row is required exactly when that role grants it, so an operator under it starts, and what
 * it lacks is an optional feature of this port.
 */
import assert from "node:assert/strict";
import { ruleAllows } from "./kube/access_review.ts";
import { goOriginalRules } from "./tests/fixtures/go_original_rbac.ts";
import {
  describeNeeds,
  needsOf,
  OPERATOR_RBAC,
  permissionsFor,
  RBAC_FEATURES,
  type RbacConfiguration,
  ruleYaml,
} from "./rbac.ts";

Deno.test("rbac table: a row is required exactly when the Go original's ClusterRole grants it", async () => {
  const rules = await goOriginalRules();
  const optional: string[] = [];
  for (const need of needsOf(OPERATOR_RBAC, "cocoon-system")) {
    const granted = rules.some((r) => ruleAllows(r, need.need));
    const row = `${need.need.verb} ${need.need.group}/${need.need.resource}` +
      (need.need.subresource ? `/${need.need.subresource}` : "");
    assert.equal(granted, need.permission.feature === undefined, row);
    if (!granted) optional.push(`${row} -> ${need.permission.feature}`);
  }
  assert.deepEqual(optional, [
    "list /nodes -> node-checks",
    "watch /nodes -> node-checks",
    "create authentication.k8s.io/tokenreviews -> metrics-authn",
    "create authorization.k8s.io/subjectaccessreviews -> metrics-authn",
  ]);
});

Deno.test("rbac table: each configuration needs its own rows", () => {
  const rows = (c: RbacConfiguration) =>
    permissionsFor(c).map((p) => `${p.resource}${p.name ? `/${p.name}` : ""}:${p.verbs}`);
  const plain = { leaderElection: false, sharded: false, secureMetrics: false };
  assert.ok(!rows(plain).some((r) => r.startsWith("leases") || r.includes("reviews")));
  assert.deepEqual(
    rows({ ...plain, leaderElection: true }).filter((r) => r.startsWith("leases")),
    ["leases/cocoon-operator.cocoonset.cocoonstack.io:get,update,watch", "leases:create"],
  );
  // Sharded replicas do not elect a leader: member Leases only.
  assert.deepEqual(
    rows({ ...plain, leaderElection: true, sharded: true }).filter((r) => r.startsWith("leases")),
    ["leases:get,list,create,update,delete"],
  );
  assert.deepEqual(
    rows({ ...plain, secureMetrics: true }).filter((r) => r.includes("reviews")),
    ["tokenreviews:create", "subjectaccessreviews:create"],
  );
  for (const feature of Object.keys(RBAC_FEATURES)) {
    assert.ok(OPERATOR_RBAC.some((p) => p.feature === feature), feature);
  }
});

Deno.test("rbac table: missing rules read as text and as a rule to paste", () => {
  const needs = needsOf(OPERATOR_RBAC, "cocoon-system");
  const pick = (resource: string, verbs: string[]) =>
    needs.filter((n) => n.need.resource === resource && verbs.includes(n.need.verb));
  const leases = needs.filter((n) =>
    n.need.resource === "leases" && n.permission.when === "leader-election"
  );
  assert.deepEqual(describeNeeds([...pick("pods", ["create", "delete"]), ...leases]), [
    "create, delete pods (all namespaces)",
    'get, update, watch leases.coordination.k8s.io "cocoon-operator.cocoonset.cocoonstack.io" ' +
    "in namespace cocoon-system",
    "create leases.coordination.k8s.io in namespace cocoon-system",
  ]);
  assert.deepEqual(describeNeeds(pick("nodes", ["list", "watch"])), ["list, watch nodes"]);
  assert.equal(
    ruleYaml(pick("nodes", ["list", "watch"])),
    '- {apiGroups: [""], resources: ["nodes"], verbs: ["list", "watch"]}',
  );
  assert.equal(
    ruleYaml([...pick("tokenreviews", ["create"]), ...pick("subjectaccessreviews", ["create"])]),
    '- {apiGroups: ["authentication.k8s.io"], resources: ["tokenreviews"], verbs: ["create"]} ' +
      '- {apiGroups: ["authorization.k8s.io"], resources: ["subjectaccessreviews"], ' +
      'verbs: ["create"]}',
  );
  const status = needs.filter((n) => n.need.subresource === "status");
  assert.deepEqual(describeNeeds(status), [
    "patch cocoonsets.cocoonset.cocoonstack.io/status (all namespaces)",
    "patch cocoonhibernations.cocoonset.cocoonstack.io/status (all namespaces)",
  ]);
});
