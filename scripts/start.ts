/**
 * `deno task start`: one launcher process that computes the operator's permission set for this
 * machine (permissions.ts localPermissionSet, the set the operator checks at start-up) and runs
 * main.ts under it, with a cleared environment: the operator's variables and the deno runtime's,
 * no proxy variable unless COCOON_START_KEEP_PROXY=1. The task grants the launcher reads,
 * variables and running `deno`; no network, no write (docs/configuration.md says why). Flags after
 * the task name go to the operator. A configuration problem prints one line and exits 2 before the
 * operator starts; otherwise the exit code is the operator's.
 *
 * @module
 */
import { delimiter, isAbsolute, join, resolve } from "node:path";
import { parseConfig } from "../config.ts";
import { clusterAccess, locateCluster } from "../kube/kubeconfig.ts";
import { errorMessage } from "../kube/errors.ts";
import { parseBindAddress } from "../kube/bind_address.ts";
import { isLoopbackHost } from "../kube/loopback.ts";
import { EXEC_INHERITED_ENV, type ExecConfig, refusedPluginReason } from "../kube/exec_config.ts";
import { localPermissionSet, permissionFlags } from "../permissions.ts";
import { LOCAL_ONLY_ENV, OPERATOR_ENV, PROXY_VARIABLES } from "../operator_env.ts";
import { runtimeEnvFor, v8FlagsArg } from "./runtime_flags.ts";

/**
 * What the operator's deno runtime reads by itself: its cache, npm registry, trust store, and V8
 * flags. DENO_V8_FLAGS applies to this launcher too, and V8 rejects a module's code cache written
 * under other flags: the two processes keep one cache only with the same flags.
 */
const DENO_RUNTIME_ENV = [
  "DENO_DIR",
  "DENO_V8_FLAGS",
  "DENO_CERT",
  "DENO_TLS_CA_STORE",
  "DENO_NO_UPDATE_CHECK",
  "NPM_CONFIG_REGISTRY",
  "XDG_CACHE_HOME",
  "NO_COLOR",
];

const mainModule = new URL("../main.ts", import.meta.url).pathname;

/** What the launcher will run, or the one-line reason it will not. */
export type LaunchPlan =
  | {
    ok: true;
    /** The `deno` arguments that start the operator. */
    args: string[];
    /** The operator's whole environment. */
    childEnv: Record<string, string>;
    /** Proxy variables that were set and are not passed on. */
    droppedProxies: string[];
  }
  | { ok: false; message: string };

/**
 * Computes the operator's command line and environment from the launcher's environment `env`,
 * relative paths taken against `cwd`. KUBECONFIG and a --kubeconfig flag are made absolute, so
 * the operator needs no permission to learn its working directory.
 */
export function launchPlan(
  operatorArgs: string[],
  env: Record<string, string | undefined>,
  cwd: string,
  denoFlags: string[] = [],
): LaunchPlan {
  const keepProxy = env.COCOON_START_KEEP_PROXY === "1";
  // What the operator will read, and all the plan looks at: the same view as its own check.
  const view: Record<string, string> = {};
  for (const name of [...OPERATOR_ENV, ...LOCAL_ONLY_ENV]) {
    const value = env[name];
    if (value !== undefined && (keepProxy || !PROXY_VARIABLES.includes(name))) view[name] = value;
  }
  if (view.KUBECONFIG) {
    view.KUBECONFIG = view.KUBECONFIG.split(":").filter((p) => p)
      .map((p) => isAbsolute(p) ? p : resolve(cwd, p)).join(":");
  }
  const lookup = (name: string) => view[name] || undefined;
  let args = operatorArgs;
  let flags: string[] = [];
  let plugin = false;
  let starting = false;
  try {
    let config = parseConfig(args, view);
    if (config.kubeconfig && !isAbsolute(config.kubeconfig)) {
      // The last --kubeconfig wins, as in Go's flag package.
      args = [...args, `--kubeconfig=${resolve(cwd, config.kubeconfig)}`];
      config = parseConfig(args, view);
    }
    starting = !config.help && !config.version;
    if (starting) {
      if (servesPlainMetricsByDefault(args, view, config.metricsBindAddress)) {
        // Local use: a loopback metrics listener is plain http unless asked otherwise.
        args = [...args, "--metrics-secure=false"];
        config = parseConfig(args, view);
      }
      const cluster = clusterAccess(locateCluster(lookup, undefined, config.kubeconfig));
      const set = localPermissionSet({
        config,
        cluster,
        env: lookup,
        plainHttpHosts: config.plainHttpHosts,
        metricsCertDir: config.metricsSecure ? config.metricsCertDir : undefined,
      });
      if (cluster.exec) {
        set.run = [resolvePluginPath(cluster.exec, env.PATH)];
        plugin = true;
      }
      flags = permissionFlags(set);
    }
  } catch (err) {
    return { ok: false, message: errorMessage(err).split("\n")[0] };
  }
  // PATH only for an exec plugin: the operator's start-up check resolves the plugin's bare name
  // through it, as its spawn does, and the plugin gets it (kube/exec_config.ts).
  const childEnv = { ...view };
  for (const name of [...DENO_RUNTIME_ENV, ...(plugin ? EXEC_INHERITED_ENV : [])]) {
    const value = env[name];
    if (value !== undefined) childEnv[name] = value;
  }
  // The deno CLI checks dl.deno.land for a newer release on its own, outside --allow-net.
  childEnv.DENO_NO_UPDATE_CHECK = "1";
  return {
    ok: true,
    args: ["run", "--no-prompt", ...denoFlags, ...flags, mainModule, ...args],
    childEnv,
    droppedProxies: starting && !keepProxy
      ? PROXY_VARIABLES.filter((name) => env[name]?.trim())
      : [],
  };
}

/**
 * Whether the launcher turns /metrics to plain http: only for a loopback listener (nothing off
 * this machine can reach it) and only when neither --metrics-secure nor METRICS_SECURE was given.
 */
function servesPlainMetricsByDefault(
  args: string[],
  env: Record<string, string | undefined>,
  metricsBindAddress: string,
): boolean {
  if (env.METRICS_SECURE) return false;
  if (args.some((a) => /^--?metrics-secure(=|$)/.test(a))) return false;
  const bind = parseBindAddress(metricsBindAddress);
  return bind !== undefined && bind.hostname !== undefined && isLoopbackHost(bind.hostname);
}

/**
 * The exec plugin as the one absolute path the operator may run: an absolute command itself, a
 * bare name through each absolute PATH entry in order (an empty or relative entry means the
 * working directory, never trusted here), the first executable file winning. Refused when it, or
 * where a symlink leads, is a shell, an interpreter or `deno`. It reads a stat of each candidate
 * and the found file's real path, nothing else.
 */
function resolvePluginPath(exec: ExecConfig, path: string | undefined): string {
  const where = `exec credential plugin ${exec.command} of kubeconfig user ${exec.user}`;
  const absolute = isAbsolute(exec.command);
  const candidates = absolute
    ? [exec.command]
    : (path ?? "").split(delimiter).filter((dir) => isAbsolute(dir)).map((dir) =>
      join(dir, exec.command)
    );
  const found = candidates.find((p) => fileKind(p) === "file");
  if (!found) {
    if (absolute && fileKind(exec.command) === "other") {
      throw new Error(`${where} is not an executable file`);
    }
    const hint = exec.installHint ? `; ${exec.installHint.replace(/\s*\n\s*/g, " ")}` : "";
    throw new Error(`${where} not found${absolute ? "" : " on PATH"}${hint}`);
  }
  let real = found;
  try {
    real = Deno.realPathSync(found);
  } catch {
    // Unreadable link: the name alone is checked.
  }
  const refused = refusedPluginReason(found) ?? refusedPluginReason(real);
  if (refused) throw new Error(`${where} refused: ${refused}`);
  return found;
}

/** "file" for an executable regular file, else "other" or "missing". */
function fileKind(path: string): "file" | "other" | "missing" {
  try {
    const info = Deno.statSync(path);
    if (!info.isFile) return "other";
    return info.mode === null || (info.mode & 0o111) !== 0 ? "file" : "other";
  } catch {
    return "missing";
  }
}

/** Runs a deno child with exactly env, passing SIGINT/SIGTERM on; resolves to its exit code. */
async function runDeno(args: string[], env: Record<string, string>): Promise<number> {
  // "deno" from PATH: the task grants --allow-run=deno, which names that program.
  const child = new Deno.Command("deno", {
    args,
    env,
    clearEnv: true,
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
  const signals: Partial<Record<Deno.Signal, number>> = { SIGINT: 2, SIGKILL: 9, SIGTERM: 15 };
  return status.signal ? 128 + (signals[status.signal] ?? 1) : status.code;
}

if (import.meta.main) {
  const env = Deno.env.toObject();
  // The task runs in the repository; relative paths are the caller's, as typed.
  const plan = launchPlan(Deno.args, env, env.INIT_CWD || Deno.cwd(), [v8FlagsArg()]);
  if (!plan.ok) {
    console.error(`cocoon-operator: ${plan.message}`);
    Deno.exit(2);
  }
  if (plan.droppedProxies.length > 0) {
    console.error(
      `start: ${plan.droppedProxies.join(", ")} not passed to the operator (its permission set ` +
        "names no proxy); COCOON_START_KEEP_PROXY=1 passes them on and grants the proxy",
    );
  }
  // The exact command on request: by default the operator's own output is all there is.
  if (env.COCOON_START_VERBOSE) console.error(`start: deno ${plan.args.join(" ")}`);
  Deno.exit(await runDeno(plan.args, { ...runtimeEnvFor(plan.childEnv), ...plan.childEnv }));
}
