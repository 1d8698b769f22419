/**
 * The simulated kubelet + vk-cocoon provider for the simulator's nodes. For every pod bound to
 * one of them it plays the VM's life on the pod, the way vk-cocoon would with the lifecycle
 * contract of cocoon-common v0.3.0:
 *
 * - boot (after the boot latency): a fresh `vm.cocoonstack.io/id`, an `ip` (and a `vnc-port`
 *   for `conn-type: vnc`), `lifecycle-state=ready`, then a Running / Ready status with the
 *   `agent` container running. Static toolboxes (not `managed`) keep the id and ip the
 *   operator wrote. `restore-from-hibernate` pulls `<vm>:hibernate` first and `fork-from` needs
 *   its source VM running on the same node; either missing fails the VM.
 * - hibernate (`vm.cocoonstack.io/hibernate=true`): `hibernating`, then after the hibernate
 *   latency a fresh `<vm>:hibernate` push, id and ip removed together with
 *   `lifecycle-state=hibernated`, and the pod back to Pending with nothing running (vk-cocoon's
 *   status for a pod without VM). Removing the annotation wakes the VM: a pull of `:hibernate`
 *   and a boot with a fresh id.
 * - delete (deletionTimestamp): after the delete latency, a `<vm>:latest` push when the VM still
 *   exists, the pod's snapshot policy snapshots its role and `keep-snapshot-on-delete` is not
 *   set (best effort, as vk-cocoon), then the grace-0 delete that lets the API server remove
 *   the pod.
 *
 * Every lifecycle write carries the state and the pod's current
 * `cocoonset.cocoonstack.io/generation` stamp in one patch, and a stamp that changes while the
 * VM rests in a state (ready, hibernated, failed) is echoed again. Boots and wakes first write
 * `creating`, so a woken pod never shows a stale `hibernated`. Static toolboxes are never
 * hibernated (their id and ip belong to the operator's spec).
 *
 * Work is level-triggered and serialized per pod: a work queue hands each pod to one worker at
 * a time, latencies are delayed re-queues (no worker waits), failed steps are retried with
 * per-pod backoff, and one bad pod never stops the others.
 *
 * @module
 */
import { getLogger } from "@logtape/logtape";
import type { Client } from "../kube/client.ts";
import type { Clock } from "../kube/clock.ts";
import { type Pod, Pods } from "../kube/core.ts";
import { errorMessage, isConflict, isNotFound } from "../kube/errors.ts";
import type { SharedInformer } from "../kube/informer.ts";
import { keyString, objectKey, parseKey } from "../kube/object.ts";
import { ItemExponentialFailureRateLimiter } from "../kube/rate_limiter.ts";
import { PriorityQueue } from "../kube/priority_queue.ts";
import {
  readHibernateState,
  readKeepSnapshotOnDelete,
  readRestoreFromHibernate,
} from "../common/meta/hibernate.ts";
import {
  ANNOTATION_IP,
  ANNOTATION_VMID,
  ANNOTATION_VNC_PORT,
  LABEL_ROLE,
} from "../common/meta/keys.ts";
import {
  LIFECYCLE_STATE_CREATING,
  LIFECYCLE_STATE_FAILED,
  LIFECYCLE_STATE_HIBERNATED,
  LIFECYCLE_STATE_HIBERNATING,
  LIFECYCLE_STATE_READY,
  lifecycleAnnotations,
  readCocoonSetGeneration,
} from "../common/meta/lifecycle.ts";
import { parseVMRuntime } from "../common/meta/vmruntime.ts";
import { parseVMSpec, shouldSnapshotVM } from "../common/meta/vmspec.ts";
import type { SimCounters, SimEvent } from "./events.ts";
import { DEFAULT_FAIL_MESSAGE, type Knobs, knobsFromAnnotations, mergeKnobs } from "./knobs.ts";
import type { SimRegistry } from "./oci_push.ts";
import {
  podFailedStatus,
  providerFailedStatus,
  runningStatus,
  vmGoneStatus,
} from "./pod_status.ts";
import {
  adoptRecord,
  isManaged,
  snapshotContent,
  VmIdentities,
  type VmInfo,
  type VmRecord,
} from "./vm.ts";
import { HIBERNATE_SNAPSHOT_TAG } from "../snapshot/registry.ts";
import { DEFAULT_SNAPSHOT_TAG } from "../snapshot/registry.ts";

const log = getLogger(["cocoon-operator", "sim", "kubelet"]);

/** How long each simulated VM operation takes (ms; 0 = at once). */
export interface Latencies {
  bootMs: number;
  wakeMs: number;
  hibernateMs: number;
  deleteMs: number;
}

/** Small defaults: slow enough to show intermediate states, fast enough for tests. */
export const DEFAULT_LATENCIES: Latencies = {
  bootMs: 100,
  wakeMs: 100,
  hibernateMs: 150,
  deleteMs: 50,
};

/** What the kubelet needs from the simulator. */
export interface KubeletOptions {
  client: Client;
  registry: SimRegistry;
  pods: SharedInformer<Pod>;
  /** Names of the nodes this simulator runs. May grow while running. */
  ownNodes: ReadonlySet<string>;
  latencies: Latencies;
  /** Knobs for every pod. */
  knobs: Knobs;
  /** Knobs chosen per pod in-process (tests); annotations still win. */
  knobsFor?: (pod: Pod) => Knobs | undefined;
  workers: number;
  clock: Clock;
  counters: SimCounters;
  emit: (ev: Omit<SimEvent, "at">) => void;
  /** Aborts registry calls in flight at shutdown. */
  signal: AbortSignal;
}

/** A push the pod's knob refused. */
class PushRefused extends Error {
  constructor(ref: string) {
    super(`push ${ref} refused by the sim.cocoonstack.io/push-fail knob`);
    this.name = "PushRefused";
  }
}

/** The simulated kubelet; see the module doc. */
export class Kubelet {
  readonly #opts: KubeletOptions;
  readonly #queue: PriorityQueue;
  readonly #records = new Map<string, VmRecord>();
  readonly #ids = new VmIdentities();
  /** Pods whose pending hibernation saw a failed push (a wake request may then cancel it). */
  readonly #pushFailed = new Set<string>();
  #vncPorts = 5900;
  #stopping = false;
  /** The workers of run(), which stop() waits for. */
  #workers: Promise<unknown> = Promise.resolve();

  constructor(opts: KubeletOptions) {
    this.#opts = opts;
    this.#queue = new PriorityQueue({
      clock: opts.clock,
      rateLimiter: new ItemExponentialFailureRateLimiter(20, 5_000),
    });
    const touch = (pod: Pod) => {
      const key = keyString(objectKey(pod));
      const node = pod.spec?.nodeName;
      if ((node && opts.ownNodes.has(node)) || this.#records.has(key)) this.#queue.add(key);
    };
    opts.pods.addEventHandler({
      onAdd: touch,
      onUpdate: (_old, pod) => touch(pod),
      onDelete: touch,
    });
  }

  /** A copy of what the simulator knows about a pod's VM. */
  vm(namespace: string, name: string): VmInfo | undefined {
    const rec = this.#records.get(`${namespace}/${name}`);
    if (!rec) return undefined;
    const { uid: _uid, pendingStatus: _pending, ...info } = rec;
    return { ...info };
  }

  /** Queues every pod already bound to node (after the node joined the simulator). */
  resync(node: string): void {
    for (const pod of this.#opts.pods.listStored()) {
      if (pod.spec?.nodeName === node) this.#queue.add(keyString(objectKey(pod)));
    }
  }

  /** Runs the workers until stop(). */
  async run(): Promise<void> {
    const worker = async () => {
      for (;;) {
        const key = await this.#queue.get();
        if (key === undefined) return;
        try {
          if (!this.#stopping) await this.#sync(key);
          this.#queue.forget(key);
        } catch (err) {
          this.#opts.counters.retries++;
          log.warn("VM step of {pod} failed, retrying: {error}", {
            pod: key,
            error: errorMessage(err),
          });
          this.#queue.addRateLimited(key);
        } finally {
          this.#queue.done(key);
        }
      }
    };
    this.#workers = Promise.all(Array.from({ length: Math.max(1, this.#opts.workers) }, worker));
    await this.#workers;
  }

  /** Stops taking work; steps in flight finish (registry calls are aborted by the signal). */
  async stop(): Promise<void> {
    this.#stopping = true;
    this.#queue.shutDown();
    await this.#workers;
  }

  async #sync(key: string): Promise<void> {
    const { namespace, name } = parseKey(key);
    const pod = this.#opts.pods.getStored(namespace, name);
    const node = pod?.spec?.nodeName;
    if (!pod || !node || !this.#opts.ownNodes.has(node)) {
      this.#forget(key);
      return;
    }
    let rec = this.#records.get(key);
    if (!rec || rec.uid !== (pod.metadata.uid ?? "")) {
      this.#forget(key);
      rec = adoptRecord(pod, node, this.#opts.clock.now());
      this.#records.set(key, rec);
    }
    try {
      await this.#step(key, pod, rec);
    } catch (err) {
      // The pod went away under us: its delete event ends the record, nothing to retry.
      if (isNotFound(err)) return;
      throw err;
    }
  }

  #forget(key: string): void {
    this.#records.delete(key);
    this.#pushFailed.delete(key);
  }

  async #step(key: string, pod: Pod, rec: VmRecord): Promise<void> {
    const now = this.#opts.clock.now();
    if (pod.metadata.deletionTimestamp) return await this.#finalize(key, pod, rec, now);
    if (pod.status?.phase === "Failed" || pod.status?.phase === "Succeeded") return;
    await this.#flushStatus(rec);
    const knobs = this.#knobs(pod);
    switch (rec.phase) {
      case "new":
        return await this.#startBoot(key, pod, rec, knobs, false);
      case "booting":
        if (now < rec.dueAt) return this.#later(key, rec.dueAt - now);
        return await this.#completeBoot(key, pod, rec, knobs);
      case "running":
        if (knobs.fail) return await this.#failRunning(key, pod, rec, knobs);
        if (readHibernateState(pod) && isManaged(pod)) {
          return await this.#startHibernate(key, pod, rec, knobs);
        }
        return await this.#echo(pod, rec);
      case "hibernating":
        if (!readHibernateState(pod) && this.#pushFailed.has(key)) {
          return await this.#cancelHibernate(key, pod, rec);
        }
        if (now < rec.dueAt) return this.#later(key, rec.dueAt - now);
        return await this.#completeHibernate(key, pod, rec, knobs);
      case "hibernated":
        if (!readHibernateState(pod)) return await this.#startBoot(key, pod, rec, knobs, true);
        return await this.#echo(pod, rec);
      case "failed":
        return await this.#echo(pod, rec);
      case "deleting":
        return;
    }
  }

  #knobs(pod: Pod): Knobs {
    const { knobs, invalid } = knobsFromAnnotations(pod);
    if (invalid.length > 0) {
      log.debug("ignoring malformed knobs on {pod}: {invalid}", {
        pod: keyString(objectKey(pod)),
        invalid: invalid.join(", "),
      });
    }
    return mergeKnobs(this.#opts.knobs, this.#opts.knobsFor?.(pod), knobs);
  }

  /** Runs the pod's step again after ms (at once for 0). */
  #later(key: string, ms: number): void {
    if (ms > 0) this.#queue.addAfter(key, ms);
    else this.#queue.add(key);
  }

  #emit(type: SimEvent["type"], rec: VmRecord, detail?: string, digest?: string): void {
    this.#opts.emit({
      type,
      namespace: rec.namespace,
      name: rec.name,
      node: rec.node,
      ...(rec.vmName ? { vmName: rec.vmName } : {}),
      ...(detail ? { detail } : {}),
      ...(digest ? { digest } : {}),
    });
  }

  // --- writes -------------------------------------------------------------------------------

  /**
   * Writes the lifecycle state with the pod's current generation stamp and message in one
   * patch, together with any runtime annotations (null deletes).
   */
  async #writeLifecycle(
    pod: Pod,
    rec: VmRecord,
    state: string,
    message: string,
    runtime: Record<string, string | null> = {},
  ): Promise<void> {
    const generation = readCocoonSetGeneration(pod);
    // vk-cocoon of today writes no lifecycle annotations: only the runtime ones go out.
    const silent = this.#knobs(pod).silentLifecycle === true;
    const annotations = {
      ...runtime,
      ...(silent ? {} : lifecycleAnnotations({ state, observedGeneration: generation, message })),
    };
    if (silent && Object.keys(annotations).length === 0) {
      rec.state = state;
      rec.echoed = generation;
      rec.message = message;
      return;
    }
    await this.#opts.client.patch(Pods, rec.namespace, rec.name, "merge", {
      metadata: { annotations },
    });
    rec.state = state;
    rec.echoed = generation;
    rec.message = message;
  }

  /**
   * Reports a status for the state just entered. The state is recorded before the write, so a
   * failed write is retried on the next step (#flushStatus) without repeating the transition.
   */
  async #setStatus(rec: VmRecord, status: Record<string, unknown>): Promise<void> {
    rec.pendingStatus = status;
    await this.#flushStatus(rec);
  }

  async #flushStatus(rec: VmRecord): Promise<void> {
    const status = rec.pendingStatus;
    if (!status) return;
    await this.#opts.client.patch(Pods, rec.namespace, rec.name, "merge", { status }, {
      subresource: "status",
    });
    if (rec.pendingStatus === status) rec.pendingStatus = undefined;
  }

  /** Re-reports the resting state when the operator stamped a new generation. */
  async #echo(pod: Pod, rec: VmRecord): Promise<void> {
    if (!rec.state) return;
    if (rec.echoed === readCocoonSetGeneration(pod)) return;
    await this.#writeLifecycle(pod, rec, rec.state, rec.message);
  }

  async #push(pod: Pod, rec: VmRecord, tag: string, knobs: Knobs): Promise<void> {
    const ref = `${rec.vmName}:${tag}`;
    const { counters, registry, clock, signal } = this.#opts;
    let digest: string;
    try {
      if (knobs.pushFail) throw new PushRefused(ref);
      digest = await registry.push(
        rec.vmName,
        tag,
        snapshotContent(rec.vmName, tag, rec.vmId, clock.now()),
        signal,
      );
    } catch (err) {
      counters.pushFailures++;
      this.#emit("push-failed", rec, `${ref}: ${errorMessage(err)}`);
      throw err;
    }
    counters.pushes++;
    this.#emit("pushed", rec, ref, digest);
    log.info("pushed {ref} ({digest}) for {pod}", { ref, digest, pod: keyString(objectKey(pod)) });
  }

  // --- boot ---------------------------------------------------------------------------------

  async #startBoot(
    key: string,
    pod: Pod,
    rec: VmRecord,
    knobs: Knobs,
    waking: boolean,
  ): Promise<void> {
    await this.#writeLifecycle(pod, rec, LIFECYCLE_STATE_CREATING, "");
    const { latencies, clock } = this.#opts;
    const delay = knobs.bootDelayMs ?? (waking ? latencies.wakeMs : latencies.bootMs);
    rec.phase = "booting";
    rec.waking = waking;
    rec.dueAt = clock.now() + delay;
    this.#emit("booting", rec, waking ? "wake" : "boot");
    this.#later(key, delay);
  }

  /**
   * Whether the VM can come up (may read the registry): a blocker says why not; a restore or
   * wake also names the digest of the `:hibernate` manifest it pulled.
   */
  async #bootSource(
    pod: Pod,
    rec: VmRecord,
    knobs: Knobs,
  ): Promise<{ blocker?: string; restoredFrom?: string }> {
    if (knobs.fail === "lifecycle") return { blocker: knobs.failMessage ?? DEFAULT_FAIL_MESSAGE };
    if (!isManaged(pod)) {
      const runtime = parseVMRuntime(pod);
      return runtime.vmID && runtime.ip
        ? {}
        : { blocker: `unmanaged vm ${rec.vmName} missing pre-assigned IP/VMID` };
    }
    if (!rec.vmName) {
      return { blocker: `pod ${rec.namespace}/${rec.name} missing vm.cocoonstack.io/name` };
    }
    if (rec.waking || readRestoreFromHibernate(pod)) {
      const pulled = await this.#opts.registry.getManifest(
        rec.vmName,
        HIBERNATE_SNAPSHOT_TAG,
        this.#opts.signal,
      );
      if (!pulled) {
        return {
          blocker:
            `pull hibernation snapshot ${rec.vmName}:${HIBERNATE_SNAPSHOT_TAG}: not found in the registry`,
        };
      }
      return { restoredFrom: pulled.digest };
    }
    const forkFrom = parseVMSpec(pod).forkFrom;
    if (forkFrom && !this.#runningOn(forkFrom, rec.node)) {
      return { blocker: `fork source vm ${forkFrom} is not running on node ${rec.node}` };
    }
    return {};
  }

  #runningOn(vmName: string, node: string): boolean {
    for (const r of this.#records.values()) {
      if (r.vmName === vmName && r.node === node && r.alive) return true;
    }
    return false;
  }

  async #completeBoot(key: string, pod: Pod, rec: VmRecord, knobs: Knobs): Promise<void> {
    const { counters, clock } = this.#opts;
    if (knobs.fail === "pod-failed") return await this.#failPod(key, pod, rec, knobs);
    const { blocker, restoredFrom = "" } = await this.#bootSource(pod, rec, knobs);
    if (blocker) {
      await this.#writeLifecycle(pod, rec, LIFECYCLE_STATE_FAILED, blocker);
      rec.phase = "failed";
      counters.lifecycleFailures++;
      this.#emit("failed", rec, blocker);
      log.info("VM of {pod} failed to boot: {message}", { pod: key, message: blocker });
      await this.#setStatus(rec, providerFailedStatus(pod, blocker, clock.now()));
      return;
    }
    if (isManaged(pod)) {
      rec.vmId = this.#ids.nextId();
      rec.ip = this.#ids.nextIp();
      rec.vncPort = parseVMSpec(pod).connType === "vnc" ? ++this.#vncPorts : 0;
      await this.#writeLifecycle(pod, rec, LIFECYCLE_STATE_READY, "", {
        [ANNOTATION_VMID]: rec.vmId,
        [ANNOTATION_IP]: rec.ip,
        ...(rec.vncPort ? { [ANNOTATION_VNC_PORT]: String(rec.vncPort) } : {}),
      });
    } else {
      const runtime = parseVMRuntime(pod);
      rec.vmId = runtime.vmID;
      rec.ip = runtime.ip;
      await this.#writeLifecycle(pod, rec, LIFECYCLE_STATE_READY, "");
    }
    rec.phase = "running";
    rec.alive = true;
    rec.restoredFrom = restoredFrom;
    if (rec.waking) counters.woken++;
    else counters.booted++;
    this.#emit("ready", rec, rec.vmId, restoredFrom);
    log.info("VM {vm} of {pod} is ready on {node}", {
      vm: rec.vmId,
      pod: key,
      node: rec.node,
      ...(restoredFrom ? { restoredFrom } : {}),
    });
    await this.#setStatus(rec, runningStatus(pod, rec.ip, clock.now()));
    this.#later(key, 0);
  }

  // --- failures -----------------------------------------------------------------------------

  async #failRunning(key: string, pod: Pod, rec: VmRecord, knobs: Knobs): Promise<void> {
    if (knobs.fail === "pod-failed") return await this.#failPod(key, pod, rec, knobs);
    const message = knobs.failMessage ?? DEFAULT_FAIL_MESSAGE;
    await this.#writeLifecycle(pod, rec, LIFECYCLE_STATE_FAILED, message);
    rec.phase = "failed";
    this.#opts.counters.lifecycleFailures++;
    this.#emit("failed", rec, message);
    log.info("VM of {pod} reports failed: {message}", { pod: key, message });
  }

  async #failPod(key: string, pod: Pod, rec: VmRecord, knobs: Knobs): Promise<void> {
    const message = knobs.failMessage ?? DEFAULT_FAIL_MESSAGE;
    rec.phase = "failed";
    rec.alive = false;
    this.#opts.counters.podFailures++;
    this.#emit("failed", rec, message);
    log.info("pod {pod} failed: {message}", { pod: key, message });
    await this.#setStatus(rec, podFailedStatus(pod, message, this.#opts.clock.now()));
  }

  // --- hibernate ----------------------------------------------------------------------------

  async #startHibernate(key: string, pod: Pod, rec: VmRecord, knobs: Knobs): Promise<void> {
    await this.#writeLifecycle(pod, rec, LIFECYCLE_STATE_HIBERNATING, "");
    const delay = knobs.hibernateDelayMs ?? this.#opts.latencies.hibernateMs;
    rec.phase = "hibernating";
    rec.dueAt = this.#opts.clock.now() + delay;
    this.#emit("hibernating", rec);
    this.#later(key, delay);
  }

  async #completeHibernate(key: string, pod: Pod, rec: VmRecord, knobs: Knobs): Promise<void> {
    if (!rec.hibernatePushed) {
      try {
        await this.#push(pod, rec, HIBERNATE_SNAPSHOT_TAG, knobs);
      } catch (err) {
        this.#pushFailed.add(key);
        throw err;
      }
      this.#pushFailed.delete(key);
      const removeDelay = knobs.silentLifecycle ? knobs.removeDelayMs ?? 0 : 0;
      if (removeDelay > 0) {
        // Save → push → remove: the tag is in the registry while the VM still runs.
        rec.hibernatePushed = true;
        rec.dueAt = this.#opts.clock.now() + removeDelay;
        return this.#later(key, removeDelay);
      }
    }
    rec.hibernatePushed = false;
    await this.#writeLifecycle(pod, rec, LIFECYCLE_STATE_HIBERNATED, "", {
      [ANNOTATION_VMID]: null,
      [ANNOTATION_IP]: null,
      ...(rec.vncPort ? { [ANNOTATION_VNC_PORT]: null } : {}),
    });
    rec.phase = "hibernated";
    rec.alive = false;
    rec.vmId = "";
    rec.ip = "";
    rec.vncPort = 0;
    rec.restoredFrom = "";
    this.#opts.counters.hibernated++;
    this.#emit("hibernated", rec);
    log.info("VM of {pod} hibernated", { pod: key });
    await this.#setStatus(rec, vmGoneStatus(pod, this.#opts.clock.now()));
    this.#later(key, 0);
  }

  /** The hibernate request was withdrawn while pushes kept failing: the VM simply runs on. */
  async #cancelHibernate(key: string, pod: Pod, rec: VmRecord): Promise<void> {
    await this.#writeLifecycle(pod, rec, LIFECYCLE_STATE_READY, "");
    this.#pushFailed.delete(key);
    rec.phase = "running";
    log.info("hibernation of {pod} withdrawn after failed pushes; VM keeps running", { pod: key });
  }

  // --- delete -------------------------------------------------------------------------------

  async #finalize(key: string, pod: Pod, rec: VmRecord, now: number): Promise<void> {
    if (rec.phase !== "deleting") {
      rec.phase = "deleting";
      rec.dueAt = now + this.#opts.latencies.deleteMs;
    }
    if (now < rec.dueAt) return this.#later(key, rec.dueAt - now);
    if (rec.alive) {
      const role = pod.metadata.labels?.[LABEL_ROLE] ?? "";
      const snapshot = rec.vmName !== "" && !readKeepSnapshotOnDelete(pod) &&
        shouldSnapshotVM(parseVMSpec(pod), role);
      if (snapshot) {
        try {
          await this.#push(pod, rec, DEFAULT_SNAPSHOT_TAG, this.#knobs(pod));
        } catch (err) {
          // Best effort, as vk-cocoon: a failed snapshot never holds the pod.
          log.warn("snapshot of {pod} on delete failed: {error}", {
            pod: key,
            error: errorMessage(err),
          });
        }
      }
      rec.alive = false;
    }
    try {
      await this.#opts.client.delete(Pods, rec.namespace, rec.name, {
        gracePeriodSeconds: 0,
        ...(rec.uid ? { preconditions: { uid: rec.uid } } : {}),
      });
    } catch (err) {
      // Gone already, or a namesake replaced it: either way this pod is finished.
      if (!isNotFound(err) && !isConflict(err)) throw err;
    }
    this.#opts.counters.finalized++;
    this.#emit("finalized", rec);
    log.info("pod {pod} finalized", { pod: key });
    this.#forget(key);
  }
}
