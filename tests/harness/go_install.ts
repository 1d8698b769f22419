/**
 * The objects a user who installed the Go original (cocoonstack/cocoon-operator 6151b05) has in
 * the cluster, written out here as this project's own fixture, so tests can stand up a "Go
 * install" and apply this tree over it without the Go sources at hand: its ServiceAccount,
 * ClusterRole and ClusterRoleBinding (both named `cocoon-operator`), its namespace and its
 * Deployment. The rules and the pod template carry the Go original's values (its
 * config/rbac/role.yaml and config/manager/deployment.yaml), nothing more.
 *
 * `writeGoInstall` puts them in a kustomization folder, so `kubectl apply -k` records the
 * last-applied configuration exactly as applying the Go tree does.
 *
 * @module
 */
import { dump } from "js-yaml";
import { GO_ORIGINAL_RULES } from "../fixtures/go_original_rbac.ts";

/** One RBAC rule of a ClusterRole. */
export interface PolicyRule {
  apiGroups: string[];
  resources: string[];
  verbs: string[];
}

/** The Go original's ClusterRole rules (tests/fixtures/go_original_rbac.yaml). */
export const GO_CLUSTER_ROLE_RULES = GO_ORIGINAL_RULES as readonly PolicyRule[];

/** The name of the Go original's ClusterRole and of its binding. */
export const GO_RBAC_NAME = "cocoon-operator";

/** The Go original's image as its manifests name it. */
export const GO_IMAGE = "ghcr.io/cocoonstack/cocoon-operator:latest";

/** The Go original's Deployment (no securityContext anywhere; OCI_REGISTRY declared empty). */
export function goDeployment(image = GO_IMAGE): Record<string, unknown> {
  const labels = {
    "app.kubernetes.io/name": "cocoon-operator",
    "app.kubernetes.io/component": "controller",
  };
  return {
    apiVersion: "apps/v1",
    kind: "Deployment",
    metadata: { name: "cocoon-operator", namespace: "cocoon-system", labels },
    spec: {
      replicas: 1,
      selector: { matchLabels: { "app.kubernetes.io/name": "cocoon-operator" } },
      template: {
        metadata: { labels },
        spec: {
          serviceAccountName: "cocoon-operator",
          containers: [{
            name: "manager",
            image,
            imagePullPolicy: "IfNotPresent",
            args: [
              "--metrics-bind-address=:8080",
              "--health-probe-bind-address=:8081",
              "--leader-elect=true",
            ],
            env: [
              { name: "OPERATOR_LOG_LEVEL", value: "info" },
              { name: "OCI_REGISTRY", value: "" },
            ],
            ports: [
              { name: "metrics", containerPort: 8080, protocol: "TCP" },
              { name: "probe", containerPort: 8081, protocol: "TCP" },
            ],
            livenessProbe: {
              httpGet: { path: "/healthz", port: "probe" },
              initialDelaySeconds: 15,
              periodSeconds: 20,
            },
            readinessProbe: {
              httpGet: { path: "/readyz", port: "probe" },
              initialDelaySeconds: 5,
              periodSeconds: 10,
            },
            resources: {
              requests: { cpu: "100m", memory: "128Mi" },
              limits: { cpu: "1000m", memory: "512Mi" },
            },
          }],
        },
      },
    },
  };
}

/** The pod the Go original's Deployment creates, as a bare Pod (for admission dry runs). */
export function goPod(name = "cocoon-operator-go"): Record<string, unknown> {
  const template = (goDeployment().spec as { template: { metadata: unknown; spec: unknown } })
    .template;
  return {
    apiVersion: "v1",
    kind: "Pod",
    metadata: {
      ...(template.metadata as Record<string, unknown>),
      name,
      namespace: "cocoon-system",
    },
    spec: template.spec,
  };
}

/** Every object of a Go install (namespace, RBAC, Deployment), in apply order. */
export function goInstallObjects(image = GO_IMAGE): Record<string, unknown>[] {
  const labels = { "app.kubernetes.io/name": "cocoon-operator" };
  return [
    {
      apiVersion: "v1",
      kind: "Namespace",
      metadata: { name: "cocoon-system", labels: { "app.kubernetes.io/name": "cocoon-system" } },
    },
    {
      apiVersion: "v1",
      kind: "ServiceAccount",
      metadata: { name: "cocoon-operator", namespace: "cocoon-system", labels },
    },
    {
      apiVersion: "rbac.authorization.k8s.io/v1",
      kind: "ClusterRole",
      metadata: { name: GO_RBAC_NAME, labels },
      rules: GO_CLUSTER_ROLE_RULES,
    },
    {
      apiVersion: "rbac.authorization.k8s.io/v1",
      kind: "ClusterRoleBinding",
      metadata: { name: GO_RBAC_NAME, labels },
      roleRef: { apiGroup: "rbac.authorization.k8s.io", kind: "ClusterRole", name: GO_RBAC_NAME },
      subjects: [{ kind: "ServiceAccount", name: "cocoon-operator", namespace: "cocoon-system" }],
    },
    goDeployment(image),
  ];
}

/**
 * Writes a Go install as a kustomization folder (one file per object, listed as resources) and
 * returns the folder: `kubectl apply -k <folder>` is then what applying the Go tree does.
 * Without `dir`, a new temporary folder.
 */
export async function writeGoInstall(
  opts: { dir?: string; image?: string; objects?: Record<string, unknown>[] } = {},
): Promise<string> {
  const dir = opts.dir ?? await Deno.makeTempDir({ prefix: "go-install-" });
  const objects = opts.objects ?? goInstallObjects(opts.image);
  const files: string[] = [];
  for (const [i, obj] of objects.entries()) {
    const file = `${i}-${String(obj.kind).toLowerCase()}.yaml`;
    await Deno.writeTextFile(`${dir}/${file}`, dump(obj));
    files.push(file);
  }
  await Deno.writeTextFile(
    `${dir}/kustomization.yaml`,
    dump({
      apiVersion: "kustomize.config.k8s.io/v1beta1",
      kind: "Kustomization",
      resources: files,
    }),
  );
  return dir;
}
