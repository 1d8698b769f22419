/**
 * The CocoonSet's finalizer: added with the snapshot ledger in a pass of its own before any pod,
 * released last by teardown once the pods are gone and the registry is cleaned.
 */
import { addFinalizer, containsFinalizer, patchObject, removeFinalizer } from "../kube/mod.ts";
import { CocoonSets } from "../common/apis/v1/resources.ts";
import { GO_ON, readStored, type SetPass, type Step, stop } from "./pass.ts";
import { startLedger } from "./snapshot_ledger.ts";

export const FINALIZER_NAME = "cocoonset.cocoonstack.io/finalizer";

/** The Finalizer step: a set without it gets it (and its ledger), and the pass looks again. */
export async function ensureFinalizer(pass: SetPass): Promise<Step> {
  const { cs, deps, signal } = pass;
  if (containsFinalizer(cs, FINALIZER_NAME)) return GO_ON;
  await patchObject(deps.client, CocoonSets, cs, (c) => {
    addFinalizer(c, FINALIZER_NAME);
    startLedger(c);
  }, { optimisticLock: true, signal });
  return stop({ requeue: true });
}

/** Whether the live set (an uncached read) still exists with the finalizer. */
export async function stillFinalizing(pass: SetPass): Promise<boolean> {
  const live = await readStored(pass, CocoonSets, pass.cs, "confirm before registry cleanup");
  return !!live && live.metadata.uid === pass.cs.metadata.uid &&
    containsFinalizer(live, FINALIZER_NAME);
}

/** Releases the finalizer, the last write of a teardown. */
export async function releaseFinalizer(pass: SetPass): Promise<void> {
  await patchObject(pass.deps.client, CocoonSets, pass.cs, (c) => {
    removeFinalizer(c, FINALIZER_NAME);
  }, { optimisticLock: true, signal: pass.signal });
}
