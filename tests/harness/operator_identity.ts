import type { ControlPlane } from "./control_plane.ts";
import { isComponent, writeOverlay } from "./kustomize.ts";

/**
 * Installs config/rbac exactly as kustomize builds it (`kubectl apply -k`: the ServiceAccount,
 * the ClusterRole `cocoon-operator-manager` and its binding, the leader-election Role and
 * RoleBinding in cocoon-system, the metrics-auth and metrics-reader ClusterRoles) and returns a
 * kubeconfig for the operator's ServiceAccount (cocoon-system/cocoon-operator), so a test runs
 * the operator with exactly the permissions a deployment grants it rather than as cluster admin.
 * config/rbac names no namespace (config/default does): it is built in cocoon-system here, as
 * config/default builds it.
 */
export async function operatorKubeconfig(
  cp: ControlPlane,
  /**
   * More kustomize folders (from the repository root) granting more, applied with config/rbac:
   * a component (config/overlays/sharded/members) takes its namespace from config/rbac's
   * ServiceAccount.
   */
  extraRbac: readonly string[] = [],
): Promise<string> {
  // The kustomization's namespaced objects need their namespace (created here if missing, with
  // no labels, as a test's own namespace would be).
  const ns = await cp.kubectl(["apply", "-f", "-"], {
    stdin: JSON.stringify({
      apiVersion: "v1",
      kind: "Namespace",
      metadata: { name: "cocoon-system" },
    }),
  });
  if (ns.code !== 0) throw new Error(`creating namespace cocoon-system failed: ${ns.stderr}`);
  const resources = ["config/rbac"];
  const components: string[] = [];
  for (const dir of extraRbac) (await isComponent(dir) ? components : resources).push(dir);
  const overlay = await writeOverlay({ namespace: "cocoon-system", resources, components });
  try {
    const applied = await cp.kubectl(["apply", "-k", overlay]);
    if (applied.code !== 0) {
      throw new Error(
        `applying ${[...resources, ...components].join(", ")} failed: ${applied.stderr}`,
      );
    }
  } finally {
    await Deno.remove(overlay, { recursive: true }).catch(() => {});
  }
  return await cp.serviceAccountKubeconfig("cocoon-system", "cocoon-operator");
}

/**
 * Installs the given RBAC manifests (YAML, applied with `kubectl apply -f -`) instead of
 * config/rbac, and returns a kubeconfig for cocoon-system/cocoon-operator: the operator under
 * someone else's role, e.g. the Go original's (tests/fixtures/go_original_rbac.yaml).
 */
export async function operatorKubeconfigUnder(cp: ControlPlane, rbacYaml: string): Promise<string> {
  const ns = await cp.kubectl(["create", "namespace", "cocoon-system"]);
  if (ns.code !== 0 && !ns.stderr.includes("AlreadyExists")) {
    throw new Error(`creating namespace cocoon-system failed: ${ns.stderr}`);
  }
  const applied = await cp.kubectl(["apply", "-f", "-"], { stdin: rbacYaml });
  if (applied.code !== 0) throw new Error(`applying the RBAC failed: ${applied.stderr}`);
  return await cp.serviceAccountKubeconfig("cocoon-system", "cocoon-operator");
}
