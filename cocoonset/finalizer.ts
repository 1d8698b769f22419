/**
 * The CocoonSet's finalizer: added in a pass of its own before the set gets any pod (together
 * with the snapshot ledger, which must cover every pod the set will have), and released by the
 * last step of teardown, once the pods are gone and the registry is cleaned (teardown.ts).
 */
import {
  addFinalizer,
  containsFinalizer,
  isNotFound,
  patchObject,
  removeFinalizer,
  wrapError,
} from "../kube/mod.ts";
import { CocoonSets } from "../common/apis/v1/resources.ts";
import { GO_ON, type SetPass, type Step, stop } from "./pass.ts";
import { startLedger } from "./snapshot_ledger.ts";

/** The CocoonSet's finalizer: held until its pods are gone and its registry tags cleaned. */
export const FINALIZER_NAME = "cocoonset.cocoonstack.io/finalizer";

/**
 * Adds the finalizer (and starts the snapshot ledger of a new set) when the set lacks it; the
 * pass ends there and looks again at once.
 */
export async function ensureFinalizer(pass: SetPass): Promise<Step> {
  const { cs, deps, signal } = pass;
  if (containsFinalizer(cs, FINALIZER_NAME)) return GO_ON;
  await patchObject(deps.client, CocoonSets, cs, (c) => {
    addFinalizer(c, FINALIZER_NAME);
    // Before the first pod: the snapshot ledger covers every pod the set will have.
    startLedger(c);
  }, { optimisticLock: true, signal });
  return stop({ requeue: true });
}

/** Whether the set being torn down still carries the finalizer (the cached copy). */
export function holdsFinalizer(pass: SetPass): boolean {
  return pass.cs.metadata.finalizers?.includes(FINALIZER_NAME) ?? false;
}

/** Whether the live CocoonSet still exists with our finalizer (an uncached read). */
export async function stillFinalizing(pass: SetPass): Promise<boolean> {
  const { cs, deps, signal } = pass;
  try {
    const live = await deps.apiReader.get(
      CocoonSets,
      cs.metadata.namespace ?? "",
      cs.metadata.name ?? "",
      { signal },
    );
    return live.metadata.uid === cs.metadata.uid &&
      (live.metadata.finalizers?.includes(FINALIZER_NAME) ?? false);
  } catch (err) {
    if (isNotFound(err)) return false;
    throw wrapError("confirm cocoonset before registry cleanup", err);
  }
}

/** Releases the finalizer, the last write of a teardown (under the optimistic lock). */
export async function releaseFinalizer(pass: SetPass): Promise<void> {
  await patchObject(pass.deps.client, CocoonSets, pass.cs, (c) => {
    removeFinalizer(c, FINALIZER_NAME);
  }, { optimisticLock: true, signal: pass.signal });
}
