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
  /**
   * A manifest digest: the one the registry gave a push (`pushed`), or the `:hibernate` manifest
   * a VM was restored or woken from (`ready`).
   */
  digest?: string;
  /** Clock time (ms) when it happened. */
  at: number;
}

/** One recorded event with its sequence number (1, 2, ...). */
export interface NumberedSimEvent extends SimEvent {
  seq: number;
}

/**
 * The most recent simulator events, numbered, for readers in another process (the status
 * endpoint): a reader asks for what came after the last number it saw. Bounded, so a long run
 * keeps only the newest `capacity` events; `since` tells a reader whether it missed some.
 */
export class SimEventLog {
  readonly #capacity: number;
  readonly #events: NumberedSimEvent[] = [];
  #next = 1;

  constructor(capacity = 10_000) {
    this.#capacity = Math.max(1, capacity);
  }

  /** Records one event (the simulator's onEvent). */
  record(ev: SimEvent): void {
    this.#events.push({ ...ev, seq: this.#next++ });
    if (this.#events.length > this.#capacity) this.#events.shift();
  }

  /** Events numbered above `after`, oldest first, and the number the next event will get. */
  since(after = 0): { events: NumberedSimEvent[]; next: number } {
    return { events: this.#events.filter((e) => e.seq > after), next: this.#next };
  }
}
