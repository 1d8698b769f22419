/**
 * The sharded install against the real API server: `kubectl apply -k config/overlays/sharded`
 * passes a server-side dry run; it runs three replicas with SHARDS=auto, and its shard member Role
 * (members/) grants exactly the Lease requests kube/sharding/membership.ts sends, in
 * cocoon-system only, bound to the operator's ServiceAccount.
 */
import assert from "node:assert/strict";
import { startControlPlane } from "../harness/control_plane.ts";

const repoRoot = new URL("../../", import.meta.url).pathname;

/** kube/sharding/membership.ts: get/create/update/delete its own Lease, list all members. */
const MEMBER_REQUESTS = ["create", "delete", "get", "list", "update"];

interface Rule {
  apiGroups?: string[];
  resources?: string[];
  resourceNames?: string[];
  verbs: string[];
}

Deno.test({
  name: "manifests: the sharded overlay (3 replicas, SHARDS=auto) and the shard member Role",
  sanitizeResources: false,
  sanitizeOps: false,
  async fn() {
    const cp = await startControlPlane({ crdDir: "" });
    try {
      const ns = await cp.kubectl(["apply", "-f", `${repoRoot}config/default/namespace.yaml`]);
      assert.equal(ns.code, 0, ns.stderr);
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
          template?: { spec?: { containers?: { env?: { name: string; value?: string }[] }[] } };
        };
      }[];
      const deploy = items.find((i) => i.kind === "Deployment");
      assert.ok(deploy, "a Deployment");
      assert.equal(deploy.spec?.replicas, 3);
      const env = deploy.spec?.template?.spec?.containers?.[0]?.env ?? [];
      assert.equal(env.find((e) => e.name === "SHARDS")?.value, "auto");
      assert.ok(env.some((e) => e.name === "POD_NAME"), "POD_NAME still set (the identity)");

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
