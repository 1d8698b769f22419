/**
 * Run inside a sandbox (a child `deno run` with the operator's permission flags) by tests: asks
 * the real Deno permission state which needs of a pod-shaped configuration are missing, and
 * tries one request outside the set. Prints one JSON object on stdout.
 *
 * Arguments: OCI_REGISTRY value, then an optional URL that must be refused.
 */
import { missingPermissions, operatorNeeds } from "../../permissions.ts";
import { inClusterApiHost, serviceAccountDir } from "../../kube/kubeconfig.ts";

const [ociRegistry, forbiddenUrl] = Deno.args;
const server = `https://${inClusterApiHost}:443`;
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
      server,
      tokenFile: `${serviceAccountDir}/token`,
      caFile: `${serviceAccountDir}/ca.crt`,
    },
    server,
    files: [`${serviceAccountDir}/token`, `${serviceAccountDir}/ca.crt`],
  },
  env: (name) =>
    name === "GOOGLE_APPLICATION_CREDENTIALS" ? "/var/run/secrets/gcp/key.json" : undefined,
}));
let refused: string | undefined;
if (forbiddenUrl) {
  try {
    await fetch(forbiddenUrl);
    refused = "no";
  } catch (err) {
    refused = err instanceof Error ? err.constructor.name : String(err);
  }
}
console.log(JSON.stringify({ missing: missing.map((n) => `${n.kind}:${n.value}`), refused }));
