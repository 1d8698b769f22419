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
 * LAUNCHER_ENV and running `deno`; no file. That first step works out from the environment alone
 * which files describe the cluster (the kubeconfig files, the service-account token, the Google
 * credentials file) and runs this script again granting reads of exactly those
 * (launcherReadPaths). The second step reads them, computes the operator's set and starts it.
 * With an exec credential plugin, the lookup of that plugin on PATH runs in a third, short-lived
 * step granted reads of the candidate paths only (resolvePluginInChild).
 *
 * Flags after the task name go to the operator. A configuration or cluster problem prints one
 * line and exits 2 before the operator starts; otherwise the exit code is the operator's.
 *
 * Module loading per step, for start-up: the first step loads scripts/launcher_first_step.ts
 * only (no Node compatibility layer, no npm package); the second and third load the planning
 * code, scripts/launch_plan.ts. Imported as a module (tests, tools), this one loads it all and
 * exports the planning functions.
 *
 * @module
 */
import type { LaunchPlan, PluginResolver } from "./launch_plan.ts";
import { v8FlagsArg } from "./runtime_flags.ts";
import {
  FIRST_STEP_ENV,
  launcherEnvironment,
  loadReadPathDeps,
  PLUGIN_STEP_FLAG,
  readPaths,
  runDeno,
  SECOND_STEP_FLAG,
  withoutProxies,
} from "./launcher_first_step.ts";

export type { LaunchPlan, PluginResolver } from "./launch_plan.ts";

const startModule = new URL(import.meta.url).pathname;

/** This process is the first step: run by the task, with no file to read. */
const isFirstStep = import.meta.main && Deno.args[0] !== SECOND_STEP_FLAG &&
  Deno.args[0] !== PLUGIN_STEP_FLAG;

// Every other use of this module gets the planning code, loaded before anything is exported.
const planning = isFirstStep ? undefined : await import("./launch_plan.ts");

function planningCode(): typeof import("./launch_plan.ts") {
  if (!planning) throw new Error("the launcher's first step does not load its planning code");
  return planning;
}

/**
 * Every variable the launcher reads: exactly the task's `--allow-env` (scripts/start_test.ts
 * compares the two; scripts/launcher_first_step_test.ts the lists it is made of).
 */
export const LAUNCHER_ENV: readonly string[] = FIRST_STEP_ENV;

/** The files the second step may read (launcher_first_step.ts readPaths). */
export function launcherReadPaths(
  operatorArgs: string[],
  env: Record<string, string | undefined>,
  cwd: string,
): string[] {
  return planningCode().launcherReadPaths(operatorArgs, env, cwd);
}

/** What the launcher will run, or the one-line reason it will not (launch_plan.ts). */
export function launchPlan(
  operatorArgs: string[],
  env: Record<string, string | undefined>,
  cwd: string,
  denoFlags: string[] = [],
  resolvePlugin?: PluginResolver,
): LaunchPlan {
  return planningCode().launchPlan(operatorArgs, env, cwd, denoFlags, resolvePlugin);
}

/**
 * The `deno` arguments of the second step: read access to `read` only, the launcher's variables,
 * running deno. It runs with the operator's V8 flags too: V8 rejects a module's code cache written
 * under other flags, so a second step without them and the operator would rewrite each other's
 * cache of the modules they share (config.ts, permissions.ts, js-yaml, …) on every start
 * (docs/architecture.md, "Start-up").
 */
export function secondStepArgs(read: readonly string[], operatorArgs: readonly string[]): string[] {
  return [
    "run",
    "--no-prompt",
    v8FlagsArg(),
    ...(read.length ? [`--allow-read=${read.join(",")}`] : []),
    `--allow-env=${LAUNCHER_ENV.join(",")}`,
    "--allow-run=deno",
    startModule,
    SECOND_STEP_FLAG,
    ...operatorArgs,
  ];
}

if (import.meta.main && Deno.args[0] === PLUGIN_STEP_FLAG) {
  planningCode().runPluginStep(Deno.args[1]);
} else if (import.meta.main) {
  const env = launcherEnvironment();
  // The task runs in the repository; relative paths are the caller's, as typed.
  const cwd = env.INIT_CWD || Deno.cwd();
  if (isFirstStep) {
    const read = readPaths(Deno.args, env, cwd, await loadReadPathDeps(Deno.args, env));
    const code = await runDeno(secondStepArgs(read, Deno.args), {
      ...withoutProxies(env),
      INIT_CWD: cwd,
      DENO_NO_UPDATE_CHECK: "1",
    });
    Deno.exit(code);
  }
  await planningCode().runSecondStep(Deno.args.slice(1), env, cwd);
}
