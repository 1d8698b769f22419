import type { ControlPlane } from "./control_plane.ts";

const repoRoot = new URL("../../", import.meta.url).pathname;

/**
 * Installs config/rbac exactly as kustomize builds it (`kubectl apply -k`: the ServiceAccount,
 * the ClusterRole `cocoon-operator-manager` and its binding, the leader-election Role and
 * RoleBinding in cocoon-system, the metrics-auth and metrics-reader ClusterRoles) and returns a
 * kubeconfig for the operator's ServiceAccount (cocoon-system/cocoon-operator), so a test runs
 * the operator with exactly the permissions a deployment grants it rather than as cluster admin.
 */
export async function operatorKubeconfig(
  cp: ControlPlane,
  /** More kustomize folders (from the repository root) applied after config/rbac. */
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
  const applied = await cp.kubectl(["apply", "-k", `${repoRoot}config/rbac`]);
  if (applied.code !== 0) throw new Error(`applying config/rbac failed: ${applied.stderr}`);
  for (const dir of extraRbac) {
    const more = await cp.kubectl(["apply", "-k", `${repoRoot}${dir}`]);
    if (more.code !== 0) throw new Error(`applying ${dir} failed: ${more.stderr}`);
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
