import type { ControlPlane } from "./control_plane.ts";

const repoRoot = new URL("../../", import.meta.url).pathname;

/**
 * Installs config/rbac's ClusterRole and binding and returns a kubeconfig for the operator's
 * ServiceAccount (cocoon-system/cocoon-operator), so a test runs the operator with exactly the
 * permissions a deployment grants it rather than as cluster admin.
 */
export async function operatorKubeconfig(cp: ControlPlane): Promise<string> {
  const applied = await cp.kubectl([
    "apply",
    "-f",
    `${repoRoot}config/rbac/role.yaml`,
    "-f",
    `${repoRoot}config/rbac/role_binding.yaml`,
  ]);
  if (applied.code !== 0) throw new Error(`applying config/rbac failed: ${applied.stderr}`);
  return await cp.serviceAccountKubeconfig("cocoon-system", "cocoon-operator");
}
