/**
 * What the simulator reports about itself: running counters (tests and benchmarks read them
 * from the handle) and a stream of timestamped events (benchmarks measure phase latencies from
 * it).
 *
 * @module
 */

/** Totals since start. */
export interface SimCounters {
  /** Pods bound to a node by the simulated scheduler. */
  bound: number;
  /** PodScheduled=False/Unschedulable writes (one per new message). */
  unschedulable: number;
  /** VMs that reached `ready` from a fresh boot, a restore or a fork. */
  booted: number;
  /** VMs that reached `ready` again after hibernation. */
  woken: number;
  /** VMs that reported `lifecycle-state=failed` (at boot or later, through a knob). */
  lifecycleFailures: number;
  /** Pods put in phase Failed (the pod-failed knob). */
  podFailures: number;
  /** Hibernations completed (`:hibernate` pushed, VM gone). */
  hibernated: number;
  /** Successful registry pushes (`:hibernate` and `:latest`). */
  pushes: number;
  /** Failed registry pushes (knob or registry error). */
  pushFailures: number;
  /** Deleted pods released with a grace-0 delete. */
  finalized: number;
  /** Work items that failed and were retried with backoff. */
  retries: number;
}

/** Fresh all-zero counters. */
export function newCounters(): SimCounters {
  return {
    bound: 0,
    unschedulable: 0,
    booted: 0,
    woken: 0,
    lifecycleFailures: 0,
    podFailures: 0,
    hibernated: 0,
    pushes: 0,
    pushFailures: 0,
    finalized: 0,
    retries: 0,
  };
}

/** Kinds of simulator events, in the order a pod's life usually produces them. */
export type SimEventType =
  | "bound"
  | "unschedulable"
  | "booting"
  | "ready"
  | "failed"
  | "hibernating"
  | "hibernated"
  | "pushed"
  | "push-failed"
  | "finalized";

/** One thing the simulator did to one pod. */
export interface SimEvent {
  type: SimEventType;
  namespace: string;
  name: string;
  /** The node involved (bound to, running on). */
  node?: string;
  /** `vm.cocoonstack.io/name`, when the pod has one. */
  vmName?: string;
  /** Extra detail: the unschedulable message, the pushed reference, the failure message. */
  detail?: string;
  /** Clock time (ms) when it happened. */
  at: number;
}
