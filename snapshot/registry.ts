/**
 * The snapshot-registry contract the CocoonSet and CocoonHibernation reconcilers share.
 *
 * A VM's snapshots live in the repository `<OCI_REGISTRY>/<vmName>` under two tags: `hibernate`
 * (written by vk-cocoon when a VM is hibernated, read back at wake) and `latest`.
 */

import { wrapError } from "../kube/errors.ts";

/**
 * Tag of the snapshot vk-cocoon pushes on hibernate and restores from at wake.
 * Kept local (mirrors cocoon-common meta.HibernateSnapshotTag) so this module does not depend on
 * common/meta landing first.
 */
export const HIBERNATE_SNAPSHOT_TAG = "hibernate";

/** Tag of a VM's default snapshot (mirrors cocoon-common meta.DefaultSnapshotTag). */
export const DEFAULT_SNAPSHOT_TAG = "latest";

/**
 * The subset of registry operations the reconcilers need; the OCI client satisfies it and tests
 * swap in the in-memory fake.
 */
export interface Registry {
  /** Reports whether `<name>:<reference>` exists. Absent is `false`; any other failure throws. */
  hasManifest(name: string, reference: string, signal?: AbortSignal): Promise<boolean>;
  /** Ensures `<name>:<reference>` is gone: an already-absent manifest counts as success. */
  deleteManifest(name: string, reference: string, signal?: AbortSignal): Promise<void>;
}

/**
 * Reports whether vmName has a `hibernate` snapshot: the same lookup vk-cocoon performs at wake.
 * A failed probe throws (never "absent"), so the caller retries instead of acting on a guess.
 */
export async function hasHibernateSnapshot(
  reg: Registry,
  vmName: string,
  signal?: AbortSignal,
): Promise<boolean> {
  try {
    return await reg.hasManifest(vmName, HIBERNATE_SNAPSHOT_TAG, signal);
  } catch (err) {
    throw wrapError(`probe hibernate snapshot ${vmName}`, err);
  }
}
