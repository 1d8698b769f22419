/**
 * The install manifests against the real API server: `kubectl apply -k config/default` and the
 * sa-key overlay pass a server-side dry run (schema, defaulting and admission: the Deployment's
 * pod spec, the RBAC objects, the CRDs), and config/rbac's ClusterRole grants exactly the
 * requests the operator makes. The optional parts (components) and the namespace are in
 * manifests_parts_test.ts.
 */
import assert from "node:assert/strict";
import { startControlPlane } from "../harness/control_plane.ts";
import { OPERATOR_RBAC, type RbacPermission } from "../../rbac.ts";
import { applyNamespaces, kustomizeBuild, repoRoot } from "../harness/kustomize.ts";

/** "group/resource[/subresource]" → verbs, for the rows of rbac.ts's table that pass keep. */
function requestTable(keep: (p: RbacPermission) => boolean): Record<string, string[]> {
  const table: Record<string, string[]> = {};
  for (const p of OPERATOR_RBAC.filter(keep)) {
    const key = `${p.group}/${p.subresource ? `${p.resource}/${p.subresource}` : p.resource}`;
    table[key] = [...(table[key] ?? []), ...p.verbs];
  }
  return table;
}

/**
 * Every (API group, resource, verb) the operator's code sends cluster-wide in every
 * configuration (rbac.ts, the one table): what config/rbac/role.yaml grants.
 */
const OPERATOR_REQUESTS = requestTable((p) => p.scope === "cluster" && p.when === "always");

/**
 * kube/leader.ts: get, update and watch (by name) the one Lease, create it; in the operator's
 * namespace only (config/rbac/leader_election_role.yaml).
 */
const LEADER_ELECTION_REQUESTS = (() => {
  const rows = OPERATOR_RBAC.filter((p) => p.when === "leader-election");
  const named = rows.filter((p) => p.name);
  return {
    named: named.flatMap((p) => p.verbs).sort(),
    unnamed: rows.filter((p) => !p.name).flatMap((p) => p.verbs),
    lease: named[0].name!,
  };
})();

/** kube/metrics_auth.ts: each scrape's token and identity are reviewed by the API server. */
const METRICS_AUTH_REQUESTS = requestTable((p) => p.when === "secure-metrics");

interface Rule {
  apiGroups?: string[];
  resources?: string[];
  verbs?: string[];
  resourceNames?: string[];
  nonResourceURLs?: string[];
}

Deno.test({
  name: "manifests: dry runs of config/default and the sa-key overlay, exact ClusterRole",
  sanitizeResources: false,
  sanitizeOps: false,
  async fn(t) {
    // No CRDs preinstalled: the dry run must accept the CRDs as new objects too.
    const cp = await startControlPlane({ crdDir: "" });
    try {
      // A dry run creates nothing, so namespaced objects need their namespace to exist already.
      await applyNamespaces(cp, "config/default");
      // The RBAC objects as config/default builds them (config/rbac names no namespace).
      const built = await kustomizeBuild(cp, "config/default");
      const builtObject = (kind: string, name: string) => {
        const found = built.find((o) => o.kind === kind && o.metadata.name === name);
        assert.ok(found, `config/default builds no ${kind} ${name}`);
        return JSON.stringify(found);
      };
      for (const dir of ["config/default", "config/overlays/sa-key"]) {
        await t.step(dir, async () => {
          const r = await cp.kubectl([
            "apply",
            "--dry-run=server",
            "--server-side",
            "--field-manager=cocoon-install-test",
            "-k",
            `${repoRoot}${dir}`,
          ]);
          assert.equal(r.code, 0, r.stderr);
          for (
            const kind of [
              "namespace/cocoon-system",
              "customresourcedefinition.apiextensions.k8s.io/cocoonsets.cocoonset.cocoonstack.io",
              "customresourcedefinition.apiextensions.k8s.io/cocoonhibernations.cocoonset.cocoonstack.io",
              "serviceaccount/cocoon-operator",
              "clusterrole.rbac.authorization.k8s.io/cocoon-operator-manager",
              "clusterrolebinding.rbac.authorization.k8s.io/cocoon-operator-manager",
              "role.rbac.authorization.k8s.io/cocoon-operator-leader-election",
              "rolebinding.rbac.authorization.k8s.io/cocoon-operator-leader-election",
              "clusterrole.rbac.authorization.k8s.io/cocoon-operator-metrics-auth",
              "clusterrole.rbac.authorization.k8s.io/cocoon-operator-metrics-reader",
              "deployment.apps/cocoon-operator",
            ]
          ) {
            assert.match(
              r.stdout,
              new RegExp(`^${kind.replaceAll(".", "\\.")} .*\\(server dry run\\)$`, "m"),
            );
          }
        });
      }

      await t.step("the Deployment: locked down, OCI_REGISTRY left to the user", async () => {
        const objects = await cp.kubectl([
          "apply",
          "--dry-run=server",
          "--server-side",
          "--field-manager=cocoon-install-test",
          "-o",
          "json",
          "-k",
          `${repoRoot}config/overlays/sa-key`,
        ]);
        assert.equal(objects.code, 0, objects.stderr);
        const list = JSON.parse(objects.stdout) as { items?: unknown[] };
        const items = (list.items ?? [list]) as {
          kind: string;
          spec?: {
            replicas?: number;
            template?: {
              spec?: {
                securityContext?: Record<string, unknown>;
                containers?: {
                  image?: string;
                  args?: string[];
                  env?: { name: string; value?: string }[];
                  securityContext?: Record<string, unknown>;
                  resources?: Record<string, unknown>;
                  volumeMounts?: { mountPath: string }[];
                }[];
              };
            };
          };
        }[];
        const deploy = items.find((i) => i.kind === "Deployment");
        assert.ok(deploy, "no Deployment in the overlay");
        assert.equal(deploy.spec?.replicas, 1);
        const pod = deploy.spec?.template?.spec;
        const c = pod?.containers?.[0];
        assert.ok(c);
        assert.equal(pod?.securityContext?.runAsNonRoot, true);
        assert.deepEqual(c.securityContext, {
          allowPrivilegeEscalation: false,
          readOnlyRootFilesystem: true,
          runAsNonRoot: true,
          capabilities: { drop: ["ALL"] },
        });
        assert.ok(c.resources && "requests" in c.resources && "limits" in c.resources);
        assert.ok(c.args?.includes("--leader-elect=true"));
        // A version the kustomization sets, never :latest; metrics over HTTPS with review.
        assert.match(c.image ?? "", /^cocoon-operator:\d+\.\d+\.\d+$/);
        assert.ok(c.args?.includes("--metrics-secure=true"));
        assert.ok(c.volumeMounts?.some((m) => m.mountPath === "/var/run/secrets/metrics-cert"));
        const env = new Map((c.env ?? []).map((e) => [e.name, e.value]));
        // Not declared, so a value set with `kubectl set env` survives the next apply; unset,
        // the operator stops at start.
        assert.equal(env.has("OCI_REGISTRY"), false);
        assert.equal(env.get("GOOGLE_APPLICATION_CREDENTIALS"), "/var/run/secrets/gcp/key.json");
        assert.ok(c.volumeMounts?.some((m) => m.mountPath === "/var/run/secrets/gcp"));
      });
      await t.step("the ClusterRole grants exactly the operator's requests", async () => {
        const r = await cp.kubectl([
          "create",
          "--dry-run=server",
          "-o",
          "json",
          "-f",
          `${repoRoot}config/rbac/role.yaml`,
        ]);
        assert.equal(r.code, 0, r.stderr);
        const rules = (JSON.parse(r.stdout) as { rules: Rule[] }).rules;
        const granted: Record<string, string[]> = {};
        for (const rule of rules) {
          assert.equal(rule.resourceNames, undefined);
          assert.equal(rule.nonResourceURLs, undefined);
          assert.ok(!rule.verbs?.includes("*") && !rule.resources?.includes("*"));
          for (const group of rule.apiGroups ?? []) {
            for (const resource of rule.resources ?? []) {
              const key = `${group}/${resource}`;
              granted[key] = [...(granted[key] ?? []), ...(rule.verbs ?? [])];
            }
          }
        }
        const sorted = (o: Record<string, string[]>) =>
          Object.fromEntries(Object.entries(o).sort().map(([k, v]) => [k, [...new Set(v)].sort()]));
        assert.deepEqual(sorted(granted), sorted(OPERATOR_REQUESTS));
      });
      await t.step(
        "the leader-election Role: one Lease by name, in cocoon-system only",
        async () => {
          const r = await cp.kubectl(["create", "--dry-run=server", "-o", "json", "-f", "-"], {
            stdin: builtObject("Role", "cocoon-operator-leader-election"),
          });
          assert.equal(r.code, 0, r.stderr);
          const role = JSON.parse(r.stdout) as {
            kind: string;
            metadata: { namespace: string };
            rules: Rule[];
          };
          assert.equal(role.kind, "Role");
          assert.equal(role.metadata.namespace, "cocoon-system");
          for (const rule of role.rules) {
            assert.deepEqual(rule.apiGroups, ["coordination.k8s.io"]);
            assert.deepEqual(rule.resources, ["leases"]);
          }
          const named = role.rules.filter((rule) => rule.resourceNames);
          const unnamed = role.rules.filter((rule) => !rule.resourceNames);
          assert.deepEqual(named.map((rule) => rule.resourceNames), [[
            LEADER_ELECTION_REQUESTS.lease,
          ]]);
          assert.deepEqual(
            named.flatMap((rule) => rule.verbs).sort(),
            LEADER_ELECTION_REQUESTS.named,
          );
          assert.deepEqual(unnamed.flatMap((rule) => rule.verbs), LEADER_ELECTION_REQUESTS.unnamed);
        },
      );
      await t.step(
        "the metrics ClusterRoles: reviews for the server, /metrics for readers",
        async () => {
          const r = await cp.kubectl(["create", "--dry-run=server", "-o", "json", "-f", "-"], {
            stdin: [
              builtObject("ClusterRole", "cocoon-operator-metrics-auth"),
              builtObject("ClusterRoleBinding", "cocoon-operator-metrics-auth"),
              builtObject("ClusterRole", "cocoon-operator-metrics-reader"),
            ].join("\n"),
          });
          assert.equal(r.code, 0, r.stderr);
          // One JSON document per object, back to back.
          const items = r.stdout.split(/\n(?=\{)/).map((doc) =>
            JSON.parse(doc) as { kind: string; rules?: Rule[] }
          );
          const roles = items.filter((i) => i.kind === "ClusterRole");
          const granted: Record<string, string[]> = {};
          for (const rule of roles[0].rules ?? []) {
            for (const group of rule.apiGroups ?? []) {
              for (const resource of rule.resources ?? []) {
                granted[`${group}/${resource}`] = rule.verbs ?? [];
              }
            }
          }
          assert.deepEqual(granted, METRICS_AUTH_REQUESTS);
          assert.deepEqual(roles[1].rules, [{ nonResourceURLs: ["/metrics"], verbs: ["get"] }]);
        },
      );
      await t.step("installed: the operator may touch its own Lease and no other", async () => {
        const applied = await cp.kubectl(["apply", "-k", `${repoRoot}config/default`]);
        assert.equal(applied.code, 0, applied.stderr);
        const can = async (...args: string[]) => {
          const out = await cp.kubectl([
            "auth",
            "can-i",
            "--as=system:serviceaccount:cocoon-system:cocoon-operator",
            ...args,
          ]);
          return out.stdout.trim();
        };
        const lease = `leases.coordination.k8s.io/${LEADER_ELECTION_REQUESTS.lease}`;
        for (const verb of LEADER_ELECTION_REQUESTS.named) {
          assert.equal(await can(verb, lease, "-n", "cocoon-system"), "yes", verb);
          assert.equal(await can(verb, "leases/other", "-n", "cocoon-system"), "no", verb);
          assert.equal(await can(verb, lease, "-n", "kube-system"), "no", verb);
        }
        assert.equal(await can("create", "leases", "-n", "cocoon-system"), "yes");
        assert.equal(await can("create", "leases", "-n", "kube-node-lease"), "no");
        assert.equal(await can("list", "leases", "-n", "cocoon-system"), "no");
        assert.equal(await can("delete", lease, "-n", "cocoon-system"), "no");
        assert.equal(await can("create", "tokenreviews.authentication.k8s.io"), "yes");
        assert.equal(await can("create", "subjectaccessreviews.authorization.k8s.io"), "yes");
        // The operator is no metrics reader itself.
        assert.equal(await can("get", "/metrics"), "no");
      });
    } finally {
      await cp.stop();
    }
  },
});
