/**
 * `deno task start`: runs the operator (main.ts) on a developer machine with the smallest
 * permission set this machine's configuration needs, computed the way the operator itself checks
 * it at start-up (permissions.ts localPermissionSet): the API server of the current kubeconfig
 * context, the OCI_REGISTRY host, the two listeners, the kubeconfig and the files it references,
 * the registry credential files, and the operator's variables; with an exec credential plugin,
 * `--allow-run` for that one program (scripts/exec_plugin_path.ts). The launcher itself reads the
 * environment and files and starts one `deno` child; the operator process gets nothing more.
 *
 * Flags after the task name go to the operator. A configuration or cluster problem prints one
 * line and exits 2 before the operator starts; otherwise the exit code is the operator's.
 */
import { isAbsolute, resolve } from "node:path";
import { parseConfig } from "../config.ts";
import { clusterAccess, locateCluster } from "../kube/kubeconfig.ts";
import { errorMessage } from "../kube/errors.ts";
import { localPermissionSet, permissionFlags } from "../permissions.ts";
import { resolvePluginPath, systemLookup } from "./exec_plugin_path.ts";

const mainModule = new URL("../main.ts", import.meta.url).pathname;

/** What the launcher will run, or the one-line reason it will not. */
export type LaunchPlan =
  | { ok: true; args: string[]; env: Record<string, string> }
  | { ok: false; message: string };

/**
 * The `deno` arguments for the operator and the environment changes (KUBECONFIG and --kubeconfig
 * made absolute, so the operator needs no permission to learn its working directory).
 */
export function launchPlan(
  operatorArgs: string[],
  env: Record<string, string | undefined>,
  cwd: string,
  denoFlags: string[] = [],
): LaunchPlan {
  const overrides: Record<string, string> = {};
  if (env.KUBECONFIG) {
    overrides.KUBECONFIG = env.KUBECONFIG.split(":").filter((p) => p)
      .map((p) => isAbsolute(p) ? p : resolve(cwd, p)).join(":");
  }
  const view = { ...env, ...overrides };
  const lookup = (name: string) => view[name] || undefined;
  let flags: string[];
  let args = operatorArgs;
  try {
    let config = parseConfig(args, view);
    if (config.kubeconfig && !isAbsolute(config.kubeconfig)) {
      // Made absolute like KUBECONFIG; the last --kubeconfig wins, as in Go's flag package.
      args = [...args, `--kubeconfig=${resolve(cwd, config.kubeconfig)}`];
      config = parseConfig(args, view);
    }
    if (config.help || config.version) {
      flags = [];
    } else {
      const cluster = clusterAccess(locateCluster(lookup, undefined, config.kubeconfig));
      const set = localPermissionSet({ config, cluster, env: lookup });
      // The plugin, if any, as the one absolute path the operator may run.
      if (cluster.exec) set.run = [resolvePluginPath(cluster.exec, systemLookup(view.PATH))];
      flags = permissionFlags(set);
    }
  } catch (err) {
    return { ok: false, message: errorMessage(err).split("\n")[0] };
  }
  return {
    ok: true,
    args: ["run", "--no-prompt", ...denoFlags, ...flags, mainModule, ...args],
    env: overrides,
  };
}

if (import.meta.main) {
  const plan = launchPlan(Deno.args, Deno.env.toObject(), Deno.cwd());
  if (!plan.ok) {
    console.error(`cocoon-operator: ${plan.message}`);
    Deno.exit(2);
  }
  // The exact command on request: by default the operator's own output is all there is.
  if (Deno.env.get("COCOON_START_VERBOSE")) console.error(`start: deno ${plan.args.join(" ")}`);
  // "deno" from PATH: the task grants --allow-run=deno, which names that program.
  const child = new Deno.Command("deno", {
    args: plan.args,
    env: plan.env,
    stdin: "inherit",
    stdout: "inherit",
    stderr: "inherit",
  }).spawn();
  // The operator shuts down gracefully on these; the launcher only passes them on.
  for (const sig of ["SIGINT", "SIGTERM"] as const) {
    Deno.addSignalListener(sig, () => {
      try {
        child.kill(sig);
      } catch {
        // Already exited.
      }
    });
  }
  const status = await child.status;
  Deno.exit(status.signal ? 128 + signalNumber(status.signal) : status.code);
}

function signalNumber(sig: Deno.Signal): number {
  return sig === "SIGINT" ? 2 : sig === "SIGTERM" ? 15 : sig === "SIGKILL" ? 9 : 1;
}
