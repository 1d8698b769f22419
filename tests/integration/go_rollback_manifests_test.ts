/**
 * This tree applied over an install of the Go original, on the real API server, as a user
 * swapping builds would (tests/harness/go_install.ts stands up the Go install from this
 * project's fixture of its manifests):
 *
 * - RBAC: after `kubectl apply -k config/default` the Go original's ClusterRole is untouched and
 *   every verb it grants is still granted to the ServiceAccount, so a `kubectl rollout undo` to
 *   the Go image keeps working; this tree's own rules come in under their own name;
 * - Pod Security: the namespace this tree leaves behind admits the Go original's pod (no
 *   securityContext) in a server-side dry run, while this tree's pod passes `restricted` without
 *   a warning;
 * - OCI_REGISTRY: what a user set with `kubectl set env` after each kind of apply, and what a
 *   later `kubectl apply -k` (client-side and server-side) keeps of it.
 */
import assert from "node:assert/strict";
import { loadAll } from "js-yaml";
import { type ControlPlane, startControlPlane } from "../harness/control_plane.ts";
import {
  GO_CLUSTER_ROLE_RULES,
  GO_RBAC_NAME,
  goPod,
  type PolicyRule,
  writeGoInstall,
} from "../harness/go_install.ts";

const repoRoot = new URL("../../", import.meta.url).pathname;
const OPERATOR_SA = "system:serviceaccount:cocoon-system:cocoon-operator";
const USER_REGISTRY = "europe-docker.pkg.dev/my-project/cocoon";

async function kubectlOk(cp: ControlPlane, args: string[], stdin?: string): Promise<string> {
  const r = await cp.kubectl(args, stdin === undefined ? undefined : { stdin });
  assert.equal(r.code, 0, `kubectl ${args.join(" ")}: ${r.stderr}`);
  return r.stdout + r.stderr;
}

/** Whether the operator's ServiceAccount may do verb on group/resource[/subresource] in ns. */
async function canI(
  cp: ControlPlane,
  verb: string,
  groupResource: string,
  namespace: string,
): Promise<boolean> {
  const [group, resource, subresource] = groupResource.split("/");
  const r = await cp.kubectl([
    "auth",
    "can-i",
    `--as=${OPERATOR_SA}`,
    verb,
    group ? `${resource}.${group}` : resource,
    ...(subresource ? [`--subresource=${subresource}`] : []),
    "-n",
    namespace,
  ]);
  return r.stdout.trim() === "yes";
}

/** Every (verb, group/resource) a list of rules grants. */
function grants(rules: readonly PolicyRule[]): [string, string][] {
  return rules.flatMap((rule) =>
    rule.apiGroups.flatMap((group) =>
      rule.resources.flatMap((resource) =>
        rule.verbs.map((verb) => [verb, `${group}/${resource}`] as [string, string])
      )
    )
  );
}

/** The objects `kubectl kustomize <dir>` builds. */
async function built(cp: ControlPlane, dir: string): Promise<Record<string, unknown>[]> {
  const r = await cp.kubectl(["kustomize", `${repoRoot}${dir}`]);
  assert.equal(r.code, 0, r.stderr);
  return loadAll(r.stdout) as Record<string, unknown>[];
}

/** The value of OCI_REGISTRY in the Deployment's manager container; undefined when absent. */
async function ociRegistry(cp: ControlPlane): Promise<string | undefined> {
  const out = await kubectlOk(cp, [
    "-n",
    "cocoon-system",
    "get",
    "deployment",
    "cocoon-operator",
    "-o",
    "json",
  ]);
  const deploy = JSON.parse(out) as {
    spec: {
      template: {
        spec: { containers: { name: string; env?: { name: string; value?: string }[] }[] };
      };
    };
  };
  const manager = deploy.spec.template.spec.containers.find((c) => c.name === "manager");
  const entry = manager?.env?.find((e) => e.name === "OCI_REGISTRY");
  return entry ? entry.value ?? "" : undefined;
}

const setEnv = (cp: ControlPlane, value = USER_REGISTRY) =>
  kubectlOk(cp, [
    "-n",
    "cocoon-system",
    "set",
    "env",
    "deployment/cocoon-operator",
    `OCI_REGISTRY=${value}`,
  ]);

const applyOurs = (cp: ControlPlane, serverSide = false) =>
  kubectlOk(cp, [
    "apply",
    ...(serverSide ? ["--server-side"] : []),
    "-k",
    `${repoRoot}config/default`,
  ]);

Deno.test({
  name:
    "config/default over a Go install: Go's RBAC kept, Go's pod admitted, ours held to restricted",
  sanitizeResources: false,
  sanitizeOps: false,
  async fn(t) {
    const cp = await startControlPlane();
    try {
      const goDir = await writeGoInstall();
      await kubectlOk(cp, ["apply", "-k", goDir]);
      const applied = await applyOurs(cp);

      await t.step("RBAC: every verb of the Go original's role is still granted", async () => {
        const role = JSON.parse(
          await kubectlOk(cp, ["get", "clusterrole", GO_RBAC_NAME, "-o", "json"]),
        ) as { rules: PolicyRule[] };
        assert.deepEqual(
          grants(role.rules).sort(),
          grants(GO_CLUSTER_ROLE_RULES).sort(),
          "the Go original's ClusterRole was changed",
        );
        const binding = JSON.parse(
          await kubectlOk(cp, ["get", "clusterrolebinding", GO_RBAC_NAME, "-o", "json"]),
        ) as { roleRef: { name: string } };
        assert.equal(binding.roleRef.name, GO_RBAC_NAME);
        const missing: string[] = [];
        for (const [verb, resource] of grants(GO_CLUSTER_ROLE_RULES)) {
          // The Go original's own namespace (Lease, ConfigMaps) and a tenant's (everything else).
          for (const ns of ["cocoon-system", "team-a"]) {
            if (!(await canI(cp, verb, resource, ns))) missing.push(`${verb} ${resource} in ${ns}`);
          }
        }
        assert.deepEqual(missing, []);
      });

      await t.step("RBAC: this tree's rules come in under their own name", async () => {
        const role = JSON.parse(
          await kubectlOk(cp, ["get", "clusterrole", "cocoon-operator-manager", "-o", "json"]),
        ) as { rules: PolicyRule[] };
        assert.ok(grants(role.rules).some(([v, r]) => v === "list" && r === "/nodes"));
        const binding = JSON.parse(
          await kubectlOk(cp, [
            "get",
            "clusterrolebinding",
            "cocoon-operator-manager",
            "-o",
            "json",
          ]),
        ) as { roleRef: { name: string }; subjects: { name: string; namespace: string }[] };
        assert.equal(binding.roleRef.name, "cocoon-operator-manager");
        assert.deepEqual(
          binding.subjects.map((s) => `${s.namespace}/${s.name}`),
          ["cocoon-system/cocoon-operator"],
        );
        // What only this build needs is granted too (nodes, the metrics reviews).
        assert.ok(await canI(cp, "watch", "/nodes", "team-a"));
        assert.ok(await canI(cp, "create", "authentication.k8s.io/tokenreviews", "team-a"));
      });

      await t.step("Pod Security: the Go original's pod is admitted, with a warning", async () => {
        const r = await cp.kubectl(["create", "--dry-run=server", "-f", "-"], {
          stdin: JSON.stringify(goPod()),
        });
        assert.equal(r.code, 0, r.stderr);
        assert.match(r.stdout, /pod\/cocoon-operator-go created \(server dry run\)/);
        // warn=restricted says what the Go pod lacks; enforce=baseline lets it run.
        assert.match(r.stderr, /would violate PodSecurity "restricted:latest"/);
      });

      await t.step(
        "Pod Security: this tree's pod passes restricted without a warning",
        async () => {
          assert.doesNotMatch(applied, /PodSecurity/);
          const deploy = (await built(cp, "config/default")).find((o) =>
            o.kind === "Deployment"
          ) as {
            spec: { template: { metadata: Record<string, unknown>; spec: unknown } };
          };
          const pod = {
            apiVersion: "v1",
            kind: "Pod",
            metadata: {
              ...deploy.spec.template.metadata,
              name: "ours",
              namespace: "cocoon-system",
            },
            spec: deploy.spec.template.spec,
          };
          const r = await cp.kubectl(["create", "--dry-run=server", "-f", "-"], {
            stdin: JSON.stringify(pod),
          });
          assert.equal(r.code, 0, r.stderr);
          assert.doesNotMatch(r.stderr, /PodSecurity/);
        },
      );

      await t.step(
        "Pod Security: baseline is still enforced (a privileged pod is refused)",
        async () => {
          const pod = goPod("privileged") as { spec: { containers: Record<string, unknown>[] } };
          pod.spec.containers[0].securityContext = { privileged: true };
          const r = await cp.kubectl(["create", "--dry-run=server", "-f", "-"], {
            stdin: JSON.stringify(pod),
          });
          assert.notEqual(r.code, 0);
          assert.match(r.stderr, /violates PodSecurity "baseline:latest": privileged/);
        },
      );
    } finally {
      await cp.stop();
    }
  },
});

Deno.test({
  name: "OCI_REGISTRY set with kubectl set env: what each later kubectl apply -k keeps",
  sanitizeResources: false,
  sanitizeOps: false,
  async fn(t) {
    const cp = await startControlPlane();
    const fresh = async () => {
      const r = await cp.kubectl([
        "-n",
        "cocoon-system",
        "delete",
        "deployment",
        "cocoon-operator",
        "--ignore-not-found",
      ]);
      assert.equal(r.code, 0, r.stderr);
    };
    try {
      const goDir = await writeGoInstall();
      await kubectlOk(cp, ["apply", "-k", goDir]);

      await t.step("this tree, set env, this tree again (client-side): kept", async () => {
        await fresh();
        await applyOurs(cp);
        assert.equal(await ociRegistry(cp), undefined, "this tree declares no OCI_REGISTRY");
        await setEnv(cp);
        await applyOurs(cp);
        assert.equal(await ociRegistry(cp), USER_REGISTRY);
        await applyOurs(cp);
        assert.equal(await ociRegistry(cp), USER_REGISTRY);
      });

      await t.step("this tree, set env, this tree again (server-side): kept", async () => {
        await fresh();
        await applyOurs(cp, true);
        await setEnv(cp);
        await applyOurs(cp, true);
        assert.equal(await ociRegistry(cp), USER_REGISTRY);
        // And a client-side apply after the server-side ones.
        await applyOurs(cp);
        assert.equal(await ociRegistry(cp), USER_REGISTRY);
      });

      await t.step(
        "a Go install, set env, this tree (client-side): removed; set again, kept from then on",
        async () => {
          await fresh();
          await kubectlOk(cp, ["apply", "-k", goDir]);
          await setEnv(cp);
          // The Go tree's last-applied configuration names OCI_REGISTRY and this tree does not:
          // the three-way merge deletes the entry, whatever value it holds.
          await applyOurs(cp);
          assert.equal(await ociRegistry(cp), undefined);
          // The documented remedy: set it again; this tree's next applies leave it alone.
          await setEnv(cp);
          await applyOurs(cp);
          assert.equal(await ociRegistry(cp), USER_REGISTRY);
        },
      );

      await t.step("a Go install, set env, this tree (server-side): removed as well", async () => {
        await fresh();
        await kubectlOk(cp, ["apply", "-k", goDir]);
        await setEnv(cp);
        // kubectl moves the client-side apply's fields to its server-side manager first, the
        // entry included, and then drops it as no longer applied.
        await applyOurs(cp, true);
        assert.equal(await ociRegistry(cp), undefined);
      });

      await t.step("a value read before the apply and set after it survives the swap", async () => {
        await fresh();
        await kubectlOk(cp, ["apply", "-k", goDir]);
        await setEnv(cp);
        // The sequence docs/installation.md gives for a Go install.
        const before = (await kubectlOk(cp, [
          "-n",
          "cocoon-system",
          "get",
          "deployment",
          "cocoon-operator",
          "-o",
          `jsonpath={.spec.template.spec.containers[?(@.name=="manager")].env[?(@.name=="OCI_REGISTRY")].value}`,
        ])).trim();
        assert.equal(before, USER_REGISTRY);
        await applyOurs(cp);
        await setEnv(cp, before);
        assert.equal(await ociRegistry(cp), USER_REGISTRY);
        await applyOurs(cp);
        assert.equal(await ociRegistry(cp), USER_REGISTRY);
      });
    } finally {
      await cp.stop();
    }
  },
});
