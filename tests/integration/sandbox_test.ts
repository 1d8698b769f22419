/**
 * The operator in its production sandbox on the real control plane: main.ts with exactly the
 * in-cluster permission set (adjusted to the test API server, registry and listener addresses;
 * see tests/harness/sandboxed_operator.ts) under exactly config/rbac's ClusterRole.
 *
 * - it starts, leads, serves probes and metrics, gets no 403, and shuts down cleanly;
 * - it reconciles a CocoonSet (owned main pod, finalizer) without a 403 or a sandbox refusal;
 * - under those flags Deno refuses a request to another loopback port (NotCapable) while the
 *   granted registry answers;
 * - a verb removed from the leader-election Role stops it at start (exit 2) with one line naming
 *   the rule, before any request is refused;
 * - OCI_REGISTRY outside the granted hosts stops the operator at start with one line naming it.
 *
 * Further end-to-end flows (CocoonHibernation, hibernate/wake with the registry) use the same
 * startSandboxedOperator and end with assertNoForbidden().
 */
import assert from "node:assert/strict";
import { ApiClient } from "../../kube/api_client.ts";
import { Leases, Namespaces, Pods } from "../../kube/core.ts";
import { CocoonSets } from "../../common/apis/v1/resources.ts";
import { loadRestConfig, Transport } from "../../kube/transport.ts";
import { startControlPlane } from "../harness/control_plane.ts";
import { operatorKubeconfig } from "../harness/operator_identity.ts";
import { startRegistry } from "../harness/registry.ts";
import { sandboxPermissionSet, startSandboxedOperator } from "../harness/sandboxed_operator.ts";
import { permissionFlags } from "../../permissions.ts";
import { freePort, waitFor } from "../harness/wait.ts";

const repoRoot = new URL("../../", import.meta.url).pathname;
const LEASE_NAME = "cocoon-operator.cocoonset.cocoonstack.io";

Deno.test({
  name: "sandbox: the operator under the in-cluster permission set and exactly config/rbac",
  sanitizeResources: false,
  sanitizeOps: false,
  async fn(t) {
    const cp = await startControlPlane();
    const registry = await startRegistry({ auth: "none" });
    const transport = new Transport(await loadRestConfig(cp.kubeconfigPath));
    const client = new ApiClient(transport);
    try {
      await client.create(Namespaces, { metadata: { name: "cocoon-system" } });
      const ociRegistry = `${registry.host}/cocoon`;
      // Installs config/rbac once; each operator below reuses the identity.
      const kubeconfig = await operatorKubeconfig(cp);

      await t.step("starts, leads, no 403, clean SIGTERM", async () => {
        const op = await startSandboxedOperator({ cp, ociRegistry, kubeconfig });
        try {
          assert.equal(op.flags.length, 3);
          assert.deepEqual(op.flags.map((f) => f.split("=")[0]), [
            "--allow-net",
            "--allow-read",
            "--allow-env",
          ]);
          assert.ok(op.flags[0].includes(registry.host));
          const lease = await waitFor(
            "lease held",
            async () => {
              const l = await client.get(Leases, "cocoon-system", LEASE_NAME);
              return l.spec?.holderIdentity ? l : undefined;
            },
            30_000,
            200,
          );
          assert.match(lease.spec!.holderIdentity!, /^cocoon-operator-test_[0-9a-f-]{36}$/);
          assert.match(
            await op.metrics(),
            new RegExp(`leader_election_master_status\\{name="${LEASE_NAME}"\\} 1`),
          );
          await op.assertNoForbidden();
          const status = await op.stop();
          assert.equal(status.code, 0, op.proc.output);
          const released = await client.get(Leases, "cocoon-system", LEASE_NAME);
          assert.equal(released.spec?.holderIdentity ?? "", "");
          assert.doesNotMatch(op.proc.output, /NotCapable|PermissionDenied|Requires \w+ access/);
        } finally {
          await op.stop(5_000).catch(() => {});
        }
      });

      await t.step(
        "reconciles a CocoonSet: main pod created and owned, finalizer, no 403",
        async () => {
          const op = await startSandboxedOperator({ cp, ociRegistry, kubeconfig });
          try {
            await client.create(Namespaces, { metadata: { name: "team-a" } });
            const cs = await client.create(CocoonSets, {
              apiVersion: "cocoonset.cocoonstack.io/v1",
              kind: "CocoonSet",
              metadata: { name: "demo", namespace: "team-a" },
              spec: { agent: { image: "ghcr.io/cocoonstack/cocoon/ubuntu:24.04" } },
            });
            const pod = await waitFor(
              "the main agent pod",
              async () => {
                const pods = await client.list(Pods, { namespace: "team-a" });
                return pods.items.find((p) =>
                  p.metadata?.ownerReferences?.some((o) =>
                    o.uid === cs.metadata?.uid && o.controller
                  )
                );
              },
              30_000,
              200,
            );
            assert.ok(pod.metadata?.name?.startsWith("demo"), pod.metadata?.name);
            const updated = await waitFor(
              "the finalizer",
              async () => {
                const got = await client.get(CocoonSets, "team-a", "demo");
                return (got.metadata?.finalizers?.length ?? 0) > 0 ? got : undefined;
              },
              30_000,
              200,
            );
            assert.ok(updated.metadata?.finalizers?.length);
            await op.assertNoForbidden();
            assert.doesNotMatch(op.proc.output, /NotCapable|Requires \w+ access/);
          } finally {
            await op.stop(5_000).catch(() => {});
          }
        },
      );

      await t.step("Deno refuses another loopback port under the same flags", async () => {
        const flags = permissionFlags(sandboxPermissionSet({
          apiServer: new URL(cp.server).host,
          registry: registry.host,
          kubeconfig,
          probePort: freePort(),
          metricsPort: freePort(),
        }));
        const other = `http://127.0.0.1:${freePort()}/`;
        const granted = `${registry.url}/v2/`;
        const out = await new Deno.Command(Deno.execPath(), {
          args: [
            "run",
            "--no-prompt",
            ...flags,
            `${repoRoot}tests/harness/sandbox_probe.ts`,
            ociRegistry,
            other,
            granted,
          ],
          stdout: "piped",
          stderr: "piped",
        }).output();
        assert.equal(out.code, 0, new TextDecoder().decode(out.stderr));
        const { results } = JSON.parse(new TextDecoder().decode(out.stdout));
        assert.deepEqual(results, { [other]: "NotCapable", [granted]: "ok" });
      });

      await t.step(
        "a verb missing from the leader-election Role: exit 2 at start, one line naming it",
        async () => {
          const role = await Deno.readTextFile(`${repoRoot}config/rbac/leader_election_role.yaml`);
          const weakened = role.replace(
            'verbs: ["get", "watch", "update"]',
            'verbs: ["watch", "update"]',
          );
          assert.notEqual(
            weakened,
            role,
            "the leases rule in leader_election_role.yaml changed shape",
          );
          // config/rbac names no namespace: config/default puts it in cocoon-system.
          const applied = await cp.kubectl(["apply", "-n", "cocoon-system", "-f", "-"], {
            stdin: weakened,
          });
          assert.equal(applied.code, 0, applied.stderr);
          try {
            // The permission check at start finds it before any campaign is refused.
            await assert.rejects(
              () => startSandboxedOperator({ cp, ociRegistry, kubeconfig }),
              /exited with 2 before ready:[\s\S]*lacks permissions it cannot run without[^\n]*: get leases\.coordination\.k8s\.io "cocoon-operator\.cocoonset\.cocoonstack\.io" in namespace cocoon-system;/,
            );
          } finally {
            const restored = await cp.kubectl([
              "apply",
              "-n",
              "cocoon-system",
              "-f",
              `${repoRoot}config/rbac/leader_election_role.yaml`,
            ]);
            assert.equal(restored.code, 0, restored.stderr);
          }
        },
      );

      await t.step("OCI_REGISTRY outside the granted hosts: one line, exit 2", async () => {
        const elsewhere = `127.0.0.1:${freePort()}`;
        const op = await startSandboxedOperator({
          cp,
          ociRegistry,
          kubeconfig,
          env: { OCI_REGISTRY: `${elsewhere}/cocoon` },
          waitReady: false,
        });
        const status = await op.proc.status;
        assert.equal(status.code, 2, op.proc.output);
        const plain = op.proc.stderr.split("\n").filter((l) => l && !l.startsWith("{"));
        assert.deepEqual(plain, [
          `cocoon-operator: missing Deno permissions: --allow-net=${elsewhere} (OCI_REGISTRY); ` +
          "the image reaches only the registry hosts it was built with: build it with " +
          `REGISTRY_HOSTS including ${elsewhere} (docs/installation.md, "Registry hosts"); ` +
          "the permission set is described in docs/configuration.md",
        ]);
      });
    } finally {
      transport.close();
      await registry.stop();
      await cp.stop();
    }
  },
});
