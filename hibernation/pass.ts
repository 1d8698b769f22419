/**
 * What the hibernate and wake steps work with: one reconcile pass over one request whose pod and
 * VM are known, under that VM's lock.
 *
 * @module
 */
import type { CocoonHibernation } from "../common/apis/v1/mod.ts";
import type { Clock, Pod, Reader, Writer } from "../kube/mod.ts";
import type { Registry } from "../snapshot/registry.ts";
import type { VMNameIndex } from "../snapshotgate/mod.ts";
import type { PhaseTransitions } from "./transitions.ts";

/** The request, its target pod and the pod's VM name, as read at the start of the pass. */
export interface RequestPass {
  hib: CocoonHibernation;
  pod: Pod;
  vmName: string;
  signal: AbortSignal;
}

/** What the steps may touch: the API (pod annotations), the registry, the status, the time. */
export interface StepDeps {
  client: Writer;
  registry: Registry;
  /** Uncached reads: the snapshot gate reads claimants past the cache right before a delete. */
  reader: Reader;
  /** The cache's VM-name index: where the gate finds the namespaces to read. */
  index: VMNameIndex;
  transitions: PhaseTransitions;
  clock: Clock;
}
