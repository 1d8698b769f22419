/**
 * Least privilege on the real control plane: main.ts under the in-cluster permission
 * set and config/rbac as kustomize builds it (tests/harness/sandboxed_operator.ts), and the
 * `deno task start` launcher with its own flags.
 *
 * - /metrics over HTTPS: no token 401, a token without the metrics-reader role 403, a token of a
 *   ServiceAccount bound to it 200 (real TokenReview and SubjectAccessReview); HTTP/1.1 only
 *   (ALPN never settles on h2);
 * - a proxy variable whose proxy the sandbox does not grant stops the operator at start with one
 *   line naming the variable, and the proxy never sees a connection;
 * - the launcher started with HTTP_PROXY / HTTPS_PROXY set runs the operator without them: it
 *   leads, and the proxy never sees a connection;
 * - a plain-http API server address is refused at start, and with the token it is refused even
 *   when plain http is allowed for the host: not one byte reaches it;
 * - a real registry with Basic auth reached over plain http off loopback: https only unless the
 *   host is allowed, and when allowed its credentials are refused, never sent.
 */
import assert from "node:assert/strict";
import { load as loadYaml } from "js-yaml";
import { ApiClient } from "../../kube/api_client.ts";
import { Leases, Namespaces } from "../../kube/core.ts";
import { loadRestConfig, Transport } from "../../kube/transport.ts";
import { createCertificateAuthority } from "../../kube/x509.ts";
import { startControlPlane } from "../harness/control_plane.ts";
import { operatorKubeconfig } from "../harness/operator_identity.ts";
import { type ProcessHandle, runProcess } from "../harness/process.ts";
import { startRegistry } from "../harness/registry.ts";
import { BASIC_PASSWORD, BASIC_USER } from "../harness/registry_htpasswd.ts";
import { newOciRegistry } from "../../snapshot/oci.ts";
import { startSandboxedOperator } from "../harness/sandboxed_operator.ts";
import { nonLoopbackAddress, startTcpRecorder } from "../harness/tcp_recorder.ts";
import { freePort, waitFor } from "../harness/wait.ts";

const repoRoot = new URL("../../", import.meta.url).pathname;
const LEASE_NAME = "cocoon-operator.cocoonset.cocoonstack.io";

/** The bearer token in a ServiceAccount kubeconfig the harness wrote. */
async function tokenOf(kubeconfig: string): Promise<string> {
  const doc = loadYaml(await Deno.readTextFile(kubeconfig)) as {
    users: { user: { token: string } }[];
  };
  return doc.users[0].user.token;
}

/**
 * The exit status, or a failure once deadlineMs passed (an operator that starts where it must
 * refuse would otherwise keep the test waiting).
 */
async function exitStatus(
  op: { proc: ProcessHandle },
  deadlineMs = 60_000,
): Promise<Deno.CommandStatus> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  try {
    return await Promise.race([
      op.proc.status,
      new Promise<never>((_, reject) => {
        timer = setTimeout(() => {
          const output = op.proc.output.slice(-2000);
          op.proc.stop(5_000).catch(() => {});
          reject(new Error(`still running after ${deadlineMs} ms:\n${output}`));
        }, deadlineMs);
      }),
    ]);
  } finally {
    clearTimeout(timer);
  }
}

/** The lines of stderr that are not JSON log records. */
function plainLines(stderr: string): string[] {
  return stderr.split("\n").filter((l) => l && !l.startsWith("{"));
}

Deno.test({
  name: "least privilege: secure metrics, proxies, plain http on the real control plane",
  sanitizeResources: false,
  sanitizeOps: false,
  async fn(t) {
    const cp = await startControlPlane();
    const registry = await startRegistry({ auth: "none" });
    const transport = new Transport(await loadRestConfig(cp.kubeconfigPath));
    const client = new ApiClient(transport);
    const ociRegistry = `${registry.host}/cocoon`;
    try {
      await client.create(Namespaces, { metadata: { name: "cocoon-system" } });
      const kubeconfig = await operatorKubeconfig(cp);

      await t.step("metrics: no token 401, no role 403, metrics-reader 200", async () => {
        const ca = await createCertificateAuthority("metrics-test-ca");
        const serving = await ca.issue({
          commonName: "metrics",
          ipAddresses: ["127.0.0.1"],
          usage: "server",
        });
        const certDir = await Deno.makeTempDir();
        await Deno.writeTextFile(`${certDir}/tls.crt`, serving.certPem);
        await Deno.writeTextFile(`${certDir}/tls.key`, serving.keyPem);
        const reader = await tokenOf(await cp.serviceAccountKubeconfig("monitoring", "scraper"));
        const nobody = await tokenOf(await cp.serviceAccountKubeconfig("monitoring", "nobody"));
        const bound = await cp.kubectl([
          "create",
          "clusterrolebinding",
          "scraper-metrics-reader",
          "--clusterrole=cocoon-operator-metrics-reader",
          "--serviceaccount=monitoring:scraper",
        ]);
        assert.equal(bound.code, 0, bound.stderr);
        const op = await startSandboxedOperator({
          cp,
          ociRegistry,
          kubeconfig,
          secureMetrics: true,
          metricsCertDir: certDir,
        });
        const https = Deno.createHttpClient({ caCerts: [ca.certPem] });
        try {
          const scrape = async (token?: string) => {
            const res = await fetch(`https://127.0.0.1:${op.metricsPort}/metrics`, {
              client: https,
              headers: token ? { Authorization: `Bearer ${token}` } : {},
            });
            return { status: res.status, body: await res.text() };
          };
          assert.equal((await scrape()).status, 401);
          assert.equal((await scrape("not-a-token")).status, 401);
          // HTTP/1.1 only without --enable-http2: offered h2 first, ALPN still settles on http/1.1.
          const conn = await Deno.connectTls({
            hostname: "127.0.0.1",
            port: op.metricsPort,
            caCerts: [ca.certPem],
            alpnProtocols: ["h2", "http/1.1"],
          });
          try {
            assert.equal((await conn.handshake()).alpnProtocol, "http/1.1");
          } finally {
            conn.close();
          }
          const forbidden = await scrape(nobody);
          assert.equal(forbidden.status, 403, forbidden.body);
          assert.match(forbidden.body, /system:serviceaccount:monitoring:nobody/);
          const ok = await waitFor(
            "the leader's metrics",
            async () => {
              const r = await scrape(reader);
              assert.equal(r.status, 200, r.body);
              return r.body.includes(`leader_election_master_status{name="${LEASE_NAME}"} 1`)
                ? r
                : undefined;
            },
            30_000,
            200,
          );
          // The reviews themselves were allowed by config/rbac: no 403 to the operator at all.
          assert.doesNotMatch(ok.body, /^rest_client_requests_total\{[^}]*code="403"/m);
          // Plain http on the same port is no way around it.
          await assert.rejects(() =>
            fetch(`http://127.0.0.1:${op.metricsPort}/metrics`).then((r) => r.body?.cancel())
          );
          // cert-manager renews the Secret: the running operator serves the new certificate.
          const renewedCa = await createCertificateAuthority("metrics-renewed-ca");
          const renewed = await renewedCa.issue({
            commonName: "metrics",
            ipAddresses: ["127.0.0.1"],
            usage: "server",
          });
          await Deno.writeTextFile(`${certDir}/tls.key`, renewed.keyPem);
          await Deno.writeTextFile(`${certDir}/tls.crt`, renewed.certPem);
          await waitFor(
            "the renewed certificate served",
            async () => {
              const client = Deno.createHttpClient({ caCerts: [renewedCa.certPem] });
              try {
                const res = await fetch(`https://127.0.0.1:${op.metricsPort}/metrics`, {
                  client,
                  headers: { Authorization: `Bearer ${reader}` },
                });
                await res.body?.cancel();
                return res.status === 200;
              } catch {
                return false;
              } finally {
                client.close();
              }
            },
            30_000,
            500,
          );
          assert.equal((await op.stop()).code, 0, op.proc.output);
        } finally {
          https.close();
          await op.stop(5_000).catch(() => {});
          await Deno.remove(certDir, { recursive: true });
        }
      });

      await t.step("a proxy variable the sandbox does not grant: exit 2 naming it", async () => {
        const proxy = startTcpRecorder();
        try {
          const op = await startSandboxedOperator({
            cp,
            ociRegistry,
            kubeconfig,
            env: { HTTPS_PROXY: `http://${proxy.host}` },
            waitReady: false,
          });
          const status = await exitStatus(op);
          assert.equal(status.code, 2, op.proc.output);
          assert.deepEqual(plainLines(op.proc.stderr), [
            `cocoon-operator: missing Deno permissions: --allow-net=${proxy.host} (HTTPS_PROXY); ` +
            "the permission set is described in docs/configuration.md",
          ]);
          assert.equal(proxy.connections(), 0);
        } finally {
          proxy.close();
        }
      });

      await t.step(
        "the launcher drops the proxy: the operator leads, the proxy sees nothing",
        async () => {
          const proxy = startTcpRecorder();
          const config = JSON.parse(await Deno.readTextFile(`${repoRoot}deno.json`));
          const task = String(config.tasks.start).split(/\s+/);
          const probePort = freePort();
          const proc = await runProcess(task, {
            kubeconfig,
            cwd: repoRoot,
            env: {
              OCI_REGISTRY: ociRegistry,
              POD_NAMESPACE: "cocoon-system",
              PROBE_ADDR: `127.0.0.1:${probePort}`,
              METRICS_ADDR: "0",
              HTTP_PROXY: proxy.host,
              HTTPS_PROXY: `http://${proxy.host}`,
              ALL_PROXY: `http://${proxy.host}`,
              COCOON_START_VERBOSE: "1",
              // The deno CLI running the task checks for a newer release on its own (through
              // the proxy): that is the CLI the test starts, not the operator, so it is off.
              DENO_NO_UPDATE_CHECK: "1",
            },
          });
          try {
            const [, launched] = await proc.waitForOutput(/^start: (deno run .*)$/m);
            assert.ok(!launched.includes(proxy.host.split(":")[1]), launched);
            // One line names what was dropped, before the operator starts.
            await proc.waitForOutput(
              /^start: HTTP_PROXY, HTTPS_PROXY, ALL_PROXY not passed to the operator \(/m,
            );
            await waitFor(
              "lease held",
              async () => {
                const l = await client.get(Leases, "cocoon-system", LEASE_NAME);
                return l.spec?.holderIdentity?.includes("_") ? l : undefined;
              },
              30_000,
              200,
            );
            assert.equal(
              proxy.connections(),
              0,
              `the proxy saw: ${JSON.stringify(proxy.received())}`,
            );
            assert.equal((await proc.stop(20_000)).code, 0, proc.output);
          } finally {
            await proc.stop(5_000).catch(() => {});
            proxy.close();
          }
        },
      );

      await t.step("a plain-http API server: refused, and never sent the token", async () => {
        // Off loopback, or the credentials rule would allow it; a machine without such an
        // address cannot show this, and says so.
        const address = nonLoopbackAddress();
        if (!address) {
          console.error("least privilege: no non-loopback IPv4 address here; step skipped");
          return;
        }
        // Relays to the real API server; a client speaking plain http to it would show its
        // request, Authorization header included, in what the relay received.
        const relay = startTcpRecorder({ hostname: address, forwardTo: new URL(cp.server).host });
        const dir = await Deno.makeTempDir();
        try {
          const token = await tokenOf(kubeconfig);
          const plain = `${dir}/plain-http.kubeconfig`;
          await Deno.writeTextFile(
            plain,
            JSON.stringify({
              "current-context": "c",
              clusters: [{ name: "c", cluster: { server: `http://${relay.host}` } }],
              users: [{ name: "u", user: { token } }],
              contexts: [{ name: "c", context: { cluster: "c", user: "u" } }],
            }),
          );
          for (
            const [args, message] of [
              [[], /is plain http: use https, or allow it with --allow-plain-http=/],
              [[`--allow-plain-http=${relay.host}`], /refusing to send credentials/],
            ] as const
          ) {
            const op = await startSandboxedOperator({
              cp,
              ociRegistry,
              kubeconfig: plain,
              args: [...args],
              waitReady: false,
            });
            const status = await exitStatus(op);
            assert.equal(status.code, 2, op.proc.output);
            const lines = plainLines(op.proc.stderr);
            assert.equal(lines.length, 1, op.proc.stderr);
            assert.match(lines[0], message);
            assert.ok(!lines[0].includes(token));
          }
          assert.equal(relay.connections(), 0);
          assert.equal(relay.received(), "");
        } finally {
          relay.close();
          await Deno.remove(dir, { recursive: true });
        }
      });

      await t.step(
        "a registry over plain http off loopback never gets its credentials",
        async () => {
          const address = nonLoopbackAddress();
          if (!address) {
            console.error("least privilege: no non-loopback IPv4 address here; step skipped");
            return;
          }
          const basic = await startRegistry({ auth: "basic" });
          const relay = startTcpRecorder({ hostname: address, forwardTo: basic.host });
          const dir = await Deno.makeTempDir();
          try {
            await Deno.writeTextFile(
              `${dir}/config.json`,
              JSON.stringify({
                auths: { [relay.host]: { auth: btoa(`${BASIC_USER}:${BASIC_PASSWORD}`) } },
              }),
            );
            const env = { DOCKER_CONFIG: dir };
            // Not allowed by name: https only, so the plain-http registry does not answer.
            const implicit = newOciRegistry(`${relay.host}/cocoon`, { env, timeoutMs: 10_000 });
            await assert.rejects(() => implicit.hasManifest("vm", "hibernate"));
            // Allowed by name: plain http, but the credentials stay home.
            const allowed = newOciRegistry(`${relay.host}/cocoon`, {
              env,
              timeoutMs: 10_000,
              plainHttpHosts: [relay.host],
            });
            await assert.rejects(
              () => allowed.hasManifest("vm", "hibernate"),
              /refusing to send docker-config credentials|refusing to send .* credentials to .* over plain http/,
            );
            assert.ok(relay.connections() > 0, "the relay was never used");
            assert.doesNotMatch(relay.received(), /authorization:/i);
            assert.ok(!relay.received().includes(btoa(`${BASIC_USER}:${BASIC_PASSWORD}`)));
            // Through loopback the same registry and credentials work: nothing leaves the machine.
            const local = newOciRegistry(`${basic.host}/cocoon`, {
              env: { DOCKER_CONFIG: dir },
              timeoutMs: 10_000,
            });
            await Deno.writeTextFile(
              `${dir}/config.json`,
              JSON.stringify({
                auths: { [basic.host]: { auth: btoa(`${BASIC_USER}:${BASIC_PASSWORD}`) } },
              }),
            );
            assert.equal(await local.hasManifest("vm", "hibernate"), false);
          } finally {
            relay.close();
            await basic.stop();
            await Deno.remove(dir, { recursive: true });
          }
        },
      );
    } finally {
      transport.close();
      await registry.stop();
      await cp.stop();
    }
  },
});
