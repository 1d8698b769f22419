/**
 * What the first step of `deno task start` needs (scripts/start.ts), with no import: that step
 * runs before every operator start, and loading the planning code (scripts/launch_plan.ts)
 * would cost it Deno's Node compatibility layer (node:path, node:util) and the npm loader
 * (js-yaml, through kube/kubeconfig.ts): about 50 ms of CPU of the ~85 ms the step took
 * (`perf stat -e task-clock`, docs/architecture.md "Start-up"). Modules it needs only for some
 * input (config.ts for a --kubeconfig flag, kube/kubeconfig.ts in a pod) are loaded when that
 * input is there (loadReadPathDeps).
 *
 * The variable lists come from ../operator_env.ts, a module of plain data, not from
 * permissions.ts (which would load the rest).
 *
 * @module
 */
import { LOCAL_ONLY_ENV, OPERATOR_ENV, PROXY_VARIABLES } from "../operator_env.ts";

/** What the deno runtime of the operator reads by itself: its cache, npm registry, trust store. */
export const DENO_RUNTIME_ENV: readonly string[] = [
  "DENO_DIR",
  "DENO_CERT",
  "DENO_TLS_CA_STORE",
  "DENO_NO_UPDATE_CHECK",
  "NPM_CONFIG_REGISTRY",
  "XDG_CACHE_HOME",
  "NO_COLOR",
];

/** The launcher's own settings. */
const LAUNCHER_SETTINGS = [
  "COCOON_START_VERBOSE",
  "COCOON_START_KEEP_PROXY",
  "INIT_CWD",
  // Where the second step finds `deno` (its --allow-run=deno is resolved through PATH).
  "PATH",
];

/**
 * Every variable the launcher reads, in the order of the task's `--allow-env`
 * (scripts/start_test.ts compares the two): the operator's, the deno runtime's, the launcher's own.
 */
export const FIRST_STEP_ENV: readonly string[] = [
  ...new Set([...OPERATOR_ENV, ...LOCAL_ONLY_ENV, ...DENO_RUNTIME_ENV, ...LAUNCHER_SETTINGS]),
];

/** The proxy variables (operator_env.ts). */
export const FIRST_STEP_PROXY_VARIABLES: readonly string[] = PROXY_VARIABLES;

/** Marks the second step (reads granted); set by the first for the second only. */
export const SECOND_STEP_FLAG = "--cocoon-start-read-granted";

/** Marks the plugin lookup step: reads of the plugin's candidate paths only. */
export const PLUGIN_STEP_FLAG = "--cocoon-start-resolve-plugin";

/** What launcherReadPaths needs from the heavier modules. */
export interface ReadPathDeps {
  /** The --kubeconfig of this command line (config.ts parseConfig); throws on a bad one. */
  kubeconfigFlag(args: string[], env: Record<string, string | undefined>): string | undefined;
  /** kube/kubeconfig.ts SERVICE_ACCOUNT_DIR, needed only when KUBERNETES_SERVICE_HOST is set. */
  serviceAccountDir?: string;
}

/**
 * Loads what launcherReadPaths needs for this input only: config.ts when an argument names
 * the kubeconfig flag (no other argument can set config.kubeconfig), kube/kubeconfig.ts when
 * KUBERNETES_SERVICE_HOST is set. The common case (no flag, outside a cluster) loads nothing.
 */
export async function loadReadPathDeps(
  args: string[],
  env: Record<string, string | undefined>,
): Promise<ReadPathDeps> {
  let kubeconfigFlag: ReadPathDeps["kubeconfigFlag"] = () => undefined;
  if (args.some((a) => a.includes("kubeconfig"))) {
    const { parseConfig } = await import("../config.ts");
    kubeconfigFlag = (a, e) => parseConfig(a, e).kubeconfig;
  }
  const serviceAccountDir = env.KUBERNETES_SERVICE_HOST
    ? (await import("../kube/kubeconfig.ts")).SERVICE_ACCOUNT_DIR
    : undefined;
  return { kubeconfigFlag, serviceAccountDir };
}

/** POSIX: whether p is absolute (node:path isAbsolute). */
export function isAbsolutePath(p: string): boolean {
  return p.startsWith("/");
}

/**
 * POSIX: p against the absolute folder cwd, normalized (node:path resolve(cwd, p): `.` and
 * empty segments dropped, `..` climbing, no trailing slash).
 */
export function resolvePath(cwd: string, p: string): string {
  const out: string[] = [];
  for (const seg of (isAbsolutePath(p) ? p : `${cwd}/${p}`).split("/")) {
    if (seg === "" || seg === ".") continue;
    if (seg === "..") out.pop();
    else out.push(seg);
  }
  return `/${out.join("/")}`;
}

/**
 * The files the second step may read, from the environment and flags alone: what locateCluster
 * probes (--kubeconfig, each KUBECONFIG entry, the service-account token when
 * KUBERNETES_SERVICE_HOST is set, ~/.kube/config) and the Google credentials file whose token
 * endpoint the permission set names. Paths are absolute.
 */
export function readPaths(
  operatorArgs: string[],
  env: Record<string, string | undefined>,
  cwd: string,
  deps: ReadPathDeps,
): string[] {
  const abs = (p: string) => isAbsolutePath(p) ? p : resolvePath(cwd, p);
  const paths: string[] = [];
  try {
    const kubeconfig = deps.kubeconfigFlag(operatorArgs, env);
    if (kubeconfig) paths.push(abs(kubeconfig));
  } catch {
    // The second step reports a bad command line; it needs no file for that.
  }
  for (const p of (env.KUBECONFIG ?? "").split(":")) if (p) paths.push(abs(p));
  if (env.KUBERNETES_SERVICE_HOST && deps.serviceAccountDir) paths.push(deps.serviceAccountDir);
  const home = env.HOME?.replace(/\/+$/, "");
  if (home) {
    paths.push(`${home}/.kube/config`);
    paths.push(`${home}/.config/gcloud/application_default_credentials.json`);
  }
  if (env.GOOGLE_APPLICATION_CREDENTIALS) paths.push(abs(env.GOOGLE_APPLICATION_CREDENTIALS));
  return [...new Set(paths)].filter((p) => !p.includes(","));
}

/**
 * env without the proxy variables unless COCOON_START_KEEP_PROXY=1: the second step's own deno
 * runtime would otherwise reach out through them too.
 */
export function withoutProxies(env: Record<string, string>): Record<string, string> {
  if (env.COCOON_START_KEEP_PROXY === "1") return env;
  return Object.fromEntries(
    Object.entries(env).filter(([k]) => !FIRST_STEP_PROXY_VARIABLES.includes(k)),
  );
}

/** The variables of FIRST_STEP_ENV that are set. */
export function launcherEnvironment(): Record<string, string> {
  const out: Record<string, string> = {};
  for (const name of FIRST_STEP_ENV) {
    const v = Deno.env.get(name);
    if (v !== undefined) out[name] = v;
  }
  return out;
}

/** Runs a deno child with exactly env, passing SIGINT/SIGTERM on; resolves to its exit code. */
export async function runDeno(args: string[], env: Record<string, string>): Promise<number> {
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

function signalNumber(sig: Deno.Signal): number {
  return sig === "SIGINT" ? 2 : sig === "SIGTERM" ? 15 : sig === "SIGKILL" ? 9 : 1;
}
