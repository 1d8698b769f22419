/**
 * The demo controller as a standalone operator process (a stand-in for main.ts until the real
 * reconcilers land): same manager, same leader election, same signal handling. Configured by
 * environment: KUBECONFIG, DEMO_IDENTITY, LEADER_ELECT, LEASE_NAMESPACE, PROBE_ADDR,
 * METRICS_ADDR, WATCH_NAMESPACE.
 */
import { getLogger } from "@logtape/logtape";
import { setupLogging } from "../../common/log.ts";
import { LEADER_ELECTION_ID } from "../../config.ts";
import { ApiClient } from "../../kube/api_client.ts";
import { Manager } from "../../kube/manager.ts";
import { loadRestConfig, Transport } from "../../kube/transport.ts";
import { setupDemoController } from "./demo_controller.ts";

const env = Deno.env.toObject();
await setupLogging({ level: env.OPERATOR_LOG_LEVEL ?? "info", format: "json", stream: "stdout" });
const log = getLogger(["cocoon-operator", "demo"]);
const identity = env.DEMO_IDENTITY ?? `demo-${Deno.pid}`;
const transport = new Transport(await loadRestConfig());
const mgr = new Manager({
  client: new ApiClient(transport),
  metricsBindAddress: env.METRICS_ADDR ?? "0",
  healthProbeBindAddress: env.PROBE_ADDR ?? "0",
  leaderElection: env.LEADER_ELECT !== "false",
  // The operator's own Lease: config/rbac's Role grants get/update/watch on that name only.
  leaderElectionId: LEADER_ELECTION_ID,
  leaderElectionNamespace: env.LEASE_NAMESPACE,
  cacheNamespace: env.WATCH_NAMESPACE,
  identity,
});
setupDemoController(mgr, identity);
const stop = new AbortController();
for (const s of ["SIGINT", "SIGTERM"] as const) {
  Deno.addSignalListener(s, () => stop.abort());
}
log.info("demo operator {identity} starting", { identity });
const outcome = await mgr.start(stop.signal);
log.info("demo operator {identity} stopped: {outcome}", { identity, outcome });
transport.close();
Deno.exit(outcome === "leadership-lost" ? 1 : 0);
