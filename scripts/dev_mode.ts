/**
 * Which stack `deno task dev` runs: the operator against a cluster the machine is already
 * configured for, or a local stack of its own. The decision follows the operator's own lookup
 * order (kube/kubeconfig.ts locateCluster: KUBECONFIG, in-cluster, ~/.kube/config), with two
 * rules of its own:
 * - a KUBECONFIG that names only the kubeconfig this task writes is a leftover from an earlier
 *   run (exported in the same shell), not a cluster: the local stack starts again;
 * - a KUBECONFIG that names no existing file is a mistake worth a message, not a silent fallback
 *   to a local stack the user did not ask for.
 *
 * @module
 */
import { isAbsolute, resolve } from "node:path";
import {
  type ClusterSource,
  type EnvLookup,
  type FileProbe,
  locateCluster,
  NoClusterError,
  probeFile,
} from "../kube/kubeconfig.ts";

/** The decision, or the one line that explains why there is none. */
export type DevMode =
  | { kind: "local"; note?: string }
  | { kind: "cluster"; source: ClusterSource }
  | { kind: "refuse"; message: string };

/**
 * Decides what `deno task dev` runs. `ownKubeconfig` is the absolute path of the kubeconfig the
 * local stack writes; relative KUBECONFIG entries are resolved against `cwd`.
 */
export function chooseDevMode(
  env: EnvLookup,
  ownKubeconfig: string,
  cwd: string,
  probe: FileProbe = probeFile,
): DevMode {
  const list = env("KUBECONFIG");
  const paths = (list ?? "").split(":").filter((p) => p !== "")
    .map((p) => isAbsolute(p) ? p : resolve(cwd, p));
  if (paths.length > 0 && paths.every((p) => p === ownKubeconfig)) {
    return {
      kind: "local",
      note: `KUBECONFIG names this task's own kubeconfig (${ownKubeconfig}); ` +
        "starting a fresh local stack",
    };
  }
  try {
    return { kind: "cluster", source: locateCluster(env, probe) };
  } catch (err) {
    if (!(err instanceof NoClusterError)) throw err;
    if (list) {
      return {
        kind: "refuse",
        message: `KUBECONFIG=${list} names no readable file; ` +
          "fix it, or unset KUBECONFIG to start a local stack",
      };
    }
    return { kind: "local" };
  }
}
