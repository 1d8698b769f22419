/**
 * The environment variables the operator reads, as plain data: permissions.ts grants them and
 * checks them at start-up, and `deno task start` (scripts/start.ts) passes exactly these on.
 *
 * @module
 */

/**
 * The proxy variables Deno's HTTP client honours by itself. `--allow-net` checks the request's
 * target, never the proxy, so a set variable would send every request (and, for plain http, its
 * credentials) to a host the permission set does not name.
 */
export const PROXY_VARIABLES: readonly string[] = [
  "HTTP_PROXY",
  "HTTPS_PROXY",
  "ALL_PROXY",
  "http_proxy",
  "https_proxy",
  "all_proxy",
];

/**
 * Every variable the operator reads in a pod (config.ts, main.ts, kube/leader.ts,
 * kube/kubeconfig.ts, snapshot/auth/*). All must be granted; main.ts checks.
 */
export const OPERATOR_ENV: readonly string[] = [
  "OCI_REGISTRY",
  "METRICS_ADDR",
  "PROBE_ADDR",
  "LEADER_ELECT",
  "POD_NAMESPACE",
  "COCOONSET_CONCURRENCY",
  "HIBERNATION_CONCURRENCY",
  "MAX_REPLICAS_PER_SET",
  "MAX_TOOLBOXES_PER_SET",
  "INFORMER_STALL_SECONDS",
  "RBAC_RECHECK_SECONDS",
  "SHARDS",
  "OPERATOR_LOG_LEVEL",
  "OPERATOR_LOG_FORMAT",
  "POD_NAME",
  "HOSTNAME",
  "KUBECONFIG",
  "KUBERNETES_SERVICE_HOST",
  "KUBERNETES_SERVICE_PORT",
  "GOOGLE_APPLICATION_CREDENTIALS",
  "GCE_METADATA_HOST",
  "DOCKER_CONFIG",
  "OPERATOR_ALLOW_EXTRA_PERMISSIONS",
  "OPERATOR_ALLOW_PLAIN_HTTP",
  "OPERATOR_ALLOW_NET",
  "METRICS_SECURE",
  "METRICS_CERT_DIR",
  "ENABLE_HTTP2",
  // Read only to refuse them unless their proxy was granted (proxyNeeds): Deno routes requests
  // through these proxies without checking the proxy against --allow-net.
  ...PROXY_VARIABLES,
];

/**
 * Variables read only where granted (a developer machine): they locate ~/.kube/config and the
 * Docker / gcloud credential files under a home directory. In a pod they are not granted, so
 * those lookups do not happen and need no read permission.
 */
export const LOCAL_ONLY_ENV: readonly string[] = ["HOME", "XDG_RUNTIME_DIR", "REGISTRY_AUTH_FILE"];
