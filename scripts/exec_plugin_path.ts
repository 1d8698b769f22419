/**
 * The one program `deno task start` lets the operator run: a kubeconfig user's exec credential
 * plugin, resolved here to one absolute path (a bare name through PATH, as the operator's own
 * spawn will resolve it with the same PATH), after making sure it exists, is an executable file,
 * and is not a shell, an interpreter or `deno` (under its own name or where a symlink leads).
 * The operator is granted `--allow-run=<that path>` and nothing else to run.
 */
import { delimiter, isAbsolute, join } from "node:path";
import { type ExecConfig, refusedPluginReason } from "../kube/exec_config.ts";

/** What the resolution looks at (tests pass a fake file system). */
export interface PluginLookup {
  /** PATH of the environment the operator will get. */
  path: string | undefined;
  /** "file" for an executable regular file, else "other" / "missing". */
  kind: (path: string) => "file" | "other" | "missing";
  /** Where symlinks lead (the path itself when none). */
  realPath: (path: string) => string;
}

/** The real file system. */
export const systemLookup = (path: string | undefined): PluginLookup => ({
  path,
  kind: (p) => {
    try {
      const info = Deno.statSync(p);
      if (!info.isFile) return "other";
      return info.mode === null || (info.mode & 0o111) !== 0 ? "file" : "other";
    } catch {
      return "missing";
    }
  },
  realPath: (p) => {
    try {
      return Deno.realPathSync(p);
    } catch {
      return p;
    }
  },
});

/** The paths a lookup of `command` looks at: itself if absolute, else each absolute PATH entry's. */
export function pluginCandidates(command: string, path: string | undefined): string[] {
  if (isAbsolute(command)) return [command];
  // An empty or relative PATH entry means the working directory: never trusted here.
  return (path ?? "").split(delimiter).filter((dir) => isAbsolute(dir)).map((dir) =>
    join(dir, command)
  );
}

/** The absolute path to grant for `exec`; throws an Error with a one-line message. */
export function resolvePluginPath(exec: ExecConfig, lookup: PluginLookup): string {
  const where = `exec credential plugin ${exec.command} of kubeconfig user ${exec.user}`;
  const hint = exec.installHint ? `; ${exec.installHint.replace(/\s*\n\s*/g, " ")}` : "";
  let found: string | undefined;
  if (isAbsolute(exec.command)) {
    const kind = lookup.kind(exec.command);
    if (kind === "other") throw new Error(`${where} is not an executable file`);
    if (kind === "file") found = exec.command;
  } else {
    for (const candidate of pluginCandidates(exec.command, lookup.path)) {
      if (lookup.kind(candidate) === "file") {
        found = candidate;
        break;
      }
    }
  }
  if (!found) {
    throw new Error(
      `${where} not found${isAbsolute(exec.command) ? "" : " on PATH"}${hint}`,
    );
  }
  const refused = refusedPluginReason(found) ?? refusedPluginReason(lookup.realPath(found));
  if (refused) throw new Error(`${where} refused: ${refused}`);
  return found;
}
