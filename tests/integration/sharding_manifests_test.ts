/**
 * The sharded install against the real API server: `kubectl apply -k config/overlays/sharded`
 * passes a server-side dry run; it runs three replicas with SHARDS=auto, spread over nodes, with
 * a PodDisruptionBudget letting one go at a time (config/ha), and its shard member Role
 * (members/) grants exactly the Lease requests kube/sharding/membership.ts sends, in
 * cocoon-system only, bound to the operator's ServiceAccount.
 */
import assert from "node:assert/strict";
import { startControlPlane } from "../harness/control_plane.ts";
import { applyNamespaces, repoRoot } from "../harness/kustomize.ts";

/** kube/sharding/membership.ts: get/create/update/delete its own Lease, list all members. */
const MEMBER_REQUESTS = ["create", "delete", "get", "list", "update"];

interface Rule {
  apiGroups?: string[];
  resources?: string[];
  resourceNames?: string[];
  verbs: string[];
}

Deno.test({
  name:
    "manifests: the sharded overlay (3 replicas, SHARDS=auto, disruption budget, spread) and the shard member Role",
  sanitizeResources: false,
  sanitizeOps: false,
  async fn() {
    const cp = await startControlPlane({ crdDir: "" });
    try {
      await applyNamespaces(cp, "config/default");
      const r = await cp.kubectl([
        "apply",
        "--dry-run=server",
        "--server-side",
        "--field-manager=cocoon-install-test",
        "-o",
        "json",
        "-k",
        `${repoRoot}config/overlays/sharded`,
      ]);
      assert.equal(r.code, 0, r.stderr);
      const list = JSON.parse(r.stdout) as { items?: unknown[] };
      const items = (list.items ?? [list]) as {
        kind: string;
        metadata: { name: string; namespace?: string };
        rules?: Rule[];
        roleRef?: { kind: string; name: string };
        subjects?: { kind: string; name: string; namespace?: string }[];
        spec?: {
          replicas?: number;
          maxUnavailable?: number;
          selector?: { matchLabels?: Record<string, string> };
          template?: {
            metadata?: { labels?: Record<string, string> };
            spec?: {
              terminationGracePeriodSeconds?: number;
              topologySpreadConstraints?: {
                topologyKey: string;
                whenUnsatisfiable: string;
                maxSkew: number;
                labelSelector?: { matchLabels?: Record<string, string> };
                matchLabelKeys?: string[];
              }[];
              containers?: { env?: { name: string; value?: string }[] }[];
            };
          };
        };
      }[];
      const deploy = items.find((i) => i.kind === "Deployment");
      assert.ok(deploy, "a Deployment");
      assert.equal(deploy.spec?.replicas, 3);
      const env = deploy.spec?.template?.spec?.containers?.[0]?.env ?? [];
      assert.equal(env.find((e) => e.name === "SHARDS")?.value, "auto");
      assert.ok(env.some((e) => e.name === "POD_NAME"), "POD_NAME still set (the identity)");

      // Several replicas: spread over nodes (soft, so fewer nodes than replicas still run all
      // three), a budget that lets a node drain take one at a time, and the grace a leaving
      // member needs to hand its namespaces back.
      const podLabels = deploy.spec?.template?.metadata?.labels ?? {};
      const selects = (selector?: Record<string, string>) =>
        Object.entries(selector ?? {}).every(([k, v]) => podLabels[k] === v);
      const pod = deploy.spec?.template?.spec;
      assert.deepEqual(
        pod?.topologySpreadConstraints?.map((c) => [c.topologyKey, c.whenUnsatisfiable, c.maxSkew]),
        [["kubernetes.io/hostname", "ScheduleAnyway", 1]],
      );
      const spread = pod?.topologySpreadConstraints?.[0];
      assert.ok(selects(spread?.labelSelector?.matchLabels), "the spread counts these pods");
      assert.deepEqual(spread?.matchLabelKeys, ["pod-template-hash"]);
      assert.ok((pod?.terminationGracePeriodSeconds ?? 30) >= 60);
      const pdb = items.find((i) => i.kind === "PodDisruptionBudget");
      assert.ok(pdb, "a PodDisruptionBudget");
      assert.equal(pdb.metadata.namespace, "cocoon-system");
      assert.equal(pdb.spec?.maxUnavailable, 1);
      assert.ok(selects(pdb.spec?.selector?.matchLabels), "the budget selects the replicas");

      const role = items.find((i) =>
        i.kind === "Role" && i.metadata.name === "cocoon-operator-shard-member"
      );
      assert.ok(role, "the shard member Role");
      assert.equal(role.metadata.namespace, "cocoon-system");
      assert.deepEqual(role.rules?.map((rule) => [rule.apiGroups, rule.resources]), [[
        ["coordination.k8s.io"],
        ["leases"],
      ]]);
      assert.deepEqual(role.rules?.flatMap((rule) => rule.verbs).sort(), MEMBER_REQUESTS);
      const binding = items.find((i) =>
        i.kind === "RoleBinding" && i.metadata.name === "cocoon-operator-shard-member"
      );
      assert.ok(binding, "its RoleBinding");
      assert.equal(binding.metadata.namespace, "cocoon-system");
      assert.deepEqual(binding.roleRef?.name, "cocoon-operator-shard-member");
      assert.deepEqual(binding.subjects, [{
        kind: "ServiceAccount",
        name: "cocoon-operator",
        namespace: "cocoon-system",
      }]);
    } finally {
      await cp.stop();
    }
  },
});
