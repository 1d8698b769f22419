/**
 * Run by tests inside a sandbox (a `deno run` child with the operator's permission flags): asks
 * the real Deno permission state which needs of a pod-shaped configuration are missing, and
 * fetches each given URL, reporting "ok" (any HTTP answer) or the error's class name
 * (NotCapable when the sandbox refuses). Prints one JSON object on stdout.
 *
 * Arguments: the OCI_REGISTRY value, then URLs to try.
 */
import { missingPermissions, operatorNeeds } from "../../permissions.ts";
import { IN_CLUSTER_API_HOST, SERVICE_ACCOUNT_DIR } from "../../kube/kubeconfig.ts";

const [ociRegistry, ...urls] = Deno.args;
const SERVER = `https://${IN_CLUSTER_API_HOST}:443`;
const missing = missingPermissions(operatorNeeds({
  config: {
    ociRegistry,
    metricsBindAddress: ":8080",
    healthProbeBindAddress: ":8081",
    leaderElect: true,
    leaderElectionNamespace: undefined,
  },
  cluster: {
    source: {
      kind: "in-cluster",
      server: SERVER,
      tokenFile: `${SERVICE_ACCOUNT_DIR}/token`,
      caFile: `${SERVICE_ACCOUNT_DIR}/ca.crt`,
    },
    server: SERVER,
    files: [`${SERVICE_ACCOUNT_DIR}/token`, `${SERVICE_ACCOUNT_DIR}/ca.crt`],
  },
  env: (name) =>
    name === "GOOGLE_APPLICATION_CREDENTIALS" ? "/var/run/secrets/gcp/key.json" : undefined,
}));
const results: Record<string, string> = {};
for (const url of urls) {
  try {
    const res = await fetch(url);
    await res.body?.cancel();
    results[url] = "ok";
  } catch (err) {
    results[url] = err instanceof Error ? err.constructor.name : String(err);
  }
}
console.log(JSON.stringify({ missing: missing.map((n) => `${n.kind}:${n.value}`), results }));
