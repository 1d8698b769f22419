/**
 * `deno task start`: runs the operator (main.ts) on a developer machine with the smallest
 * permission set this machine's configuration needs, computed the way the operator itself checks
 * it at start-up (permissions.ts localPermissionSet): the API server of the current kubeconfig
 * context, the OCI_REGISTRY host, the two listeners, the kubeconfig and the files it references,
 * the registry credential files, and the operator's variables; with an exec credential plugin,
 * `--allow-run` for that one program (scripts/exec_plugin_path.ts). The operator process gets
 * nothing more, and an environment holding only those variables (plus what the deno runtime
 * itself reads to find its cache and certificates, and PATH with an exec plugin): no proxy
 * variable unless COCOON_START_KEEP_PROXY=1, in which case the proxy is granted by name like any
 * other host.
 *
 * The launcher is scoped too, in two steps. The task grants it only the variables in
 * launcherEnv and running `deno`; no file. That first step works out from the environment alone
 * which files describe the cluster (the kubeconfig files, the service-account token, the Google
 * credentials file) and runs this script again granting reads of exactly those
 * (launcherReadPaths). The second step reads them, computes the operator's set and starts it.
 * With an exec credential plugin, the lookup of that plugin on PATH runs in a third, short-lived
 * step granted reads of the candidate paths only (resolvePluginInChild).
 *
 * Flags after the task name go to the operator. A configuration or cluster problem prints one
 * line and exits 2 before the operator starts; otherwise the exit code is the operator's.
 */
import { isAbsolute, resolve } from "node:path";
import { parseConfig } from "../config.ts";
import { clusterAccess, locateCluster, serviceAccountDir } from "../kube/kubeconfig.ts";
import { errorMessage } from "../kube/errors.ts";
import { parseBindAddress } from "../kube/bind_address.ts";
import { isLoopbackHost } from "../kube/loopback.ts";
import {
  localOnlyEnv,
  localPermissionSet,
  operatorEnv,
  permissionFlags,
  proxyVariables,
} from "../permissions.ts";
import { runtimeEnvFor, v8FlagsArg } from "./runtime_flags.ts";
import { execInheritedEnv } from "../kube/exec_config.ts";
import type { ExecConfig } from "../kube/exec_config.ts";
import { pluginCandidates, resolvePluginPath, systemLookup } from "./exec_plugin_path.ts";

const startModule = new URL(import.meta.url).pathname;

/** What the deno runtime of the operator reads by itself: its cache, npm registry, trust store. */
const denoRuntimeEnv: readonly string[] = [
  "DENO_DIR",
  "DENO_CERT",
  "DENO_TLS_CA_STORE",
  "DENO_NO_UPDATE_CHECK",
  "NPM_CONFIG_REGISTRY",
  "XDG_CACHE_HOME",
  "NO_COLOR",
];

/** The launcher's own settings. */
const launcherSettings = [
  "COCOON_START_VERBOSE",
  "COCOON_START_KEEP_PROXY",
  "INIT_CWD",
  // Where the second step finds `deno` (its --allow-run=deno is resolved through PATH).
  "PATH",
];

/**
 * Every variable the launcher reads: exactly the task's `--allow-env` (scripts/start_test.ts
 * compares the two).
 */
export const launcherEnv: readonly string[] = [
  ...new Set([...operatorEnv, ...localOnlyEnv, ...denoRuntimeEnv, ...launcherSettings]),
];

/** The variables the operator process is started with, taken from the launcher's environment. */
function operatorEnvironment(
  env: Record<string, string | undefined>,
  overrides: Record<string, string>,
  withExecPlugin = false,
): Record<string, string> {
  const keepProxy = env.COCOON_START_KEEP_PROXY === "1";
  const out: Record<string, string> = {};
  // PATH only for an exec plugin: the operator's start-up check resolves the plugin's bare name
  // through it (as its spawn does), and the plugin itself gets it (kube/exec_config.ts).
  const forPlugin = withExecPlugin ? execInheritedEnv : [];
  for (const name of [...operatorEnv, ...localOnlyEnv, ...denoRuntimeEnv, ...forPlugin]) {
    if (!keepProxy && proxyVariables.includes(name)) continue;
    const v = overrides[name] ?? env[name];
    if (v !== undefined) out[name] = v;
  }
  // The deno CLI checks dl.deno.land for a newer release on its own, outside --allow-net.
  out.DENO_NO_UPDATE_CHECK = "1";
  return out;
}

/**
 * The files the second step may read, from the environment and flags alone: what locateCluster
 * probes (--kubeconfig, each KUBECONFIG entry, the service-account token when
 * KUBERNETES_SERVICE_HOST is set, ~/.kube/config) and the Google credentials file whose token
 * endpoint the permission set names. Paths are absolute.
 */
export function launcherReadPaths(
  operatorArgs: string[],
  env: Record<string, string | undefined>,
  cwd: string,
): string[] {
  const abs = (p: string) => isAbsolute(p) ? p : resolve(cwd, p);
  const paths: string[] = [];
  try {
    const config = parseConfig(operatorArgs, env);
    if (config.kubeconfig) paths.push(abs(config.kubeconfig));
  } catch {
    // The second step reports a bad command line; it needs no file for that.
  }
  for (const p of (env.KUBECONFIG ?? "").split(":")) if (p) paths.push(abs(p));
  if (env.KUBERNETES_SERVICE_HOST) paths.push(serviceAccountDir);
  const home = env.HOME?.replace(/\/+$/, "");
  if (home) {
    paths.push(`${home}/.kube/config`);
    paths.push(`${home}/.config/gcloud/application_default_credentials.json`);
  }
  if (env.GOOGLE_APPLICATION_CREDENTIALS) paths.push(abs(env.GOOGLE_APPLICATION_CREDENTIALS));
  return [...new Set(paths)].filter((p) => !p.includes(","));
}

const mainModule = new URL("../main.ts", import.meta.url).pathname;

/** What the launcher will run, or the one-line reason it will not. */
export type LaunchPlan =
  | {
    ok: true;
    args: string[];
    /** The variables made absolute (KUBECONFIG). */
    env: Record<string, string>;
    /** The operator's whole environment: its own variables only (operatorEnvironment). */
    childEnv: Record<string, string>;
  }
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
  resolvePlugin: PluginResolver = (exec, path) => resolvePluginPath(exec, systemLookup(path)),
): LaunchPlan {
  const overrides: Record<string, string> = {};
  if (env.KUBECONFIG) {
    overrides.KUBECONFIG = env.KUBECONFIG.split(":").filter((p) => p)
      .map((p) => isAbsolute(p) ? p : resolve(cwd, p)).join(":");
  }
  const view: Record<string, string | undefined> = { ...env, ...overrides };
  // Dropped from the operator's environment, so not asked for either (see module doc).
  if (env.COCOON_START_KEEP_PROXY !== "1") {
    for (const name of proxyVariables) delete view[name];
  }
  const lookup = (name: string) => view[name] || undefined;
  let flags: string[];
  let args = operatorArgs;
  let withExecPlugin = false;
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
      // The plugin, if any, as the one absolute path the operator may run.
      if (cluster.exec) {
        set.run = [resolvePlugin(cluster.exec, view.PATH)];
        withExecPlugin = true;
      }
      flags = permissionFlags(set);
    }
  } catch (err) {
    return { ok: false, message: errorMessage(err).split("\n")[0] };
  }
  return {
    ok: true,
    args: ["run", "--no-prompt", ...denoFlags, ...flags, mainModule, ...args],
    env: overrides,
    childEnv: operatorEnvironment(env, overrides, withExecPlugin),
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

/** Resolves an exec plugin to the one absolute path the operator may run (or throws). */
export type PluginResolver = (exec: ExecConfig, path: string | undefined) => string;

/** Marks the plugin lookup step: reads of the plugin's candidate paths only. */
const pluginStepFlag = "--cocoon-start-resolve-plugin";

/**
 * The second step may read only the cluster's files, so looking the plugin up (stat, realpath)
 * on PATH runs in a child granted reads of exactly the candidate paths (exec_plugin_path.ts
 * pluginCandidates), and nothing else: the launcher never reads the PATH folders themselves.
 */
function resolvePluginInChild(exec: ExecConfig, path: string | undefined): string {
  const candidates = pluginCandidates(exec.command, path);
  const readable = (p: string) => Deno.permissions.querySync({ name: "read", path: p }).state;
  if (candidates.every((p) => readable(p) === "granted")) {
    return resolvePluginPath(exec, systemLookup(path));
  }
  const out = new Deno.Command("deno", {
    args: [
      "run",
      "--no-prompt",
      ...(candidates.length ? [`--allow-read=${candidates.join(",")}`] : []),
      startModule,
      pluginStepFlag,
      JSON.stringify({ exec, path: path ?? null }),
    ],
    env: denoEnvironment(),
    clearEnv: true,
    stdin: "null",
    stdout: "piped",
    stderr: "inherit",
  }).outputSync();
  const answer = new TextDecoder().decode(out.stdout).trim();
  if (out.code !== 0) throw new Error(answer || `the plugin lookup failed (exit ${out.code})`);
  return answer;
}

/** The deno runtime's own variables of the launcher's environment, for its child steps. */
function denoEnvironment(): Record<string, string> {
  const out: Record<string, string> = { DENO_NO_UPDATE_CHECK: "1" };
  for (const name of denoRuntimeEnv) {
    const v = Deno.env.get(name);
    if (v !== undefined) out[name] = v;
  }
  return out;
}

/** Marks the second step (reads granted); set by the first for the second only. */
const secondStepFlag = "--cocoon-start-read-granted";

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
  return status.signal ? 128 + signalNumber(status.signal) : status.code;
}

/**
 * env without the proxy variables unless COCOON_START_KEEP_PROXY=1: the second step's own deno
 * runtime would otherwise reach out through them too.
 */
function withoutProxies(env: Record<string, string>): Record<string, string> {
  if (env.COCOON_START_KEEP_PROXY === "1") return env;
  return Object.fromEntries(Object.entries(env).filter(([k]) => !proxyVariables.includes(k)));
}

/** The variables of launcherEnv that are set. */
function launcherEnvironment(): Record<string, string> {
  const out: Record<string, string> = {};
  for (const name of launcherEnv) {
    const v = Deno.env.get(name);
    if (v !== undefined) out[name] = v;
  }
  return out;
}

if (import.meta.main && Deno.args[0] === pluginStepFlag) {
  // The lookup step (no env, reads of the candidates only): the path on stdout, or why not.
  const { exec, path } = JSON.parse(Deno.args[1]) as { exec: ExecConfig; path: string | null };
  try {
    console.log(resolvePluginPath(exec, systemLookup(path ?? undefined)));
    Deno.exit(0);
  } catch (err) {
    console.log(errorMessage(err).split("\n")[0]);
    Deno.exit(2);
  }
} else if (import.meta.main) {
  const env = launcherEnvironment();
  // The task runs in the repository; relative paths are the caller's, as typed.
  const cwd = env.INIT_CWD || Deno.cwd();
  if (Deno.args[0] !== secondStepFlag) {
    const read = launcherReadPaths(Deno.args, env, cwd);
    const code = await runDeno([
      "run",
      "--no-prompt",
      ...(read.length ? [`--allow-read=${read.join(",")}`] : []),
      `--allow-env=${launcherEnv.join(",")}`,
      "--allow-run=deno",
      startModule,
      secondStepFlag,
      ...Deno.args,
    ], { ...withoutProxies(env), INIT_CWD: cwd, DENO_NO_UPDATE_CHECK: "1" });
    Deno.exit(code);
  }
  const operatorArgs = Deno.args.slice(1);
  const plan = launchPlan(operatorArgs, env, cwd, [v8FlagsArg()], resolvePluginInChild);
  if (!plan.ok) {
    console.error(`cocoon-operator: ${plan.message}`);
    Deno.exit(2);
  }
  // The exact command on request: by default the operator's own output is all there is.
  if (env.COCOON_START_VERBOSE) console.error(`start: deno ${plan.args.join(" ")}`);
  Deno.exit(await runDeno(plan.args, { ...runtimeEnvFor(plan.childEnv), ...plan.childEnv }));
}

function signalNumber(sig: Deno.Signal): number {
  return sig === "SIGINT" ? 2 : sig === "SIGTERM" ? 15 : sig === "SIGKILL" ? 9 : 1;
}
