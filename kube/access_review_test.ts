import assert from "node:assert/strict";
import { type AccessNeed, reviewAccess, ruleAllows } from "./access_review.ts";
import { newApiError } from "./errors.ts";
import { Pods } from "./core.ts";
import { FakeClient } from "./testing/mod.ts";

const listPods: AccessNeed = { verb: "list", group: "", resource: "pods", namespace: "" };
const listNodes: AccessNeed = { verb: "list", group: "", resource: "nodes", namespace: "" };
const getLease: AccessNeed = {
  verb: "get",
  group: "coordination.k8s.io",
  resource: "leases",
  namespace: "ops",
  name: "the-lease",
};

Deno.test("rules match as RBAC matches: wildcards, */subresource, resourceNames", () => {
  assert.ok(ruleAllows({ verbs: ["*"], apiGroups: ["*"], resources: ["*"] }, listPods));
  assert.ok(ruleAllows({ verbs: ["list"], apiGroups: [""], resources: ["pods"] }, listPods));
  assert.ok(!ruleAllows({ verbs: ["get"], apiGroups: [""], resources: ["pods"] }, listPods));
  assert.ok(!ruleAllows({ verbs: ["list"], apiGroups: ["apps"], resources: ["pods"] }, listPods));
  assert.ok(!ruleAllows({ verbs: ["list"], apiGroups: [""], resources: ["nodes"] }, listPods));
  const status: AccessNeed = { ...listPods, verb: "patch", subresource: "status" };
  assert.ok(!ruleAllows({ verbs: ["patch"], apiGroups: [""], resources: ["pods"] }, status));
  assert.ok(ruleAllows({ verbs: ["patch"], apiGroups: [""], resources: ["pods/status"] }, status));
  assert.ok(ruleAllows({ verbs: ["patch"], apiGroups: [""], resources: ["*/status"] }, status));
  assert.ok(!ruleAllows({ verbs: ["patch"], apiGroups: [""], resources: ["*/scale"] }, status));
  const named = {
    verbs: ["get"],
    apiGroups: ["coordination.k8s.io"],
    resources: ["leases"],
    resourceNames: ["the-lease"],
  };
  assert.ok(ruleAllows(named, getLease));
  assert.ok(!ruleAllows(named, { ...getLease, name: "another" }));
  // A rule limited by name does not cover a request that names no object (a list, a create).
  assert.ok(!ruleAllows(named, { ...getLease, name: undefined }));
});

Deno.test("a complete rules review that covers every need: one request, no access review", async () => {
  const fake = new FakeClient({
    access: {
      clusterRules: [{ verbs: ["list"], apiGroups: [""], resources: ["pods", "nodes"] }],
      namespaceRules: {
        ops: [{ verbs: ["get"], apiGroups: ["coordination.k8s.io"], resources: ["leases"] }],
      },
    },
  });
  const report = await reviewAccess(fake, [listPods, listNodes, getLease], "ops");
  assert.deepEqual(report.answers.map((a) => [a.allowed, a.source]), [
    [true, "rules"],
    [true, "rules"],
    [true, "rules"],
  ]);
  assert.equal(report.requests, 1);
  assert.equal(report.incomplete, false);
  assert.deepEqual(fake.actions.map((a) => `${a.verb} ${a.resource.plural}`), [
    "create selfsubjectrulesreviews",
  ]);
  assert.deepEqual((fake.actions[0].object as { spec?: unknown } | undefined)?.spec, {
    namespace: "ops",
  });
});

Deno.test("a need the listing lacks is confirmed by an access review before it counts as denied", async () => {
  const fake = new FakeClient({
    access: { clusterRules: [{ verbs: ["list"], apiGroups: [""], resources: ["pods"] }] },
  });
  const report = await reviewAccess(fake, [listPods, listNodes], "ops");
  assert.deepEqual(report.answers.map((a) => [a.need.resource, a.allowed, a.source]), [
    ["pods", true, "rules"],
    ["nodes", false, "access-review"],
  ]);
  assert.equal(report.requests, 2);
  const ssar = fake.actions.find((a) => a.resource.plural === "selfsubjectaccessreviews");
  assert.deepEqual(
    (ssar?.object as { spec: unknown } | undefined)?.spec,
    { resourceAttributes: { verb: "list", group: "", resource: "nodes" } },
  );
});

Deno.test("an incomplete listing (a webhook authorizer): the access review grants what it left out", async () => {
  const fake = new FakeClient({
    access: {
      clusterRules: [{ verbs: ["list"], apiGroups: [""], resources: ["pods"] }],
      unlistedRules: [{ verbs: ["list", "watch"], apiGroups: [""], resources: ["nodes"] }],
    },
  });
  const report = await reviewAccess(fake, [listPods, listNodes], "ops");
  assert.equal(report.incomplete, true);
  assert.deepEqual(report.answers.map((a) => [a.need.resource, a.allowed, a.source]), [
    ["pods", true, "rules"],
    ["nodes", true, "access-review"],
  ]);
});

Deno.test("a rules review that fails leaves every need to an access review; a failed one to nobody", async () => {
  const fake = new FakeClient();
  fake.addReactor((a) =>
    a.resource.plural === "selfsubjectrulesreviews"
      ? newApiError(500, "InternalError", { resource: "selfsubjectrulesreviews" }, "boom")
      : undefined
  );
  let failNodes = true;
  fake.addReactor((a) => {
    const spec = (a.object as { spec?: { resourceAttributes?: { resource?: string } } })?.spec;
    return failNodes && spec?.resourceAttributes?.resource === "nodes"
      ? newApiError(503, "ServiceUnavailable", { resource: "selfsubjectaccessreviews" }, "busy")
      : undefined;
  });
  const report = await reviewAccess(fake, [listPods, listNodes], "ops");
  assert.equal(report.incomplete, true);
  assert.match(report.rulesError ?? "", /boom/);
  assert.deepEqual(report.answers.map((a) => [a.need.resource, a.allowed, a.source]), [
    ["pods", true, "access-review"],
    ["nodes", undefined, "error"],
  ]);
  failNodes = false;
  const again = await reviewAccess(fake, [listNodes], "ops");
  assert.deepEqual(again.answers.map((a) => [a.allowed, a.source]), [[true, "access-review"]]);
});

Deno.test("the fake answers 403 to a request its rules do not allow, as the API server does", async () => {
  const fake = new FakeClient({
    access: { clusterRules: [{ verbs: ["get"], apiGroups: [""], resources: ["pods"] }] },
  });
  fake.seed(Pods, { metadata: { name: "p", namespace: "ns" } });
  await fake.get(Pods, "ns", "p");
  await assert.rejects(
    () => fake.list(Pods),
    /pods is forbidden: User "[^"]+" cannot list resource "pods" in API group "" at the cluster scope/,
  );
});

Deno.test("confirm if-incomplete: a complete listing's gap is denied without an access review", async () => {
  const fake = new FakeClient({
    access: { clusterRules: [{ verbs: ["list"], apiGroups: [""], resources: ["pods"] }] },
  });
  const complete = await reviewAccess(fake, [listPods, listNodes], "ops", {
    confirm: "if-incomplete",
  });
  assert.deepEqual(complete.answers.map((a) => [a.need.resource, a.allowed, a.source]), [
    ["pods", true, "rules"],
    ["nodes", false, "rules"],
  ]);
  assert.equal(complete.requests, 1);
  fake.access = {
    ...fake.access!,
    unlistedRules: [{ verbs: ["list"], apiGroups: [""], resources: ["nodes"] }],
  };
  const incomplete = await reviewAccess(fake, [listNodes], "ops", { confirm: "if-incomplete" });
  assert.deepEqual(incomplete.answers.map((a) => [a.allowed, a.source]), [[true, "access-review"]]);
});
