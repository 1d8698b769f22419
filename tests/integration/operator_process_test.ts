/**
 * `deno task start` as a real process: the launcher (scripts/start.ts, run with the task's own
 * flags) computes the minimal permission set for this kubeconfig and OCI_REGISTRY and starts
 * main.ts with it, under the operator's ServiceAccount and ClusterRole. The operator starts,
 * serves probes and metrics, takes the Lease, and on SIGTERM (passed on by the launcher)
 * releases it and exits 0.
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

/** The start task's command line, read from deno.json so the test cannot drift. */
async function startTask(): Promise<string[]> {
  const config = JSON.parse(await Deno.readTextFile(`${repoRoot}deno.json`));
  return String(config.tasks.start).split(/\s+/);
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
      const task = await startTask();
      assert.equal(task.at(-1), "scripts/start.ts");
      const proc = await runProcess(task, {
        kubeconfig,
        cwd: repoRoot,
        env: {
          OCI_REGISTRY: "127.0.0.1:5000/cocoon",
          POD_NAMESPACE: "cocoon-system",
          PROBE_ADDR: `127.0.0.1:${probePort}`,
          METRICS_ADDR: `127.0.0.1:${metricsPort}`,
          // The launcher prints the command it runs only when asked.
          COCOON_START_VERBOSE: "1",
        },
      });
      try {
        // The launcher names the operator's flags: scoped net/read/env only.
        const [, launched] = await proc.waitForOutput(/^start: (deno run .*)$/m);
        const flags = launched.split(" ").filter((w) => w.startsWith("--allow-"));
        assert.deepEqual(flags.map((f) => f.split("=")[0]), [
          "--allow-net",
          "--allow-read",
          "--allow-env",
        ]);
        assert.ok(flags[0].includes(new URL(cp.server).host), flags[0]);
        assert.ok(flags[1].includes(kubeconfig), flags[1]);
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
        const lines = proc.stderr.split("\n").filter((l) => l.trim() && !l.startsWith("start: "));
        for (const line of lines) {
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
