/**
 * Snapshot registry access for the reconcilers. A VM's snapshots live in the OCI repository
 * `<OCI_REGISTRY>/<vmName>` under two tags, `hibernate` (pushed by vk-cocoon on hibernate, read
 * back at wake) and `latest`; the operator only asks whether a tag exists (manifest HEAD) and
 * removes tags it no longer needs (manifest DELETE).
 *
 * Reconcilers depend on the {@link Registry} interface; main.ts builds the real client with
 * {@link newOciRegistry} (credentials: Google ADC for Google hosts, then the Docker config, then
 * anonymous). A failed probe throws a {@link RegistryError} or {@link DeadlineError}, never
 * "absent", so a reconciler retries instead of acting on a guess.
 *
 * The in-memory fake for reconciler tests (`snapshot/testing/fake.ts`) and the scripted HTTP stub
 * (`snapshot/testing/stub_registry.ts`) are test doubles and not exported here.
 *
 * @example Checking for a hibernate snapshot before waking a VM
 * ```ts
 * import { hasHibernateSnapshot, type Registry } from "./mod.ts";
 *
 * async function canWake(reg: Registry, vmName: string, signal: AbortSignal): Promise<boolean> {
 *   return await hasHibernateSnapshot(reg, vmName, signal);
 * }
 * ```
 *
 * @module
 */
export type { Registry } from "./registry.ts";
export { DEFAULT_SNAPSHOT_TAG, hasHibernateSnapshot, HIBERNATE_SNAPSHOT_TAG } from "./registry.ts";
export type { DeleteOutcome, OciRegistry, OciRegistryOptions } from "./oci.ts";
export { buildRegistry, newOciRegistry } from "./oci.ts";
export type { RegistryDiagnostic } from "./errors.ts";
export { RegistryError } from "./errors.ts";
export type { FetchFn } from "./deadline.ts";
export { DeadlineError } from "./deadline.ts";
export type { RegistryBase } from "./reference.ts";
export type { Authenticator, AuthTarget, Credential, Keychain } from "./auth/keychain.ts";
export type { EnvGetter, TextFileReader } from "./auth/env.ts";
