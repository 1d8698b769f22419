/**
 * Reading environment variables inside a Deno sandbox that grants `--allow-env` only for some
 * names: a variable outside the grant reads as unset instead of throwing NotCapable, so the
 * library's optional lookups (KUBECONFIG, HOME, POD_NAME) simply do not happen where the
 * caller did not allow them. Which names to grant is the caller's decision, not kube/'s.
 *
 * @module
 */

/** The value of `name`, or undefined when it is unset or the sandbox does not grant it. */
export function permittedEnv(name: string): string | undefined {
  if (Deno.permissions.querySync({ name: "env", variable: name }).state !== "granted") {
    return undefined;
  }
  return Deno.env.get(name);
}
