/**
 * main.ts as a real process, with exactly the permission flags of `deno task start`, under the
 * operator's ServiceAccount and ClusterRole: it starts, serves probes and metrics, takes the
 * Lease, and on SIGTERM releases it and exits 0.
 */
import assert from "node:assert/strict";
import { ApiClient } from "../../kube/api_client.ts";
import { Leases, Namespaces } from "../../kube/core.ts";
import { loadRestConfig, Transport } from "../../kube/transport.ts";
import { startControlPlane } from "../harness/control_plane.ts";
import { operatorKubeconfig } from "../harness/operator_identity.ts";
import { runProcess } from "../harness/process.ts";
import { freePort, waitFor } from "../harness/wait.ts";

const repoRoot = new URL("../../", import.meta.url).pathname;

/** The permission flags of the start task, read from deno.json so the test cannot drift. */
async function startTaskFlags(): Promise<string[]> {
  const config = JSON.parse(await Deno.readTextFile(`${repoRoot}deno.json`));
  const words = String(config.tasks.start).split(/\s+/);
  return words.filter((w) => w.startsWith("--allow-") || w.startsWith("--deny-"));
}

Deno.test({
  name: "operator process: probes, metrics, lease, graceful SIGTERM",
  sanitizeResources: false,
  sanitizeOps: false,
  async fn() {
    const cp = await startControlPlane();
    const transport = new Transport(await loadRestConfig(cp.kubeconfigPath));
    const client = new ApiClient(transport);
    try {
      await client.create(Namespaces, { metadata: { name: "cocoon-system" } });
      const kubeconfig = await operatorKubeconfig(cp);
      const [probePort, metricsPort] = [await freePort(), await freePort()];
      const flags = await startTaskFlags();
      assert.ok(flags.length > 0 && !flags.includes("--allow-all"));
      const proc = await runProcess(["deno", "run", ...flags, `${repoRoot}main.ts`], {
        kubeconfig,
        cwd: repoRoot,
        env: {
          OCI_REGISTRY: "127.0.0.1:5000/cocoon",
          POD_NAMESPACE: "cocoon-system",
          PROBE_ADDR: `127.0.0.1:${probePort}`,
          METRICS_ADDR: `127.0.0.1:${metricsPort}`,
        },
      });
      try {
        const get = async (port: number, path: string) => {
          const res = await fetch(`http://127.0.0.1:${port}${path}`);
          return { status: res.status, body: await res.text() };
        };
        await waitFor(
          "healthz",
          async () => (await get(probePort, "/healthz")).status === 200,
          30_000,
          200,
        );
        await waitFor(
          "readyz",
          async () => (await get(probePort, "/readyz")).status === 200,
          30_000,
          200,
        );
        const lease = await waitFor(
          "lease held",
          async () => {
            const l = await client.get(
              Leases,
              "cocoon-system",
              "cocoon-operator.cocoonset.cocoonstack.io",
            );
            return l.spec?.holderIdentity ? l : undefined;
          },
          30_000,
          200,
        );
        assert.match(lease.spec!.holderIdentity!, /_[0-9a-f-]{36}$/);
        const metrics = (await get(metricsPort, "/metrics")).body;
        assert.match(
          metrics,
          /leader_election_master_status\{name="cocoon-operator.cocoonset.cocoonstack.io"\} 1/,
        );
        assert.match(metrics, /rest_client_requests_total\{code="200",method="GET"/);
        const status = await proc.stop(20_000);
        assert.equal(status.code, 0, proc.output);
        const released = await client.get(
          Leases,
          "cocoon-system",
          "cocoon-operator.cocoonset.cocoonstack.io",
        );
        assert.equal(released.spec?.holderIdentity ?? "", "");
        // Structured logs: every line the operator printed is one JSON object.
        for (const line of proc.stderr.split("\n").filter((l) => l.trim())) {
          assert.doesNotThrow(() => JSON.parse(line), `not a JSON log line: ${line}`);
        }
      } finally {
        await proc.stop(5_000).catch(() => {});
      }
    } finally {
      transport.close();
      await cp.stop();
    }
  },
});
