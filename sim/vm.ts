/**
 * The simulated VMs: what the simulator remembers about the VM behind each pod on its nodes,
 * how it re-adopts pods after a restart, and how it mints the things a real VM would get (ids,
 * addresses, snapshot contents).
 *
 * @module
 */
import type { Pod } from "../kube/core.ts";
import { ANNOTATION_MANAGED, ANNOTATION_TRUE } from "../common/meta/keys.ts";
import {
  LIFECYCLE_STATE_FAILED,
  LIFECYCLE_STATE_HIBERNATED,
  LIFECYCLE_STATE_HIBERNATING,
  LIFECYCLE_STATE_READY,
  readLifecycleStatus,
} from "../common/meta/lifecycle.ts";
import { isContainerRunning } from "../common/meta/pod.ts";
import { parseVMRuntime } from "../common/meta/vmruntime.ts";
import { parseVMSpec } from "../common/meta/vmspec.ts";

/**
 * Where a VM is in its life. `booting` covers fresh boots, restores, forks and wakes; the
 * `dueAt` of a record says when its current step (boot, hibernate, delete) completes.
 */
export type VmPhase =
  | "new"
  | "booting"
  | "running"
  | "hibernating"
  | "hibernated"
  | "failed"
  | "deleting";

/** The simulator's memory of one pod's VM. */
export interface VmRecord {
  /** The pod's uid: a re-created pod of the same name starts a new record. */
  uid: string;
  namespace: string;
  name: string;
  node: string;
  /** `vm.cocoonstack.io/name`. */
  vmName: string;
  phase: VmPhase;
  /** The boot in progress is a wake from `:hibernate`. */
  waking: boolean;
  /** The VM exists on the node (booted, not yet hibernated or removed). */
  alive: boolean;
  vmId: string;
  ip: string;
  /** VNC port the simulator assigned (0: none). */
  vncPort: number;
  /** Clock time when the step in progress completes. */
  dueAt: number;
  /** Silent mode: the `:hibernate` push is done and the removal is due at dueAt. */
  hibernatePushed?: boolean;
  /** Lifecycle state last written, with the generation echoed next to it. */
  state: string;
  echoed?: number;
  /** lifecycle-state-message last written ("" when none). */
  message: string;
  /**
   * Digest of the `:hibernate` manifest the running VM was restored or woken from; "" for a VM
   * that booted fresh or forked. Tests compare it with the digest of the push it came from.
   */
  restoredFrom: string;
  /** A status patch for the current state that has not reached the API server yet. */
  pendingStatus?: Record<string, unknown>;
}

/** A copy of a record for callers outside the kubelet (tests, benchmarks). */
export type VmInfo = Readonly<Omit<VmRecord, "uid" | "pendingStatus">>;

/** Whether the VM's lifecycle is cocoon's (false for static toolboxes, which wrap a given VM). */
export function isManaged(pod: Pod): boolean {
  return pod.metadata.annotations?.[ANNOTATION_MANAGED] === ANNOTATION_TRUE;
}

/** A record for a pod the simulator sees for the first time on one of its nodes. */
function newRecord(pod: Pod, node: string): VmRecord {
  return {
    uid: pod.metadata.uid ?? "",
    namespace: pod.metadata.namespace ?? "",
    name: pod.metadata.name ?? "",
    node,
    vmName: parseVMSpec(pod).vmName,
    phase: "new",
    waking: false,
    alive: false,
    vmId: "",
    ip: "",
    vncPort: 0,
    dueAt: 0,
    state: "",
    message: "",
    restoredFrom: "",
  };
}

/**
 * Rebuilds the record of a pod whose VM this simulator (or a previous run of it) already
 * reported on, from the annotations it wrote, as vk-cocoon's startup reconcile re-adopts VMs:
 * ready + id + running container → running; hibernated → hibernated; failed → failed; a
 * hibernation cut short is redone. Anything else boots afresh.
 */
export function adoptRecord(pod: Pod, node: string, now: number): VmRecord {
  const rec = newRecord(pod, node);
  const life = readLifecycleStatus(pod);
  const runtime = parseVMRuntime(pod);
  const adopt = (phase: VmPhase, alive: boolean) => {
    rec.phase = phase;
    rec.alive = alive;
    rec.state = life.state;
    rec.echoed = life.observedGeneration;
    rec.message = life.message;
    rec.vmId = alive ? runtime.vmID : "";
    rec.ip = alive ? runtime.ip : "";
    rec.dueAt = now;
    return rec;
  };
  if (pod.status?.phase === "Failed") return adopt("failed", false);
  switch (life.state) {
    case LIFECYCLE_STATE_READY:
      if (runtime.vmID && isContainerRunning(pod)) return adopt("running", true);
      break;
    case LIFECYCLE_STATE_HIBERNATING:
      if (runtime.vmID) return adopt("hibernating", true);
      break;
    case LIFECYCLE_STATE_HIBERNATED:
      return adopt("hibernated", false);
    case LIFECYCLE_STATE_FAILED:
      return adopt("failed", runtime.vmID !== "" && isContainerRunning(pod));
  }
  return rec;
}

/** Hands out VM ids and addresses; ids are fresh per boot, addresses unique per simulator. */
export class VmIdentities {
  #ips = 0;

  /** A fresh VM id, like the hex ids cocoon assigns. */
  nextId(): string {
    return `sim-${crypto.randomUUID().replaceAll("-", "").slice(0, 16)}`;
  }

  /** The next address in 10.88.0.0/13, skipping .0 and .255 host octets. */
  nextIp(): string {
    for (;;) {
      const n = ++this.#ips;
      const last = n & 255;
      if (last === 0 || last === 255) continue;
      return `10.${88 + ((n >> 16) & 7)}.${(n >> 8) & 255}.${last}`;
    }
  }
}

/**
 * The config blob of a pushed snapshot. It names the VM, the tag and the VM id and carries a
 * nonce, so every push has its own digest and a `:hibernate` never shares one with a `:latest`.
 */
export function snapshotContent(vmName: string, tag: string, vmId: string, at: number): string {
  return JSON.stringify({
    simulator: "cocoon-vm-simulator",
    vm: vmName,
    tag,
    vmID: vmId,
    pushedAt: new Date(at).toISOString(),
    nonce: crypto.randomUUID(),
  });
}
