/**
 * The operator once its configuration is valid and the API server answered: builds the manager,
 * registers the reconcilers and runs them until a signal (the second half of the Go operator's
 * main.go). main.ts starts loading this module, the larger part of the module graph, before it
 * connects, so the loading overlaps the first requests (docs/architecture.md, "Start-up").
 *
 * @module
 */
import { getLogger } from "@logtape/logtape";
import { type Config, DEFAULTS, LEADER_ELECTION_ID } from "./config.ts";
import { setupCocoonSetController } from "./cocoonset/reconciler.ts";
import { ApiClient } from "./kube/api_client.ts";
import { errorMessage } from "./kube/errors.ts";
import { Manager, type ManagerOptions } from "./kube/manager.ts";
import { ShardedManager } from "./kube/sharding/manager.ts";
import { withAuthenticationAndAuthorization } from "./kube/metrics_auth.ts";
import { metricsTls, readCertificateFiles } from "./kube/metrics_serving.ts";
import { byObject } from "./kube/cache.ts";
import { type Node, Nodes, Pods } from "./kube/core.ts";
import { LABEL_COCOON_SET, LABEL_NODE_POOL } from "./common/meta/keys.ts";
import { ping } from "./kube/servers.ts";
import { register as registerOperatorMetrics } from "./metrics/metrics.ts";
import type { Transport } from "./kube/transport.ts";
import { removeNetGuard } from "./kube/net_guard.ts";
import type { Registry } from "./snapshot/registry.ts";
import { REVISION, VERSION } from "./version.ts";
import { setupHibernationController } from "./hibernation/mod.ts";
import { leaderElectionNamespace } from "./kube/leader.ts";
import type { NodeChecks } from "./cocoonset/nodes.ts";
import { describeNeeds, permissionsFor } from "./rbac.ts";
import { checkRbac, describeMissingRequired, type RbacAccess } from "./rbac_check.ts";

const log = getLogger(["cocoon-operator", "main"]);

/** What registering the reconcilers needs. */
export interface Wiring {
  manager: Manager;
  registry: Registry;
  config: Config;
  /** Whether the node checks may run (the operator's role lets it read nodes). */
  nodeChecks?: NodeChecks;
}

/** Registers every reconciler on the manager. */
function registerReconcilers(w: Wiring): void {
  setupCocoonSetController(w.manager, {
    registry: w.registry,
    nodeChecks: w.nodeChecks,
    concurrency: w.config.cocoonSetConcurrency,
    limits: {
      maxReplicas: w.config.maxReplicasPerSet,
      maxToolboxes: w.config.maxToolboxesPerSet,
    },
  });
  setupHibernationController(
    w.manager,
    { registry: w.registry },
    w.config.hibernationConcurrency,
  );
}

/** A cached node keeps metadata and spec; its status is never read. */
function withoutStatus(node: Node): Node {
  delete node.status;
  return node;
}

/**
 * The namespace the operator's RBAC is reviewed in: its own (the Lease's: --leader-election-
 * namespace, POD_NAMESPACE, else the service account's), where its namespaced rules apply.
 * Outside a cluster with none given, "default": it exists in every cluster, and what matters
 * there is the cluster-wide rules, which a rules review lists in any namespace; no namespaced
 * rule is needed then (the Lease needs a namespace, which preflight.ts insists on).
 */
async function rbacNamespace(config: Config): Promise<{ namespace: string; known: boolean }> {
  try {
    return {
      namespace: await leaderElectionNamespace(config.leaderElectionNamespace),
      known: true,
    };
  } catch {
    return { namespace: "default", known: false };
  }
}

/** The reason /metrics gives scrapers while its reviews are not allowed. */
function metricsRefusal(access: RbacAccess): string | undefined {
  if (access.enabled("metrics-authn")) return undefined;
  const missing = access.missingFor("metrics-authn");
  const what = missing.length > 0
    ? `the operator's RBAC role lacks ${describeNeeds(missing).join("; ")}`
    : "the operator's RBAC permissions could not be checked";
  return `/metrics cannot check who is calling: ${what}. Grant them ` +
    "(config/rbac/metrics_auth_role.yaml), or serve plain http with --metrics-secure=false";
}

/**
 * Runs the manager on a transport that reached the API server; returns the process exit code.
 * Owns the transport and the net guard from here on: both are released before it returns.
 */
export async function runOperator(
  config: Config,
  registry: Registry,
  transport: Transport,
): Promise<number> {
  log.info("cocoon-operator {version} starting (rev={revision})", {
    version: VERSION,
    revision: REVISION,
  });
  const client = new ApiClient(transport);
  const secureMetrics = config.metricsSecure && config.metricsBindAddress !== "0";
  const sharded = config.shards === "auto";
  const { namespace, known } = await rbacNamespace(config);
  const access = await checkRbac({
    client,
    // Without a namespace the manager stops at start saying so; its Lease rules wait for one.
    permissions: permissionsFor({
      leaderElection: config.leaderElect && known,
      sharded: sharded && known,
      secureMetrics,
    }),
    namespace,
    recheckMs: (config.rbacRecheckSeconds ?? DEFAULTS.rbacRecheckSeconds) * 1000,
  });
  if (access.missingRequired.length > 0) {
    // One line, as every start-up refusal: nothing is reconciled with half a role.
    console.error(`cocoon-operator: ${describeMissingRequired(access.missingRequired)}`);
    transport.close();
    removeNetGuard();
    return 2;
  }
  let metricsSecurity: ManagerOptions["metricsSecurity"];
  if (secureMetrics) {
    try {
      const tls = await metricsTls(config.metricsCertDir, config.leaderElectionNamespace);
      log.info(
        "metrics served over https ({source} certificate, {protocols}), callers reviewed by " +
          "the API server",
        {
          source: tls.source,
          protocols: config.enableHttp2 ? "HTTP/2 and HTTP/1.1" : "HTTP/1.1 only",
        },
      );
      const certDir = config.metricsCertDir;
      metricsSecurity = {
        tls: { cert: tls.cert, key: tls.key },
        // A Secret (cert-manager's) is renewed in place: read it again while running.
        reloadTls: tls.source === "files" && certDir
          ? () => readCertificateFiles(certDir)
          : undefined,
        filter: (handler) =>
          withAuthenticationAndAuthorization(transport, handler, {
            unavailable: () => metricsRefusal(access),
          }),
      };
    } catch (err) {
      console.error(`cocoon-operator: ${errorMessage(err)}`);
      transport.close();
      removeNetGuard();
      return 2;
    }
  }
  const managerOptions: ManagerOptions = {
    client,
    metricsBindAddress: config.metricsBindAddress,
    metricsSecurity,
    metricsHttp2: config.enableHttp2,
    healthProbeBindAddress: config.healthProbeBindAddress,
    leaderElection: config.leaderElect,
    leaderElectionId: LEADER_ELECTION_ID,
    leaderElectionNamespace: config.leaderElectionNamespace,
    // Only pods of CocoonSets are cached: memory follows the managed pods, not the cluster's.
    // Other pods (a CocoonHibernation may target one) are read uncached.
    // Only nodes a set can run on (they carry a pool label), without their status (images,
    // heartbeats): the reconcilers read node labels only.
    byObject: [
      byObject(Pods, { labelSelector: LABEL_COCOON_SET }),
      byObject(Nodes, { labelSelector: LABEL_NODE_POOL, transform: withoutStatus }),
    ],
    // The initial state streams over the watch (no LIST) where the API server serves it.
    watchList: true,
    informerStallLimitMs: (config.informerStallSeconds ?? DEFAULTS.informerStallSeconds) * 1000,
  };
  // Sharded: every replica active on its own namespaces, no leader election; /readyz also
  // waits for this replica's ranges (kube/sharding/manager.ts).
  const manager = config.shards === "auto"
    ? new ShardedManager(managerOptions)
    : new Manager(managerOptions);
  manager.addHealthzCheck("healthz", ping);
  manager.addReadyzCheck("readyz", ping);
  registerOperatorMetrics();
  manager.add(access.runnable());
  registerReconcilers({
    manager,
    registry,
    config,
    nodeChecks: {
      enabled: () => access.enabled("node-checks"),
      onEnabled: (fn) => access.onEnabled("node-checks", fn),
    },
  });

  const stop = new AbortController();
  const onSignal = (name: string) => () => {
    log.info("received {signal}, shutting down", { signal: name });
    stop.abort(new Error(`received ${name}`));
  };
  const handlers = (["SIGINT", "SIGTERM"] as const).map((s) => {
    const h = onSignal(s);
    Deno.addSignalListener(s, h);
    return [s, h] as const;
  });
  log.info(
    "starting manager (metrics={metrics} probe={probe} leader={leader} shards={shards} " +
      "cocoonset-concurrency={cs} hibernation-concurrency={hib})",
    {
      metrics: config.metricsBindAddress,
      probe: config.healthProbeBindAddress,
      leader: config.shards === "auto" ? false : config.leaderElect,
      shards: config.shards ?? "off",
      cs: config.cocoonSetConcurrency,
      hib: config.hibernationConcurrency,
    },
  );
  try {
    const outcome = await manager.start(stop.signal);
    if (outcome === "leadership-lost") {
      log.error("leader election lost; exiting so a fresh process can campaign");
      return 1;
    }
    log.info("manager stopped cleanly");
    return 0;
  } catch (err) {
    // String(err), not errorMessage: the line carries the error's name ("ApiError: …").
    log.error("manager failed: {error}", { error: String(err) });
    return 1;
  } finally {
    for (const [s, h] of handlers) Deno.removeSignalListener(s, h);
    transport.close();
    removeNetGuard();
  }
}
