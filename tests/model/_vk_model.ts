/**
 * A model of vk-cocoon for the model-based test, in two modes:
 *
 * - `head`: vk-cocoon as github cocoonstack/vk-cocoon HEAD is (provider/cocoon/update.go,
 *   create.go, delete.go): it writes no lifecycle annotations at all; a hibernate request runs
 *   Save → Push `:hibernate` → Remove, and only after the Remove clears the VM id (a failed Remove
 *   rolls the pushed tag back and the VM keeps running); a withdrawn request on a pod whose VM is
 *   gone pulls `:hibernate` and clones the VM again; a deleted pod whose VM exists gets `:latest`
 *   pushed (when its snapshot policy snapshots its role) before the VM is removed.
 * - `contract`: the same order, plus the lifecycle annotations cocoon-common v0.3.0 describes
 *   (`hibernating` before the push, `hibernated` after the Remove, `ready` after a boot, each
 *   with the pod's generation stamp as the observed generation; a stamp that moves while the VM
 *   rests is echoed).
 *
 * In both modes a pod created with `restore-from-hibernate` boots from `:hibernate` (the contract;
 * vk-cocoon HEAD's CreatePod does not read that annotation and would boot such a pod fresh, which
 * would hide every operator defect behind one of vk-cocoon's), and any other new pod boots fresh.
 *
 * The model also keeps the ledger of VM state the invariants need, independently of the
 * operator: every VM name has a newest state version that moves on while its VM runs; a push
 * records which version a tag holds; a boot records which version it restored. With that it
 * judges what vk-cocoon sees happen: a fresh boot or an old restore over state a claimant still
 * expects back, a restore whose tag is gone, a pod finalized while its VM held the only copy of
 * its state, and two VMs live under one name.
 *
 * @module
 */
import { type Pod, Pods } from "../../kube/core.ts";
import type { FakeClient } from "../../kube/testing/fake.ts";
import type { FakeRegistry } from "../../snapshot/testing/fake.ts";
import {
  ANNOTATION_IP,
  ANNOTATION_KEEP_SNAPSHOT_ON_DELETE,
  ANNOTATION_LIFECYCLE_OBSERVED_GENERATION,
  ANNOTATION_LIFECYCLE_STATE,
  ANNOTATION_VMID,
  LABEL_ROLE,
  LIFECYCLE_STATE_HIBERNATED,
  LIFECYCLE_STATE_HIBERNATING,
  LIFECYCLE_STATE_READY,
  parseVMSpec,
  readCocoonSetGeneration,
  readHibernateState,
  readLifecycleStatus,
  readRestoreFromHibernate,
  shouldSnapshotVM,
} from "../../common/meta/mod.ts";
import type { Rng } from "./_rng.ts";
import { HIBERNATE_SNAPSHOT_TAG } from "../../snapshot/registry.ts";

/** Which vk-cocoon the model plays. */
export type VkMode = "head" | "contract";

/** The tag vk-cocoon pushes when it deletes a pod whose VM exists. */
export const LATEST_TAG = "latest";

/** One broken invariant, with a category for grouping the findings. */
export interface Violation {
  kind: string;
  vm: string;
  what: string;
}

/** A VM the model runs for one pod. */
interface RunningVM {
  vm: string;
  pod: string;
  version: number;
  /** Saved and pushed, not removed yet: its state no longer moves. */
  frozen: boolean;
}

/**
 * Who still expects a VM's state back: a description of the claimant, or undefined when no
 * object does (the world's rule, see _claims.ts).
 */
export type ClaimFn = (vm: string) => string | undefined;

/** The vk-cocoon model and its ledger of VM state; see the module doc. */
export class VkModel {
  readonly violations: Violation[] = [];
  /** What the model did, for the step trace. */
  readonly log: string[] = [];
  /** VM name → newest state version (absent: never booted). */
  readonly #latest = new Map<string, number>();
  /** `vm:tag` → the state version the last push put there. */
  readonly #tagVersion = new Map<string, number>();
  /** Pod uid → its running VM. */
  readonly #running = new Map<string, RunningVM>();
  /** VM name → "namespace/pod" of the pod that booted it last (the name's holder in a collision). */
  readonly #bootedBy = new Map<string, string>();
  /** Pod uids whose VM vk-cocoon removed by a hibernation (a wake pulls `:hibernate`). */
  readonly #hibernated = new Set<string>();
  /** Pod uids vk-cocoon has admitted (CreatePod ran). */
  readonly #admitted = new Set<string>();
  /** Pod uids whose delete the user asked for (their VM's state is the user's to drop). */
  readonly userDeleted = new Set<string>();
  /** VM names whose newest state nothing may expect back any more (the user dropped it). */
  readonly #discarded = new Set<string>();
  #nextVersion = 0;
  #vmIds = 0;

  constructor(
    readonly mode: VkMode,
    readonly fake: FakeClient,
    readonly registry: FakeRegistry,
    readonly rng: Rng,
    readonly claimed: ClaimFn,
    /** How often a Remove after the push fails (and the push is rolled back). */
    readonly removeFailureRate = 0.1,
  ) {}

  /** The version `vm:tag` holds, or undefined when the tag is absent. */
  /** "namespace/pod" of the pod that booted vm last, or undefined when none ever did. */
  bootedBy(vm: string): string | undefined {
    return this.#bootedBy.get(vm);
  }

  tagHolds(vm: string, tag: string): number | undefined {
    return this.registry.contains(vm, tag) ? this.#tagVersion.get(`${vm}:${tag}`) : undefined;
  }

  /** The newest state version of vm (0: none). */
  latest(vm: string): number {
    return this.#latest.get(vm) ?? 0;
  }

  /** Whether a running, unfrozen VM of that name holds its newest state. */
  liveHoldsLatest(vm: string): boolean {
    const latest = this.latest(vm);
    return [...this.#running.values()].some((r) =>
      r.vm === vm && !r.frozen && r.version === latest
    );
  }

  /** Whether the pod (by uid) has a VM vk-cocoon runs (frozen ones included). */
  runs(uid: string): boolean {
    return this.#running.has(uid);
  }

  /** Whether vk-cocoon has work left on any pod. */
  async idle(): Promise<boolean> {
    for (const pod of await this.#pods()) if (this.#work(pod)) return false;
    return true;
  }

  /**
   * The user deleted the pod: its VM's state is the user's to throw away (vk-cocoon pushes
   * `:latest`, which the operator never restores), so no claim on it survives.
   */
  noteUserDelete(pod: Pod): void {
    const uid = pod.metadata.uid ?? "";
    this.userDeleted.add(uid);
    const vm = parseVMSpec(pod).vmName;
    if (vm) this.#discard(vm);
  }

  /** The set owning vm is gone or going: nothing expects its state back. */
  noteReleased(vm: string): void {
    this.#discard(vm);
  }

  #discard(vm: string): void {
    // A new epoch that nothing stored holds: no later delete is judged against the old state,
    // and the next boot, fresh or from an old tag, loses nothing anyone expects.
    if (!this.#latest.has(vm)) return;
    this.#latest.set(vm, ++this.#nextVersion);
    this.#discarded.add(vm);
  }

  /** Who expects vm's newest state back, unless the user has dropped it. */
  #claim(vm: string): string | undefined {
    return this.#discarded.has(vm) ? undefined : this.claimed(vm);
  }

  /** One transition of one pod with work left, chosen at random; false when idle. */
  async step(): Promise<boolean> {
    const pods = (await this.#pods()).filter((p) => this.#work(p));
    if (pods.length === 0) return false;
    const pod = this.rng.pick(pods);
    await this.#advance(pod);
    this.#moveOn();
    this.#checkUniqueNames();
    return true;
  }

  async #pods(): Promise<Pod[]> {
    return (await this.fake.list(Pods, {})).items;
  }

  /** Whether vk-cocoon would act on this pod now. */
  #work(pod: Pod): boolean {
    const uid = pod.metadata.uid ?? "";
    if (pod.metadata.deletionTimestamp) return true;
    if (!pod.spec?.nodeName) return true;
    const vm = this.#running.get(uid);
    if (vm) {
      if (vm.frozen || readHibernateState(pod) || this.#hibernating(pod)) return true;
      return this.mode === "contract" && this.#stampMoved(pod);
    }
    if (readHibernateState(pod) && this.#admitted.has(uid)) {
      return this.mode === "contract" && this.#stampMoved(pod);
    }
    return true;
  }

  /**
   * Contract mode: `hibernating` is written inside the one hibernate call (Save → Push →
   * Remove), so once written the hibernation runs to its end even if the request is withdrawn
   * meanwhile; the withdrawal is handled afterwards as a wake.
   */
  #hibernating(pod: Pod): boolean {
    return this.mode === "contract" &&
      readLifecycleStatus(pod).state === LIFECYCLE_STATE_HIBERNATING;
  }

  /** Contract mode: the generation stamp moved since the lifecycle pair was written. */
  #stampMoved(pod: Pod): boolean {
    const lc = readLifecycleStatus(pod);
    return (lc.state === LIFECYCLE_STATE_READY || lc.state === LIFECYCLE_STATE_HIBERNATED) &&
      lc.observedGeneration !== readCocoonSetGeneration(pod);
  }

  async #advance(pod: Pod): Promise<void> {
    const uid = pod.metadata.uid ?? "";
    const name = `${pod.metadata.namespace}/${pod.metadata.name}`;
    const vmName = parseVMSpec(pod).vmName;
    const vm = this.#running.get(uid);
    // A hibernation in flight finishes first (vk-cocoon handles one pod's updates in turn):
    // a delete that arrives between the push and the Remove waits for the Remove, or for the
    // rollback of the push when the Remove fails.
    if (vm?.frozen) return await this.#remove(pod, vm);
    if (pod.metadata.deletionTimestamp) return await this.#finalize(pod, vm);
    if (!pod.spec?.nodeName) return await this.#bind(pod);
    if (vm) {
      if (readHibernateState(pod) || this.#hibernating(pod)) {
        return await this.#startHibernate(pod, vm);
      }
      return await this.#lifecycle(pod, LIFECYCLE_STATE_READY);
    }
    if (readHibernateState(pod)) {
      if (this.#admitted.has(uid)) return await this.#lifecycle(pod, LIFECYCLE_STATE_HIBERNATED);
      // CreatePod ignores the hibernate request: the VM boots, the next update hibernates it.
    }
    const restore = this.#hibernated.has(uid) ||
      (!this.#admitted.has(uid) && readRestoreFromHibernate(pod));
    this.#admitted.add(uid);
    if (restore) return await this.#bootFromTag(pod, vmName, name);
    return await this.#bootFresh(pod, vmName, name);
  }

  async #bind(pod: Pod): Promise<void> {
    const node = placementOf(pod);
    this.log.push(`vk: bind ${pod.metadata.namespace}/${pod.metadata.name} to ${node}`);
    await this.fake.patch(Pods, pod.metadata.namespace ?? "", pod.metadata.name ?? "", "merge", {
      spec: { nodeName: node },
    });
  }

  /** DeletePod, then the grace-0 delete that lets the pod go. */
  async #finalize(pod: Pod, vm: RunningVM | undefined): Promise<void> {
    const uid = pod.metadata.uid ?? "";
    const ns = pod.metadata.namespace ?? "";
    const name = pod.metadata.name ?? "";
    if (vm) {
      const latest = this.latest(vm.vm);
      const claim = this.#claim(vm.vm);
      const hibernateHolds = this.tagHolds(vm.vm, HIBERNATE_SNAPSHOT_TAG) === latest;
      if (!this.userDeleted.has(uid) && vm.version === latest && !hibernateHolds && claim) {
        this.violations.push({
          kind: "pod deleted before its VM's state was saved",
          vm: vm.vm,
          what: `${ns}/${name} was deleted while its VM held the only copy of state v${latest} ` +
            `(${vm.frozen ? "push in flight" : "VM running"}; :hibernate holds ` +
            `${this.#tagText(vm.vm)}); claimant: ${claim}`,
        });
      }
      const spec = parseVMSpec(pod);
      const keep = pod.metadata.annotations?.[ANNOTATION_KEEP_SNAPSHOT_ON_DELETE] === "true";
      if (!keep && shouldSnapshotVM(spec, pod.metadata.labels?.[LABEL_ROLE] ?? "")) {
        this.registry.put(vm.vm, LATEST_TAG, `sha256:v${vm.version}-${++this.#vmIds}`);
        this.#tagVersion.set(`${vm.vm}:${LATEST_TAG}`, vm.version);
      }
      this.#running.delete(uid);
    }
    this.log.push(`vk: finalize ${ns}/${name}${vm ? ` (VM v${vm.version} removed)` : ""}`);
    await this.fake.delete(Pods, ns, name, { gracePeriodSeconds: 0 });
  }

  /** Save and push `:hibernate` (contract mode: `hibernating` first, as a step of its own). */
  async #startHibernate(pod: Pod, vm: RunningVM): Promise<void> {
    if (
      this.mode === "contract" && readLifecycleStatus(pod).state !== LIFECYCLE_STATE_HIBERNATING
    ) {
      return await this.#lifecycle(pod, LIFECYCLE_STATE_HIBERNATING);
    }
    this.registry.put(vm.vm, HIBERNATE_SNAPSHOT_TAG, `sha256:v${vm.version}-${++this.#vmIds}`);
    this.#tagVersion.set(`${vm.vm}:${HIBERNATE_SNAPSHOT_TAG}`, vm.version);
    vm.frozen = true;
    this.log.push(`vk: ${vm.pod} saved and pushed ${vm.vm}:hibernate = v${vm.version}`);
  }

  /** Remove after the push; a failed Remove rolls the tag back and the VM keeps running. */
  async #remove(pod: Pod, vm: RunningVM): Promise<void> {
    const uid = pod.metadata.uid ?? "";
    if (this.rng.chance(this.removeFailureRate)) {
      await this.registry.deleteManifest(vm.vm, HIBERNATE_SNAPSHOT_TAG);
      vm.frozen = false;
      this.log.push(`vk: ${vm.pod} Remove failed, rolled ${vm.vm}:hibernate back, VM runs on`);
      return;
    }
    this.#running.delete(uid);
    this.#hibernated.add(uid);
    this.log.push(`vk: ${vm.pod} VM v${vm.version} removed (hibernated)`);
    const annotations: Record<string, string | null> = {
      [ANNOTATION_VMID]: null,
      [ANNOTATION_IP]: null,
    };
    if (this.mode === "contract") {
      annotations[ANNOTATION_LIFECYCLE_STATE] = LIFECYCLE_STATE_HIBERNATED;
      annotations[ANNOTATION_LIFECYCLE_OBSERVED_GENERATION] = String(readCocoonSetGeneration(pod));
    }
    await this.#publish(pod, annotations, false);
  }

  /** A wake, or a create marked restore-from-hibernate: pull `:hibernate` and clone. */
  async #bootFromTag(pod: Pod, vmName: string, name: string): Promise<void> {
    const held = this.tagHolds(vmName, HIBERNATE_SNAPSHOT_TAG);
    const latest = this.latest(vmName);
    const claim = this.#claim(vmName);
    if (held === undefined) {
      if (claim && latest > 0 && !this.liveHoldsLatest(vmName)) {
        this.violations.push({
          kind: "restore found no snapshot (state lost)",
          vm: vmName,
          what: `${name} must restore from ${vmName}:hibernate but it is gone; state v${latest} ` +
            `is lost; claimant: ${claim}`,
        });
      }
      if (claim && latest > 0) {
        // vk-cocoon's pull fails and is retried on the next update; the pod stays down.
        this.#admitted.delete(pod.metadata.uid ?? "");
        this.log.push(`vk: ${name} restore failed: no ${vmName}:hibernate`);
        return;
      }
      // Nothing anyone expects is lost: boot as vk-cocoon HEAD would (it ignores the marker).
      this.#hibernated.delete(pod.metadata.uid ?? "");
      return await this.#bootFresh(pod, vmName, name);
    }
    if (claim && held < latest && !this.liveHoldsLatest(vmName)) {
      this.violations.push({
        kind: "restored older state",
        vm: vmName,
        what: `${name} restored ${vmName}:hibernate = v${held}, but the newest state is ` +
          `v${latest} (now lost); claimant: ${claim}`,
      });
    }
    this.#hibernated.delete(pod.metadata.uid ?? "");
    // The VM runs the restored state: that is its newest now.
    this.#latest.set(vmName, held);
    await this.#up(pod, vmName, held, `restored v${held}`);
  }

  async #bootFresh(pod: Pod, vmName: string, name: string): Promise<void> {
    const latest = this.latest(vmName);
    const claim = this.#claim(vmName);
    if (claim && latest > 0 && !this.liveHoldsLatest(vmName)) {
      this.violations.push({
        kind: "booted fresh over saved state",
        vm: vmName,
        what: `${name} booted fresh while state v${latest} of ${vmName} is only in ` +
          `${this.#where(vmName, latest)}; claimant: ${claim}`,
      });
    }
    const version = ++this.#nextVersion;
    this.#latest.set(vmName, version);
    await this.#up(pod, vmName, version, `booted fresh v${version}`);
  }

  async #up(pod: Pod, vmName: string, version: number, how: string): Promise<void> {
    const uid = pod.metadata.uid ?? "";
    const name = `${pod.metadata.namespace}/${pod.metadata.name}`;
    for (const other of this.#running.values()) {
      if (other.vm === vmName && other.pod !== name) {
        this.violations.push({
          kind: "two live VMs for one name",
          vm: vmName,
          what: `${name} booted ${vmName} while ${other.pod} runs it`,
        });
      }
    }
    this.#running.set(uid, { vm: vmName, pod: name, version, frozen: false });
    this.#bootedBy.set(vmName, name);
    this.#discarded.delete(vmName);
    this.log.push(`vk: ${name} ${how}`);
    const annotations: Record<string, string | null> = {
      [ANNOTATION_VMID]: `vm-${++this.#vmIds}`,
      [ANNOTATION_IP]: "10.0.0.1",
    };
    if (this.mode === "contract") {
      annotations[ANNOTATION_LIFECYCLE_STATE] = LIFECYCLE_STATE_READY;
      annotations[ANNOTATION_LIFECYCLE_OBSERVED_GENERATION] = String(readCocoonSetGeneration(pod));
    }
    await this.#publish(pod, annotations, true);
  }

  /** Contract mode: writes the lifecycle pair with the pod's current stamp. */
  async #lifecycle(pod: Pod, state: string): Promise<void> {
    this.log.push(`vk: ${pod.metadata.namespace}/${pod.metadata.name} lifecycle ${state}`);
    await this.fake.patch(Pods, pod.metadata.namespace ?? "", pod.metadata.name ?? "", "merge", {
      metadata: {
        annotations: {
          [ANNOTATION_LIFECYCLE_STATE]: state,
          [ANNOTATION_LIFECYCLE_OBSERVED_GENERATION]: String(readCocoonSetGeneration(pod)),
        },
      },
    });
  }

  /** Writes the VM's annotations, then the pod status (Running; Ready while the VM runs). */
  async #publish(pod: Pod, annotations: Record<string, string | null>, up: boolean) {
    const ns = pod.metadata.namespace ?? "";
    const name = pod.metadata.name ?? "";
    // A terminating pod gets no status from vk-cocoon: it is about to be finalized (and the fake
    // API server lets a terminating object without finalizers go on its next write).
    if (pod.metadata.deletionTimestamp) return;
    await this.fake.patch(Pods, ns, name, "merge", { metadata: { annotations } });
    await this.fake.patch(Pods, ns, name, "merge", {
      status: {
        phase: "Running",
        conditions: [{ type: "Ready", status: up ? "True" : "False" }],
        containerStatuses: [{
          name: "agent",
          ready: up,
          restartCount: 0,
          image: "x",
          imageID: "x",
          state: up ? { running: {} } : { waiting: { reason: "Hibernated" } },
        }],
      },
    }, { subresource: "status" });
  }

  /** A running VM's memory moves on: every snapshot taken before now is behind it. */
  #moveOn(): void {
    for (const vm of this.#running.values()) {
      if (vm.frozen || vm.version !== this.latest(vm.vm)) continue;
      vm.version = ++this.#nextVersion;
      this.#latest.set(vm.vm, vm.version);
    }
  }

  #checkUniqueNames(): void {
    const seen = new Map<string, string>();
    for (const vm of this.#running.values()) {
      const other = seen.get(vm.vm);
      if (other !== undefined && other !== vm.pod) {
        const what = `${vm.vm} runs for ${other} and for ${vm.pod}`;
        if (!this.violations.some((v) => v.what === what)) {
          this.violations.push({ kind: "two live VMs for one name", vm: vm.vm, what });
        }
      }
      seen.set(vm.vm, vm.pod);
    }
  }

  #tagText(vm: string): string {
    const v = this.tagHolds(vm, HIBERNATE_SNAPSHOT_TAG);
    return v === undefined ? "nothing" : `v${v}`;
  }

  #where(vm: string, version: number): string {
    const places = [HIBERNATE_SNAPSHOT_TAG, LATEST_TAG].filter((t) =>
      this.tagHolds(vm, t) === version
    )
      .map((t) => `:${t}`);
    return places.length > 0 ? places.join(" and ") : "no tag (already lost)";
  }

  /**
   * Judges an operator's tag delete before it lands: deleting the tag that holds a VM's newest
   * state while no running VM holds it and a claimant expects it back loses that state.
   */
  judgeTagDelete(vm: string, tag: string, site: string): Violation | undefined {
    const held = this.tagHolds(vm, tag);
    const latest = this.latest(vm);
    if (held === undefined || held !== latest || this.liveHoldsLatest(vm)) return undefined;
    const claim = this.#claim(vm);
    if (!claim) return undefined;
    return {
      kind: `tag deleted while claimed (${site})`,
      vm,
      what: `operator deleted ${vm}:${tag}, the only copy of state v${latest}; claimant: ${claim}`,
    };
  }
}

/** Where vk-cocoon's scheduler stand-in binds a pod: the required node, the preferred, node-a. */
function placementOf(pod: Pod): string {
  const affinity = pod.spec?.affinity?.nodeAffinity;
  const required = affinity?.requiredDuringSchedulingIgnoredDuringExecution?.nodeSelectorTerms[0]
    ?.matchExpressions?.[0]?.values?.[0];
  const preferred = affinity?.preferredDuringSchedulingIgnoredDuringExecution?.[0]?.preference
    .matchExpressions?.[0]?.values?.[0];
  return required ?? preferred ?? "node-a";
}
