/**
 * Reading environment variables inside the operator's Deno sandbox. The operator runs with
 * `--allow-env` scoped to the variables it needs; a variable outside that list is treated as
 * unset instead of throwing NotCapable, so optional lookups (HOME for credential files on a
 * developer machine) simply do not happen in a pod. Which variables must be granted is decided
 * once at start-up (permissions.ts), not here.
 */

import { permittedEnv } from "../kube/env.ts";

// The lookup itself lives in kube/ (which may not import from here); the operator's code keeps
// reading it from this module.
export { permittedEnv };

/** A record of the given variables as permittedEnv reads them (unset ones are left out). */
export function permittedEnvRecord(names: readonly string[]): Record<string, string> {
  const out: Record<string, string> = {};
  for (const name of names) {
    const value = permittedEnv(name);
    if (value !== undefined) out[name] = value;
  }
  return out;
}
