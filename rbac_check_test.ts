/**
 * The start-up RBAC check and its re-check on the fake API server, whose identity holds the Go
 * original's ClusterRole (tests/fixtures/go_original_rbac.yaml) or a variation of it.
 */
import assert from "node:assert/strict";
import { resetLogging, setupLogging } from "./common/log.ts";
import type { ResourceRule, SelfSubjectAccessReview } from "./kube/access_review.ts";
import { newApiError } from "./kube/errors.ts";
import {
  type FakeAccess,
  FakeClient,
  FakeClock,
  flushMicrotasks,
  metricValue,
} from "./kube/testing/mod.ts";
import { OPERATOR_RBAC, permissionsFor } from "./rbac.ts";
import { checkRbac, describeMissingRequired, type RbacCheckOptions } from "./rbac_check.ts";
import { goOriginalRules } from "./tests/fixtures/go_original_rbac.ts";

const NS = "cocoon-system";
const NODES_RULE: ResourceRule = {
  verbs: ["list", "watch"],
  apiGroups: [""],
  resources: ["nodes"],
};
/** What a pod in a Deployment configures: leader election, secure metrics. */
const IN_CLUSTER = permissionsFor({ leaderElection: true, sharded: false, secureMetrics: true });

/** Log records (JSON lines) while fn runs. */
async function logsOf<T>(fn: () => Promise<T>): Promise<{ result: T; logs: LogLine[] }> {
  const lines: string[] = [];
  await setupLogging({ level: "debug", format: "json", write: (l) => lines.push(l) });
  try {
    const result = await fn();
    return { result, logs: lines.map((l) => JSON.parse(l) as LogLine) };
  } finally {
    await resetLogging();
  }
}

interface LogLine {
  level: string;
  message: string;
  properties: Record<string, unknown>;
}

function options(fake: FakeClient, more: Partial<RbacCheckOptions> = {}): RbacCheckOptions {
  return {
    client: fake,
    permissions: IN_CLUSTER,
    namespace: NS,
    recheckMs: 60_000,
    ...more,
  };
}

const reviews = (fake: FakeClient) =>
  fake.actions.filter((a) => a.resource.group === "authorization.k8s.io").map((a) =>
    a.resource.plural
  );

Deno.test("rbac check: under the Go original's ClusterRole the operator starts, two features off with one Warning each", async () => {
  const fake = new FakeClient({ access: { clusterRules: await goOriginalRules() } });
  const { result: access, logs } = await logsOf(() => checkRbac(options(fake)));

  assert.deepEqual(access.missingRequired, []);
  assert.deepEqual(access.uncheckedRequired, []);
  assert.deepEqual(access.features(), ["node-checks", "metrics-authn"]);
  assert.equal(access.enabled("node-checks"), false);
  assert.equal(access.enabled("metrics-authn"), false);
  assert.equal(
    await metricValue("cocoon_operator_rbac_feature_enabled", { feature: "node-checks" }),
    0,
  );
  assert.equal(
    await metricValue("cocoon_operator_rbac_feature_enabled", { feature: "metrics-authn" }),
    0,
  );
  // One rules review; each rule it did not list confirmed by an access review.
  assert.deepEqual(reviews(fake), [
    "selfsubjectrulesreviews",
    ...Array(4).fill("selfsubjectaccessreviews"),
  ]);

  const warnings = logs.filter((l) => l.level === "WARN");
  assert.deepEqual(warnings.map((w) => w.properties.feature), ["node-checks", "metrics-authn"]);
  assert.equal(
    warnings[0].message,
    "node-checks is off (node checks of spec.nodeName and node pools, and the node watch): the " +
      "operator's RBAC role lacks list, watch nodes; spec.nodeName and pools are taken as " +
      "given, as the Go original does (no MigrationTargetUnknown or NoNodesInPool). To turn it " +
      'on, add this rule to the operator\'s ClusterRole: - {apiGroups: [""], resources: ' +
      '["nodes"], verbs: ["list", "watch"]} (checked again every 60 s, no restart needed)',
  );
  assert.match(
    warnings[1].message,
    /^metrics-authn is off .*lacks create tokenreviews\.authentication\.k8s\.io; create subjectaccessreviews\.authorization\.k8s\.io; \/metrics refuses every scrape with 503 .*- \{apiGroups: \["authentication\.k8s\.io"\], resources: \["tokenreviews"\], verbs: \["create"\]\} - \{apiGroups: \["authorization\.k8s\.io"\], resources: \["subjectaccessreviews"\], verbs: \["create"\]\}/,
  );
});

Deno.test("rbac check: a rule granted later turns its feature on without a restart, once", async () => {
  const goRules = await goOriginalRules();
  const fake = new FakeClient({ access: { clusterRules: goRules } });
  const clock = new FakeClock();
  const access = await checkRbac(options(fake, { clock }));
  let turnedOn = 0;
  access.onEnabled("node-checks", () => turnedOn++);
  const stop = new AbortController();
  const loop = access.recheck(stop.signal);
  try {
    // Nothing granted yet: a re-check is one rules review (complete: no access review to
    // confirm a gap nothing is done about), and changes nothing.
    fake.actions.length = 0;
    clock.advance(60_000);
    await waitForActions(fake, 1);
    assert.deepEqual(reviews(fake), ["selfsubjectrulesreviews"]);
    assert.equal(access.enabled("node-checks"), false);

    fake.access = { clusterRules: [...goRules, NODES_RULE] };
    fake.actions.length = 0;
    const { logs } = await logsOf(async () => {
      clock.advance(60_000);
      await waitForActions(fake, 1);
      await flushMicrotasks();
    });
    assert.equal(access.enabled("node-checks"), true);
    assert.equal(turnedOn, 1);
    assert.equal(
      await metricValue("cocoon_operator_rbac_feature_enabled", { feature: "node-checks" }),
      1,
    );
    assert.deepEqual(logs.filter((l) => l.level === "INFO").map((l) => l.message), [
      "node-checks is on: its RBAC permissions were granted (node checks of spec.nodeName and " +
      "node pools, and the node watch)",
    ]);
    assert.equal(access.enabled("metrics-authn"), false, "still off: not granted");
    // A listing that turns incomplete (a webhook added) gets the gap confirmed again.
    fake.access = { clusterRules: [...goRules, NODES_RULE], unlistedRules: [reviewsRule()] };
    fake.actions.length = 0;
    clock.advance(60_000);
    await waitForActions(fake, 3);
    assert.deepEqual(reviews(fake), [
      "selfsubjectrulesreviews",
      "selfsubjectaccessreviews",
      "selfsubjectaccessreviews",
    ]);
    await flushMicrotasks();
    assert.equal(access.enabled("metrics-authn"), true);
    assert.equal(turnedOn, 1, "told once");
    // Everything on: the loop ends.
    await loop;
    fake.actions.length = 0;
    clock.advance(600_000);
    await flushMicrotasks();
    assert.deepEqual(fake.actions, []);
  } finally {
    stop.abort();
    await loop;
  }
});

Deno.test("rbac check: a complete role costs one request at start and none after", async () => {
  const fake = new FakeClient({
    access: { clusterRules: [...await goOriginalRules(), NODES_RULE, reviewsRule()] },
  });
  const access = await checkRbac(options(fake));
  assert.deepEqual(reviews(fake), ["selfsubjectrulesreviews"]);
  assert.ok(access.enabled("node-checks") && access.enabled("metrics-authn"));
  // With nothing off the loop ends at once, having asked nothing.
  await access.recheck(new AbortController().signal);
  assert.equal(fake.actions.length, 1);
});

Deno.test("rbac check: config/rbac's rules (a Role for the Lease) grant every row", async () => {
  const fake = new FakeClient({ access: ourRbac() });
  const access = await checkRbac(options(fake));
  assert.deepEqual(access.missingRequired, []);
  assert.ok(access.enabled("node-checks") && access.enabled("metrics-authn"));
  assert.deepEqual(reviews(fake), ["selfsubjectrulesreviews"]);
});

Deno.test("rbac check: a rule the Go original needs is missing: every missing rule named in one line", async () => {
  const rules = (await goOriginalRules()).map((r) => ({ ...r }));
  const pods = rules.find((r) => r.resources?.includes("pods"))!;
  pods.verbs = pods.verbs.filter((v) => v !== "create" && v !== "delete");
  const withoutLeases = rules.filter((r) => !r.resources?.includes("leases"));
  const fake = new FakeClient({ access: { clusterRules: withoutLeases } });
  const access = await checkRbac(options(fake));
  assert.equal(
    describeMissingRequired(access.missingRequired),
    "the operator's RBAC role lacks permissions it cannot run without (the Go original's " +
      "ClusterRole grants them too): create, delete pods (all namespaces); get, update, watch " +
      'leases.coordination.k8s.io "cocoon-operator.cocoonset.cocoonstack.io" in namespace ' +
      "cocoon-system; create leases.coordination.k8s.io in namespace cocoon-system; grant them " +
      '(config/rbac, docs/installation.md "The ClusterRole") and restart',
  );
});

Deno.test("rbac check: an incomplete rules review (a webhook authorizer) is confirmed by access reviews", async () => {
  const fake = new FakeClient({
    access: { clusterRules: await goOriginalRules(), unlistedRules: [NODES_RULE] },
  });
  const access = await checkRbac(options(fake));
  assert.equal(access.enabled("node-checks"), true, "the webhook grants nodes");
  assert.equal(access.enabled("metrics-authn"), false, "nobody grants the reviews");
  const asked = fake.actions
    .filter((a) => a.resource.plural === "selfsubjectaccessreviews")
    .map((a) => (a.object as SelfSubjectAccessReview).spec.resourceAttributes!)
    .map((r) => `${r.verb} ${r.resource}`);
  assert.deepEqual(asked, [
    "list nodes",
    "watch nodes",
    "create tokenreviews",
    "create subjectaccessreviews",
  ]);
});

Deno.test("rbac check: reviews that cannot be made: required rows assumed granted, features off and re-checked", async () => {
  const fake = new FakeClient({ access: { clusterRules: [] } });
  const remove = fake.addReactor((a) =>
    a.resource.group === "authorization.k8s.io"
      ? newApiError(403, "Forbidden", { resource: a.resource.plural }, "no basic-user")
      : undefined
  );
  const { result: access, logs } = await logsOf(() => checkRbac(options(fake)));
  assert.deepEqual(access.missingRequired, [], "no exit on a review that could not be made");
  assert.ok(access.uncheckedRequired.length > 10);
  assert.equal(access.enabled("node-checks"), false);
  const warnings = logs.filter((l) => l.level === "WARN").map((l) => l.message);
  assert.equal(warnings.length, 3);
  assert.match(warnings[0], /^node-checks is off .*could not be checked \(.*no basic-user\)/);
  assert.match(warnings[2], /^could not check the RBAC permissions .*; assuming they are granted$/);

  remove();
  fake.access = ourRbac();
  await access.recheckOnce();
  assert.ok(access.enabled("node-checks") && access.enabled("metrics-authn"));
});

/** config/rbac as rules: the ClusterRole and metrics-auth role everywhere, the Lease Role in NS. */
function ourRbac(): FakeAccess {
  const cluster: ResourceRule[] = OPERATOR_RBAC.filter((p) => p.scope === "cluster").map((p) => ({
    verbs: [...p.verbs],
    apiGroups: [p.group],
    resources: [p.subresource ? `${p.resource}/${p.subresource}` : p.resource],
  }));
  return {
    clusterRules: cluster,
    namespaceRules: {
      [NS]: [
        {
          verbs: ["get", "update", "watch"],
          apiGroups: ["coordination.k8s.io"],
          resources: ["leases"],
          resourceNames: ["cocoon-operator.cocoonset.cocoonstack.io"],
        },
        { verbs: ["create"], apiGroups: ["coordination.k8s.io"], resources: ["leases"] },
      ],
    },
  };
}

function reviewsRule(): ResourceRule {
  return {
    verbs: ["create"],
    apiGroups: ["authentication.k8s.io", "authorization.k8s.io"],
    resources: ["tokenreviews", "subjectaccessreviews"],
  };
}

async function waitForActions(fake: FakeClient, n: number): Promise<void> {
  for (let i = 0; i < 100 && fake.actions.length < n; i++) await flushMicrotasks();
  assert.equal(fake.actions.length, n, JSON.stringify(reviews(fake)));
}
