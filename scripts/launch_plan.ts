/**
 * The planning half of `deno task start` (scripts/start.ts has the whole story): the operator's
 * permission set, command line and environment for this machine's configuration, computed by
 * the launcher's second step; and the exec plugin lookup of the third. The first step does not
 * load this module (scripts/launcher_first_step.ts says why).
 *
 * @module
 */
import { isAbsolute, resolve } from "node:path";
import { parseConfig } from "../config.ts";
import { clusterAccess, locateCluster, SERVICE_ACCOUNT_DIR } from "../kube/kubeconfig.ts";
import { errorMessage } from "../kube/errors.ts";
import { parseBindAddress } from "../kube/bind_address.ts";
import { isLoopbackHost } from "../kube/loopback.ts";
import {
  LOCAL_ONLY_ENV,
  localPermissionSet,
  OPERATOR_ENV,
  permissionFlags,
  PROXY_VARIABLES,
} from "../permissions.ts";
import { runtimeEnvFor, v8FlagsArg } from "./runtime_flags.ts";
import { EXEC_INHERITED_ENV } from "../kube/exec_config.ts";
import type { ExecConfig } from "../kube/exec_config.ts";
import { pluginCandidates, resolvePluginPath, systemLookup } from "./exec_plugin_path.ts";
import {
  DENO_RUNTIME_ENV,
  FIRST_STEP_ENV,
  PLUGIN_STEP_FLAG,
  type ReadPathDeps,
  readPaths,
  runDeno,
} from "./launcher_first_step.ts";

/** The launcher's entry, which each step runs again. */
const startModule = new URL("./start.ts", import.meta.url).pathname;

/**
 * Every variable the launcher reads: exactly the task's `--allow-env` (scripts/start_test.ts
 * compares the two); defined with the first step, which must not load this module.
 */
export const launcherEnv: readonly string[] = FIRST_STEP_ENV;

/** The variables the operator process is started with, taken from the launcher's environment. */
export function operatorEnvironment(
  env: Record<string, string | undefined>,
  overrides: Record<string, string>,
  withExecPlugin = false,
): Record<string, string> {
  const keepProxy = env.COCOON_START_KEEP_PROXY === "1";
  const out: Record<string, string> = {};
  // PATH only for an exec plugin: the operator's start-up check resolves the plugin's bare name
  // through it (as its spawn does), and the plugin itself gets it (kube/exec_config.ts).
  const forPlugin = withExecPlugin ? EXEC_INHERITED_ENV : [];
  for (const name of [...OPERATOR_ENV, ...LOCAL_ONLY_ENV, ...DENO_RUNTIME_ENV, ...forPlugin]) {
    if (!keepProxy && PROXY_VARIABLES.includes(name)) continue;
    const v = overrides[name] ?? env[name];
    if (v !== undefined) out[name] = v;
  }
  // The deno CLI checks dl.deno.land for a newer release on its own, outside --allow-net.
  out.DENO_NO_UPDATE_CHECK = "1";
  return out;
}

/** What launcherReadPaths needs, all loaded (this module imports both). */
export const readPathDeps: ReadPathDeps = {
  kubeconfigFlag: (args, env) => parseConfig(args, env).kubeconfig,
  serviceAccountDir: SERVICE_ACCOUNT_DIR,
};

/** launcher_first_step.ts readPaths with every dependency at hand. */
export function launcherReadPaths(
  operatorArgs: string[],
  env: Record<string, string | undefined>,
  cwd: string,
): string[] {
  return readPaths(operatorArgs, env, cwd, readPathDeps);
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
    for (const name of PROXY_VARIABLES) delete view[name];
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

/**
 * The second step may read only the cluster's files, so looking the plugin up (stat, realpath)
 * on PATH runs in a child granted reads of exactly the candidate paths (exec_plugin_path.ts
 * pluginCandidates), and nothing else: the launcher never reads the PATH folders themselves.
 */
export function resolvePluginInChild(exec: ExecConfig, path: string | undefined): string {
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
      PLUGIN_STEP_FLAG,
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
  for (const name of DENO_RUNTIME_ENV) {
    const v = Deno.env.get(name);
    if (v !== undefined) out[name] = v;
  }
  return out;
}

/** The lookup step (no env, reads of the candidates only): the path on stdout, or why not. */
export function runPluginStep(request: string): never {
  const { exec, path } = JSON.parse(request) as { exec: ExecConfig; path: string | null };
  try {
    console.log(resolvePluginPath(exec, systemLookup(path ?? undefined)));
    Deno.exit(0);
  } catch (err) {
    console.log(errorMessage(err).split("\n")[0]);
    Deno.exit(2);
  }
}

/** The second step: plans the operator's start and runs it; exits with its code. */
export async function runSecondStep(
  operatorArgs: string[],
  env: Record<string, string>,
  cwd: string,
): Promise<never> {
  const plan = launchPlan(operatorArgs, env, cwd, [v8FlagsArg()], resolvePluginInChild);
  if (!plan.ok) {
    console.error(`cocoon-operator: ${plan.message}`);
    Deno.exit(2);
  }
  // The exact command on request: by default the operator's own output is all there is.
  if (env.COCOON_START_VERBOSE) console.error(`start: deno ${plan.args.join(" ")}`);
  Deno.exit(await runDeno(plan.args, { ...runtimeEnvFor(plan.childEnv), ...plan.childEnv }));
}
