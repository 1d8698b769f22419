/**
 * Exec credential plugins on the real control plane, with the operator started the way a
 * developer starts it: `deno task start` with a kubeconfig whose user runs a plugin found on PATH.
 *
 * - Token plugin: each run hands out the next pre-minted ServiceAccount token (bound to a Secret
 *   of its own, so deleting that Secret makes kube-apiserver refuse the token with 401). Run 1
 *   claims a short expiry: the operator runs the plugin again once it has passed. Then run 2's
 *   Secret is deleted: the next request gets 401 and the plugin runs once more. Lease renewals
 *   every 2 s and reconciles make many requests meanwhile; the plugin runs exactly three times.
 * - Certificate plugin: run 1 returns a client certificate signed by the control plane's CA that
 *   really expires after a few seconds (kube-apiserver then refuses it), run 2 a long-lived one;
 *   the operator goes on working with no restart, so new requests present the new pair.
 */
import assert from "node:assert/strict";
import { ApiClient } from "../../kube/api_client.ts";
import { Leases, Namespaces, Pods } from "../../kube/core.ts";
import { loadRestConfig, Transport } from "../../kube/transport.ts";
import { CocoonSets } from "../../common/apis/v1/resources.ts";
import { type ControlPlane, startControlPlane } from "../harness/control_plane.ts";
import { operatorKubeconfig } from "../harness/operator_identity.ts";
import { type ProcessHandle, runProcess } from "../harness/process.ts";
import { freePort, waitFor } from "../harness/wait.ts";

const repoRoot = new URL("../../", import.meta.url).pathname;
const LEASE_NAME = "cocoon-operator.cocoonset.cocoonstack.io";
const V1 = "client.authentication.k8s.io/v1";

/** The start task's command line, read from deno.json so the test cannot drift. */
async function startTask(): Promise<string[]> {
  const config = JSON.parse(await Deno.readTextFile(`${repoRoot}deno.json`));
  return String(config.tasks.start).split(/\s+/);
}

function base64(text: string): string {
  return btoa(String.fromCharCode(...new TextEncoder().encode(text)));
}

/** A kubeconfig for the plane whose user runs `command` (a bare name, found on PATH). */
function execKubeconfig(cp: ControlPlane, command: string, dir: string): string {
  return JSON.stringify({
    apiVersion: "v1",
    kind: "Config",
    clusters: [{
      name: "envtest",
      cluster: { server: cp.server, "certificate-authority-data": base64(cp.caCertPem) },
    }],
    users: [{
      name: "exec-user",
      user: {
        exec: {
          command,
          apiVersion: V1,
          interactiveMode: "Never",
          args: ["--issue"],
          // The plugin finds its material through the kubeconfig's env, not ours.
          env: [{ name: "PLUGIN_DIR", value: dir }],
          provideClusterInfo: true,
        },
      },
    }],
    contexts: [{ name: "envtest", context: { cluster: "envtest", user: "exec-user" } }],
    "current-context": "envtest",
  });
}

/** Lines of the plugin's run log. */
async function runs(dir: string): Promise<number> {
  try {
    return (await Deno.readTextFile(`${dir}/runs`)).split("\n").filter(Boolean).length;
  } catch {
    return 0;
  }
}

/** Requests the operator made, from its rest_client_requests_total. */
async function requestCount(metricsPort: number, code?: string): Promise<number> {
  const text = await (await fetch(`http://127.0.0.1:${metricsPort}/metrics`)).text();
  let n = 0;
  for (const m of text.matchAll(/^rest_client_requests_total\{([^}]*)\} (\d+)/gm)) {
    if (!code || m[1].includes(`code="${code}"`)) n += Number(m[2]);
  }
  return n;
}

/** Starts `deno task start` with the plugin folder on PATH. */
async function startOperator(
  kubeconfig: string,
  binDir: string,
): Promise<{ proc: ProcessHandle; metricsPort: number; probePort: number }> {
  const [probePort, metricsPort] = [freePort(), freePort()];
  const proc = await runProcess(await startTask(), {
    kubeconfig,
    cwd: repoRoot,
    env: {
      PATH: `${binDir}:${Deno.env.get("PATH") ?? ""}`,
      OCI_REGISTRY: "127.0.0.1:5000/cocoon",
      POD_NAMESPACE: "cocoon-system",
      PROBE_ADDR: `127.0.0.1:${probePort}`,
      METRICS_ADDR: `127.0.0.1:${metricsPort}`,
      COCOON_START_VERBOSE: "1",
    },
  });
  return { proc, metricsPort, probePort };
}

async function createCocoonSet(client: ApiClient, namespace: string, name: string) {
  return await client.create(CocoonSets, {
    apiVersion: "cocoonset.cocoonstack.io/v1",
    kind: "CocoonSet",
    metadata: { name, namespace },
    spec: { agent: { image: "ghcr.io/cocoonstack/cocoon/ubuntu:24.04" } },
  });
}

/** Waits for the CocoonSet's main agent pod, owned by it: the operator reconciled it. */
async function mainPodOf(client: ApiClient, namespace: string, uid: string | undefined) {
  return await waitFor(
    `the main agent pod of ${uid}`,
    async () => {
      const pods = await client.list(Pods, { namespace });
      return pods.items.find((p) =>
        p.metadata?.ownerReferences?.some((o) => o.uid === uid && o.controller)
      );
    },
    60_000,
    250,
  );
}

async function kubectlOk(cp: ControlPlane, args: string[], stdin?: string): Promise<string> {
  const res = await cp.kubectl(args, { stdin });
  if (res.code !== 0) throw new Error(`kubectl ${args.join(" ")}: ${res.stderr}`);
  return res.stdout;
}

Deno.test({
  name:
    "exec plugin: deno task start with a token plugin; refresh on expiry and on 401, one run each",
  sanitizeResources: false,
  sanitizeOps: false,
  async fn() {
    const cp = await startControlPlane();
    const transport = new Transport(await loadRestConfig(cp.kubeconfigPath));
    const client = new ApiClient(transport);
    const dir = await Deno.makeTempDir({ prefix: "exec-plugin-" });
    let proc: ProcessHandle | undefined;
    try {
      await client.create(Namespaces, { metadata: { name: "cocoon-system" } });
      await client.create(Namespaces, { metadata: { name: "team-exec" } });
      await operatorKubeconfig(cp); // config/rbac for cocoon-system/cocoon-operator
      // Three tokens of the operator's ServiceAccount, each bound to its own Secret.
      for (const n of [1, 2, 3]) {
        await kubectlOk(cp, [
          "create",
          "secret",
          "generic",
          `token-anchor-${n}`,
          "-n",
          "cocoon-system",
        ]);
        const token = (await kubectlOk(cp, [
          "create",
          "token",
          "cocoon-operator",
          "-n",
          "cocoon-system",
          "--bound-object-kind=Secret",
          `--bound-object-name=token-anchor-${n}`,
          "--duration=2h",
        ])).trim();
        await Deno.writeTextFile(`${dir}/token-${n}`, token, { mode: 0o600 });
      }
      // The plugin: run n returns token n; run 1 claims to expire 20 s after it was issued.
      // Its environment is only what the operator passes: PATH for date/wc/cat, PLUGIN_DIR
      // from the kubeconfig, KUBERNETES_EXEC_INFO.
      const binDir = `${dir}/bin`;
      await Deno.mkdir(binDir);
      await Deno.writeTextFile(
        `${binDir}/cocoon-test-token-plugin`,
        `#!/bin/sh
set -e
[ "$1" = "--issue" ] || { echo "unexpected args: $*" >&2; exit 64; }
printf '%s\\n' "$KUBERNETES_EXEC_INFO" > "$PLUGIN_DIR/exec-info-last"
echo run >> "$PLUGIN_DIR/runs"
n=$(wc -l < "$PLUGIN_DIR/runs" | tr -d ' ')
if [ "$n" = 1 ]; then ttl=20; else ttl=7200; fi
exp=$(date -u -d "+$ttl seconds" +%Y-%m-%dT%H:%M:%SZ)
echo "issuing token $n, expires $exp" >&2
printf '{"kind":"ExecCredential","apiVersion":"${V1}","status":{"token":"%s","expirationTimestamp":"%s"}}\\n' "$(cat "$PLUGIN_DIR/token-$n")" "$exp"
`,
        { mode: 0o755 },
      );
      const kubeconfig = `${dir}/kubeconfig`;
      await Deno.writeTextFile(kubeconfig, execKubeconfig(cp, "cocoon-test-token-plugin", dir));

      const op = await startOperator(kubeconfig, binDir);
      proc = op.proc;
      // The launcher grants exactly the plugin's absolute path to run, and PATH to pass on.
      const [, launched] = await proc.waitForOutput(/^start: (deno run .*)$/m, 30_000);
      const flags = launched.split(" ").filter((w) => w.startsWith("--allow-"));
      assert.deepEqual(flags.map((f) => f.split("=")[0]), [
        "--allow-net",
        "--allow-read",
        "--allow-env",
        "--allow-run",
      ]);
      assert.equal(flags[3], `--allow-run=${binDir}/cocoon-test-token-plugin`);
      assert.ok(flags[2].split("=")[1].split(",").includes("PATH"), flags[2]);

      await waitFor(
        "lease held",
        async () => {
          const lease = await client.get(Leases, "cocoon-system", LEASE_NAME);
          return Boolean(lease.spec?.holderIdentity);
        },
        60_000,
        250,
      );
      const first = await createCocoonSet(client, "team-exec", "first");
      await mainPodOf(client, "team-exec", first.metadata?.uid);
      assert.equal(await runs(dir), 1, proc.output.slice(-3000));
      const info = JSON.parse((await Deno.readTextFile(`${dir}/exec-info-last`)).trim());
      assert.deepEqual(info.spec, {
        interactive: false,
        cluster: { server: cp.server, "certificate-authority-data": base64(cp.caCertPem) },
      });

      // Token 1's claimed expiry passes: the next request (a Lease renewal) runs the plugin.
      await waitFor("the refresh after expiry", async () => (await runs(dir)) >= 2, 60_000, 250);
      const afterExpiry = await requestCount(op.metricsPort);

      // The API server stops taking token 2: its Secret is gone. One 401, one more run.
      await kubectlOk(cp, ["delete", "secret", "token-anchor-2", "-n", "cocoon-system"]);
      await waitFor("the refresh after a 401", async () => (await runs(dir)) >= 3, 90_000, 250);
      assert.ok(await requestCount(op.metricsPort, "401") >= 1, "the API server answered 401");
      const second = await createCocoonSet(client, "team-exec", "second");
      await mainPodOf(client, "team-exec", second.metadata?.uid);
      // Lease renewals every 2 s keep requests coming; the credential is not run for per request.
      const atEnd = await waitFor(
        "more requests with token 3",
        async () => {
          const n = await requestCount(op.metricsPort);
          return n >= afterExpiry + 10 ? n : undefined;
        },
        60_000,
        500,
      );
      assert.equal(await runs(dir), 3, `${atEnd} requests, ${await runs(dir)} plugin runs`);
      // stderr of the plugin reached the log; no token did.
      assert.match(proc.output, /issuing token 3/);
      for (const n of [1, 2, 3]) {
        const token = await Deno.readTextFile(`${dir}/token-${n}`);
        assert.ok(!proc.output.includes(token), `token ${n} appears in the operator's output`);
      }
      assert.doesNotMatch(proc.output, /NotCapable|Requires \w+ access/);
      const status = await proc.stop(20_000);
      assert.equal(status.code, 0, proc.output.slice(-3000));
    } finally {
      await proc?.stop(5_000).catch(() => {});
      transport.close();
      await cp.stop();
      await Deno.remove(dir, { recursive: true }).catch(() => {});
    }
  },
});

Deno.test({
  name: "exec plugin: a client certificate from the plugin rotates without a restart",
  sanitizeResources: false,
  sanitizeOps: false,
  async fn() {
    const cp = await startControlPlane();
    const transport = new Transport(await loadRestConfig(cp.kubeconfigPath));
    const client = new ApiClient(transport);
    const dir = await Deno.makeTempDir({ prefix: "exec-cert-plugin-" });
    let proc: ProcessHandle | undefined;
    try {
      await client.create(Namespaces, { metadata: { name: "cocoon-system" } });
      await client.create(Namespaces, { metadata: { name: "team-cert" } });
      await operatorKubeconfig(cp); // the ClusterRole
      // Certificates name their group; the group gets the operator's ClusterRole.
      await kubectlOk(
        cp,
        ["apply", "-f", "-"],
        JSON.stringify({
          apiVersion: "rbac.authorization.k8s.io/v1",
          kind: "ClusterRoleBinding",
          metadata: { name: "cocoon-operator-exec-cert" },
          roleRef: {
            apiGroup: "rbac.authorization.k8s.io",
            kind: "ClusterRole",
            name: "cocoon-operator-manager",
          },
          subjects: [{
            apiGroup: "rbac.authorization.k8s.io",
            kind: "Group",
            name: "cocoon-exec-test",
          }],
        }),
      );
      // And the Lease's namespaced Role (config/rbac/leader_election_role.yaml), which the
      // ClusterRole does not cover.
      await kubectlOk(
        cp,
        ["apply", "-f", "-"],
        JSON.stringify({
          apiVersion: "rbac.authorization.k8s.io/v1",
          kind: "RoleBinding",
          metadata: { name: "cocoon-operator-exec-cert", namespace: "cocoon-system" },
          roleRef: {
            apiGroup: "rbac.authorization.k8s.io",
            kind: "Role",
            name: "cocoon-operator-leader-election",
          },
          subjects: [{
            apiGroup: "rbac.authorization.k8s.io",
            kind: "Group",
            name: "cocoon-exec-test",
          }],
        }),
      );
      // Pair 1 really expires soon (kube-apiserver refuses it after that); pair 2 lasts.
      const shortLived = new Date(Date.now() + 25_000);
      const pairs = [
        await cp.issueClientCertificate({
          commonName: "exec-cert-1",
          organizations: ["cocoon-exec-test"],
          notAfter: shortLived,
        }),
        await cp.issueClientCertificate({
          commonName: "exec-cert-2",
          organizations: ["cocoon-exec-test"],
        }),
      ];
      for (const [i, pair] of pairs.entries()) {
        await Deno.writeTextFile(
          `${dir}/credential-${i + 1}.json`,
          JSON.stringify({
            kind: "ExecCredential",
            apiVersion: V1,
            status: {
              clientCertificateData: pair.certPem,
              clientKeyData: pair.keyPem,
              ...(i === 0 ? { expirationTimestamp: shortLived.toISOString() } : {}),
            },
          }),
          { mode: 0o600 },
        );
      }
      const binDir = `${dir}/bin`;
      await Deno.mkdir(binDir);
      await Deno.writeTextFile(
        `${binDir}/cocoon-test-cert-plugin`,
        `#!/bin/sh
set -e
echo run >> "$PLUGIN_DIR/runs"
n=$(wc -l < "$PLUGIN_DIR/runs" | tr -d ' ')
cat "$PLUGIN_DIR/credential-$n.json"
`,
        { mode: 0o755 },
      );
      const kubeconfig = `${dir}/kubeconfig`;
      await Deno.writeTextFile(kubeconfig, execKubeconfig(cp, "cocoon-test-cert-plugin", dir));

      const op = await startOperator(kubeconfig, binDir);
      proc = op.proc;
      await waitFor(
        "lease held",
        async () => {
          const lease = await client.get(Leases, "cocoon-system", LEASE_NAME);
          return Boolean(lease.spec?.holderIdentity);
        },
        60_000,
        250,
      );
      const before = await createCocoonSet(client, "team-cert", "before");
      await mainPodOf(client, "team-cert", before.metadata?.uid);
      assert.equal(await runs(dir), 1);

      await waitFor("the rotation", async () => (await runs(dir)) >= 2, 90_000, 250);
      // Pair 1 is past its notAfter now: only requests with pair 2 can succeed.
      await waitFor("pair 1 expired", () => Date.now() > shortLived.getTime() + 2_000, 60_000, 250);
      const after = await createCocoonSet(client, "team-cert", "after");
      await mainPodOf(client, "team-cert", after.metadata?.uid);
      const renewed = await client.get(Leases, "cocoon-system", LEASE_NAME);
      await waitFor(
        "a Lease renewal with pair 2",
        async () => {
          const lease = await client.get(Leases, "cocoon-system", LEASE_NAME);
          return lease.spec?.renewTime !== renewed.spec?.renewTime;
        },
        60_000,
        250,
      );
      assert.equal(await runs(dir), 2, proc.output.slice(-3000));
      assert.match(proc.output, /returned a new client certificate; new connections use it/);
      for (const pair of pairs) {
        assert.ok(!proc.output.includes(pair.keyPem.split("\n")[1]), "a key was logged");
      }
      const status = await proc.stop(20_000);
      assert.equal(status.code, 0, proc.output.slice(-3000));
    } finally {
      await proc?.stop(5_000).catch(() => {});
      transport.close();
      await cp.stop();
      await Deno.remove(dir, { recursive: true }).catch(() => {});
    }
  },
});
