/**
 * A kubeconfig user's `exec` section, validated as client-go's kubeconfig loader does, and what
 * running it needs from the sandbox. No logger and no process here: the launcher
 * (scripts/start.ts) imports this to compute `--allow-run`; kube/exec_credential.ts runs it.
 */
import { basename, isAbsolute, resolve } from "node:path";

/** The ExecCredential API versions a plugin may speak (v1alpha1 is gone from client-go too). */
export const EXEC_API_VERSIONS = [
  "client.authentication.k8s.io/v1",
  "client.authentication.k8s.io/v1beta1",
] as const;

/** An ExecCredential API version. */
export type ExecApiVersion = typeof EXEC_API_VERSIONS[number];

/** The variables of the operator's own environment a plugin receives (when granted and set). */
export const EXEC_INHERITED_ENV: readonly string[] = ["PATH", "HOME"];

/** A kubeconfig user's `exec` section, validated. */
export interface ExecConfig {
  /** The kubeconfig user's name, for messages. */
  user: string;
  /**
   * The program: absolute (a kubeconfig path with a slash is resolved against the kubeconfig's
   * folder, as client-go does) or a bare name looked up on PATH.
   */
  command: string;
  args: string[];
  /** The kubeconfig's `env`, in order. */
  env: { name: string; value: string }[];
  apiVersion: ExecApiVersion;
  installHint?: string;
  provideClusterInfo: boolean;
  /** The cluster's `client.authentication.k8s.io/exec` extension, passed as spec.cluster.config. */
  clusterConfig?: unknown;
}

/** An exec section that cannot be used; the message names the user and what is wrong. */
export class ExecConfigError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "ExecConfigError";
  }
}

/**
 * Program names the launcher and the operator refuse as plugins: each would run arbitrary code
 * under the one `--allow-run` grant.
 */
const REFUSED_PROGRAM =
  /^(sh|bash|dash|zsh|ksh|mksh|csh|tcsh|fish|ash|busybox|env|sudo|doas|su|xargs|nohup|timeout|nice|deno|node|nodejs|bun|python[0-9.]*|pypy[0-9.]*|perl[0-9.]*|ruby[0-9.]*|php[0-9.]*|lua[0-9.]*|tclsh[0-9.]*|wish[0-9.]*|pwsh|powershell|osascript|awk|gawk|mawk|nawk)$/;

/** Why a program may not be a plugin, or undefined when it may. */
export function refusedPluginReason(program: string): string | undefined {
  const name = basename(program);
  return REFUSED_PROGRAM.test(name)
    ? `${name} is a shell, interpreter or launcher, which would let the plugin run anything`
    : undefined;
}

type Doc = Record<string, unknown>;

function isDoc(v: unknown): v is Doc {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

/**
 * Validates a kubeconfig user's `exec` section (`dir` is the folder of the kubeconfig file that
 * holds it). Throws ExecConfigError.
 */
export function parseExecConfig(
  user: string,
  exec: Doc,
  dir: string,
  clusterExtensions?: unknown,
): ExecConfig {
  const where = `kubeconfig user ${user}: exec plugin`;
  const command = typeof exec.command === "string" ? exec.command.trim() : "";
  if (command === "") throw new ExecConfigError(`${where} has no command`);
  const apiVersion = exec.apiVersion;
  if (!EXEC_API_VERSIONS.includes(apiVersion as ExecApiVersion)) {
    throw new ExecConfigError(
      `${where} ${command} has apiVersion ${JSON.stringify(apiVersion ?? "")}; ` +
        `supported: ${EXEC_API_VERSIONS.join(", ")}`,
    );
  }
  const mode = exec.interactiveMode;
  if (mode === undefined || mode === "") {
    // client-go defaults v1beta1 to IfAvailable and requires the field for v1.
    if (apiVersion === "client.authentication.k8s.io/v1") {
      throw new ExecConfigError(
        `${where} ${command}: interactiveMode must be set for apiVersion ${apiVersion}`,
      );
    }
  } else if (mode === "Always") {
    throw new ExecConfigError(
      `${where} ${command} sets interactiveMode: Always, but the operator has no terminal; ` +
        "use a plugin that can run non-interactively (interactiveMode: Never or IfAvailable)",
    );
  } else if (mode !== "Never" && mode !== "IfAvailable") {
    throw new ExecConfigError(
      `${where} ${command} has interactiveMode ${JSON.stringify(mode)}; ` +
        "want Never, IfAvailable or Always",
    );
  }
  const args = exec.args ?? [];
  if (!Array.isArray(args) || !args.every((a) => typeof a === "string")) {
    throw new ExecConfigError(`${where} ${command}: args must be a list of strings`);
  }
  const envList = exec.env ?? [];
  if (!Array.isArray(envList)) {
    throw new ExecConfigError(`${where} ${command}: env must be a list of {name, value}`);
  }
  const env = envList.map((e) => {
    if (!isDoc(e) || typeof e.name !== "string" || e.name === "" || e.name.includes("=")) {
      throw new ExecConfigError(`${where} ${command}: env entries need a name (and a value)`);
    }
    return { name: e.name, value: typeof e.value === "string" ? e.value : "" };
  });
  // As client-go: a command with a path separator is relative to its kubeconfig file.
  const resolved = command.includes("/") && !isAbsolute(command) ? resolve(dir, command) : command;
  const refused = refusedPluginReason(resolved);
  if (refused) throw new ExecConfigError(`${where} ${command} refused: ${refused}`);
  const config: ExecConfig = {
    user,
    command: resolved,
    args,
    env,
    apiVersion: apiVersion as ExecApiVersion,
    provideClusterInfo: exec.provideClusterInfo === true,
  };
  if (typeof exec.installHint === "string" && exec.installHint.trim() !== "") {
    config.installHint = exec.installHint.trim();
  }
  const extension = execExtension(clusterExtensions);
  if (extension !== undefined) config.clusterConfig = extension;
  return config;
}

/** The cluster's `client.authentication.k8s.io/exec` extension, if any. */
function execExtension(extensions: unknown): unknown {
  if (!Array.isArray(extensions)) return undefined;
  const named = extensions.find((e) => isDoc(e) && e.name === "client.authentication.k8s.io/exec");
  return isDoc(named) ? named.extension : undefined;
}

/** What running this plugin needs from the sandbox: run access to it and the variables it gets. */
export function execNeeds(config: ExecConfig): { run: string; env: readonly string[] } {
  return { run: config.command, env: EXEC_INHERITED_ENV };
}
