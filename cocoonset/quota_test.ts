/**
 * Quota (issue 19, item 3): a dry-run refused by a ResourceQuota is not an invalid spec, so a
 * drift replacement goes ahead in the original's order (delete, then create); a create the quota
 * refuses is named in a Warning and in Ready=False QuotaExceeded and retried with backoff.
 */
import assert from "node:assert/strict";
import { newApiError, Pods } from "../kube/mod.ts";
import { CocoonSets } from "../common/apis/v1/resources.ts";
import {
  actionsOf,
  conditionOf,
  findSet,
  newTestEnv,
  podSeed,
  reconcileSet,
  setSeed,
  TEST_NAMESPACE,
} from "./_test_support.ts";
import { confirmDeletes, liveSet, refuseCreates } from "./_hardening_test_support.ts";
import { QuotaExceededError, quotaRefusal, REASON_QUOTA_EXCEEDED } from "./quota.ts";
import { REASON_INVALID_SPEC } from "./validate.ts";

Deno.test("quotaRefusal reads the quota names from the server's message, and only from a 403", () => {
  const target = { resource: "pods", namespace: "ns", name: "p" };
  const msg = 'pods "p" is forbidden: exceeded quota: q1, requested: pods=1, used: pods=3, ' +
    "limited: pods=3";
  assert.deepEqual(quotaRefusal(newApiError(403, "Forbidden", target, msg))?.quotas, ["q1"]);
  assert.equal(quotaRefusal(newApiError(403, "Forbidden", target, "RBAC says no")), undefined);
  assert.equal(quotaRefusal(newApiError(422, "Invalid", target, msg)), undefined);
});

Deno.test("a drifted toolbox in a namespace at its quota: replaced delete-then-create, the refused create is QuotaExceeded naming the quota", async () => {
  const { cs, pods } = liveSet("q", { toolboxes: ["tb"], liveToolboxes: ["tb"] });
  const env = newTestEnv([setSeed(cs), ...pods.map(podSeed)]);
  assert.deepEqual(await reconcileSet(env, "q"), {});

  await env.fake.patch(CocoonSets, TEST_NAMESPACE, "q", "merge", {
    spec: { toolboxes: [{ name: "tb", image: "img:2" }] },
  });
  refuseCreates(env, "q-tb", "quota");

  // The dry-run's 403 is no verdict on the shape: the old toolbox goes, freeing its quota.
  assert.deepEqual(await reconcileSet(env, "q"), { requeue: true });
  assert.equal(actionsOf(env, "delete", Pods, "q-tb").length, 1);
  assert.equal(env.recorder.withReason(REASON_INVALID_SPEC).length, 0, "not an invalid spec");
  await confirmDeletes(env);

  // Still full (something else took the place): the create is refused and said so.
  await assert.rejects(reconcileSet(env, "q"), QuotaExceededError);
  const ready = conditionOf(await findSet(env.fake, "q"), "Ready");
  assert.deepEqual([ready?.status, ready?.reason], ["False", REASON_QUOTA_EXCEEDED]);
  assert.match(ready?.message ?? "", /^toolbox tb: ResourceQuota q1 of namespace ns: .*exceeded/);
  const warnings = env.recorder.withReason(REASON_QUOTA_EXCEEDED);
  assert.deepEqual(warnings.map((w) => w.type), ["Warning"]);
  assert.match(warnings[0].message, /ResourceQuota q1/);
});

Deno.test("a main the quota refuses: QuotaExceeded on the status, retried with backoff", async () => {
  const { cs } = liveSet("qm", {});
  const env = newTestEnv([setSeed(cs)]);
  refuseCreates(env, "qm-0", "quota", { realOnly: true });

  await assert.rejects(reconcileSet(env, "qm"), QuotaExceededError);
  const ready = conditionOf(await findSet(env.fake, "qm"), "Ready");
  assert.equal(ready?.reason, REASON_QUOTA_EXCEEDED);
  assert.match(ready?.message ?? "", /^the main agent: ResourceQuota q1/);
});

Deno.test("sub-agents the quota refuses: the ones it admits are created, one Warning per quota and pass", async () => {
  const { cs, pods } = liveSet("qs", { replicas: 3 });
  const env = newTestEnv([setSeed(cs), ...pods.map(podSeed)]);
  refuseCreates(env, "qs-2", "quota", { realOnly: true });
  refuseCreates(env, "qs-3", "quota", { realOnly: true });

  assert.deepEqual(await reconcileSet(env, "qs"), { requeue: true }, "slot 1 was created");
  assert.ok(await env.fake.get(Pods, TEST_NAMESPACE, "qs-1"));
  assert.equal(env.recorder.withReason(REASON_QUOTA_EXCEEDED).length, 1);
});
