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
 * In both modes vk-cocoon keeps its tables by pod namespace/name, as HEAD does (commit a9cb04f,
 * provider/cocoon/provider.go, update.go, reconcile.go), and virtual-kubelet hands a pod to
 * UpdatePod rather than CreatePod while vk-cocoon still tracks its name. So a pod vk-cocoon tracks
 * without a VM and that is not asked to hibernate is woken by pulling whatever `<vm>:hibernate`
 * holds, whichever round pushed it and whichever pod object it now is: the name stays tracked
 * after vk-cocoon hibernated its VM until DeletePod for that name runs (a pod deleted without
 * vk-cocoon seeing it and recreated under the name is woken from the tag), and a vk-cocoon
 * restart (StartupReconcile) tracks every pod that asks to hibernate without a VM on the node as
 * hibernated — a new pod asked to hibernate before its CreatePod ran included. A restart happens
 * between two of vk-cocoon's calls (never inside one hibernation: a restart between its push and
 * its removal would leave a tag older than the VM that runs on, vk-cocoon's own doing).
 *
 * A pod vk-cocoon does not track boots fresh, unless it was created with
 * `restore-from-hibernate`: then it boots from `:hibernate` (the contract; vk-cocoon HEAD's
 * CreatePod does not read that annotation and would boot such a pod fresh, which would hide every
 * operator defect behind one of vk-cocoon's).
 *
 * The model also keeps the ledger of VM state the invariants need, independently of the
 * operator: every VM name has a newest state version that moves on while its VM runs; a push
 * records which version a tag holds; a boot records which version it restored. With that it
 * judges what vk-cocoon sees happen: a fresh boot or an old restore over state a claimant still
 * expects back, a restore whose tag is gone, a pod finalized while its VM held the only copy of
 * its state, and two VMs live under one name. And, whoever claims the state or not, a **stale
 * restore**: a VM that comes back from `:hibernate` with state older than the last state a VM of
 * that name ran (the tag outlived the VM's return and was read back later). Two stale restores are
 * counted instead of judged: of a tag a set's suspend pushed or read Suspended on (a retain resume
 * keeps its tags, as the Go operator's does), and of a tag read again before any operator pass saw
 * the VM back from it (its owner had no chance to drop it yet).
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
  /** Pod namespace/name → its running VM (vk-cocoon's vmsByPod). */
  readonly #running = new Map<string, RunningVM>();
  /** VM name → the state version the last VM of that name ran (absent: never ran). */
  readonly #lastRun = new Map<string, number>();
  /**
   * `vm:version` of `:hibernate` tags a CocoonSet's suspend made or relied on: its resume keeps
   * them, as the Go operator's does, so their stale restores are counted, not judged.
   */
  readonly #suspendTags = new Set<string>();
  /** Stale restores of a suspend's tag (see #suspendTags). */
  suspendLeftoverRestores = 0;
  /**
   * VM name → the tag version a VM of it came back from that no operator pass has seen live yet
   * (noteSeen): until one has, the owner of the tag had no chance to drop it.
   */
  readonly #unseenReturn = new Map<string, number>();
  /** Stale restores of a tag whose VM's return no operator pass had seen (see #unseenReturn). */
  unseenReturnRestores = 0;
  /** VM name → "namespace/pod" of the pod that booted it last (the name's holder in a collision). */
  readonly #bootedBy = new Map<string, string>();
  /**
   * Pod namespace/names vk-cocoon tracks without a VM: it hibernated their VM, or found them
   * asking to hibernate with no VM at a restart. Any pod of such a name that is not asked to
   * hibernate is woken from `:hibernate`.
   */
  readonly #hibernated = new Set<string>();
  /** Pod namespace/names vk-cocoon tracks (its pods table: CreatePod ran, or a restart found them). */
  readonly #admitted = new Set<string>();
  /** Pod namespace/name → the pod object vk-cocoon last acted on under that name. */
  readonly #seen = new Map<string, Pod>();
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
    /**
     * Whether the CocoonSet owning vm is in its suspend: asked (spec.suspend) or not yet resumed
     * (phase Suspending or Suspended). A push then is the suspend's.
     */
    readonly suspending: (vm: string) => boolean = () => false,
  ) {}

  /**
   * An operator pass (fresh reads) about vm ran: when a VM of that name runs now, the pass saw it
   * back, and the tag's owner had its chance to drop the tag.
   */
  noteSeen(vm: string): void {
    if ([...this.#running.values()].some((r) => r.vm === vm)) this.#unseenReturn.delete(vm);
  }

  /**
   * The set owning vm reads Suspended: the `:hibernate` it holds now is the suspend's snapshot,
   * whichever round pushed it — when it holds the VM's last run. A tag already older than that
   * is no snapshot of this suspend, however the suspend came to read Suspended.
   */
  noteSuspended(vm: string): void {
    const held = this.tagHolds(vm, HIBERNATE_SNAPSHOT_TAG);
    if (held !== undefined && held === this.lastRun(vm)) this.#suspendTags.add(`${vm}:${held}`);
  }

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

  /** Whether the pod (by namespace/name) has a VM vk-cocoon runs (frozen ones included). */
  runs(key: string): boolean {
    return this.#running.has(key);
  }

  /** The state version the last VM of vm ran (0: none ever ran). */
  lastRun(vm: string): number {
    return this.#lastRun.get(vm) ?? 0;
  }

  /** Whether a VM is between its push and its removal (a restart there is not modelled). */
  get hibernating(): boolean {
    return [...this.#running.values()].some((r) => r.frozen);
  }

  /**
   * vk-cocoon restarts (StartupReconcile, reconcile.go): the VMs keep running, the tables are
   * rebuilt from the pods bound to a node. A pod whose VM runs stays tracked with it; a pod asking
   * to hibernate without a VM is tracked as hibernated (a later withdrawal wakes it from the tag);
   * any other pod without a VM is forgotten (CreatePod runs for it). Only when restartable();
   * false when it did not restart.
   */
  async restart(): Promise<boolean> {
    if (!await this.restartable()) return false;
    const pods = await this.#pods();
    this.#forgetVanished(pods);
    this.#hibernated.clear();
    this.#admitted.clear();
    for (const pod of pods) {
      if (!pod.spec?.nodeName) continue;
      const key = podKey(pod);
      this.#seen.set(key, pod);
      if (this.#running.has(key)) {
        this.#admitted.add(key);
      } else if (readHibernateState(pod)) {
        this.#admitted.add(key);
        this.#hibernated.add(key);
      }
    }
    this.log.push(`vk: restarted (tracking ${[...this.#admitted].sort().join(", ") || "no pod"})`);
    return true;
  }

  /**
   * Whether a restart now stays clear of what vk-cocoon itself would lose: a hibernation between
   * its push and its removal, and a wake it owes a pod whose request was withdrawn (a restart
   * forgets that name, and CreatePod boots it fresh over its snapshot).
   */
  async restartable(): Promise<boolean> {
    if (this.hibernating) return false;
    for (const pod of await this.#pods()) {
      if (this.#hibernated.has(podKey(pod)) && !readHibernateState(pod)) return false;
    }
    return true;
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
    const all = await this.#pods();
    this.#forgetVanished(all);
    const pods = all.filter((p) => this.#work(p));
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
    const key = podKey(pod);
    if (pod.metadata.deletionTimestamp) return true;
    if (!pod.spec?.nodeName) return true;
    const vm = this.#running.get(key);
    if (vm) {
      if (vm.frozen || readHibernateState(pod) || this.#hibernating(pod)) return true;
      return this.mode === "contract" && this.#stampMoved(pod);
    }
    if (readHibernateState(pod) && this.#admitted.has(key)) {
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
    const key = podKey(pod);
    const name = key;
    this.#seen.set(key, pod);
    const vmName = parseVMSpec(pod).vmName;
    const vm = this.#running.get(key);
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
      if (this.#admitted.has(key)) return await this.#lifecycle(pod, LIFECYCLE_STATE_HIBERNATED);
      // CreatePod ignores the hibernate request: the VM boots, the next update hibernates it.
    }
    // A tracked name without a VM goes to UpdatePod, which wakes it from the tag; an untracked
    // one to CreatePod.
    const restore = this.#hibernated.has(key) ||
      (!this.#admitted.has(key) && readRestoreFromHibernate(pod));
    this.#admitted.add(key);
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
    const ns = pod.metadata.namespace ?? "";
    const name = pod.metadata.name ?? "";
    this.#deletePod(pod, vm);
    this.log.push(`vk: finalize ${ns}/${name}${vm ? ` (VM v${vm.version} removed)` : ""}`);
    await this.fake.delete(Pods, ns, name, { gracePeriodSeconds: 0 });
  }

  /**
   * DeletePod (delete.go): the VM, if any, gets `:latest` pushed when the pod's snapshot policy
   * snapshots it and is removed; the name is forgotten, so a new pod of it goes to CreatePod.
   */
  #deletePod(pod: Pod, vm: RunningVM | undefined): void {
    const uid = pod.metadata.uid ?? "";
    const key = podKey(pod);
    if (vm) {
      const latest = this.latest(vm.vm);
      const claim = this.#claim(vm.vm);
      const hibernateHolds = this.tagHolds(vm.vm, HIBERNATE_SNAPSHOT_TAG) === latest;
      if (!this.userDeleted.has(uid) && vm.version === latest && !hibernateHolds && claim) {
        this.violations.push({
          kind: "pod deleted before its VM's state was saved",
          vm: vm.vm,
          what: `${key} was deleted while its VM held the only copy of state v${latest} ` +
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
      this.#running.delete(key);
    }
    this.#admitted.delete(key);
    this.#hibernated.delete(key);
    this.#seen.delete(key);
  }

  /**
   * Pods the API server let go without vk-cocoon's DeletePod (the fake API server drops a
   * terminating pod on its next write; a real one waits for vk-cocoon's zero-grace delete):
   * virtual-kubelet calls DeletePod for a pod gone from its lister, so the model does too, first.
   * A hibernation in flight finishes (the tag stays, the VM goes) before the pod is forgotten.
   */
  #forgetVanished(pods: readonly Pod[]): void {
    const present = new Map(pods.map((p) => [podKey(p), p.metadata.uid ?? ""]));
    for (const [key, seen] of [...this.#seen]) {
      if (present.get(key) === (seen.metadata.uid ?? "")) continue;
      const vm = this.#running.get(key);
      if (vm?.frozen) {
        this.#running.delete(key);
        this.#deletePod(seen, undefined);
      } else {
        this.#deletePod(seen, vm);
      }
      this.log.push(
        `vk: ${key} is gone from the API: DeletePod${vm ? ` (VM v${vm.version})` : ""}`,
      );
    }
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
    if (this.suspending(vm.vm)) this.#suspendTags.add(`${vm.vm}:${vm.version}`);
    vm.frozen = true;
    this.log.push(`vk: ${vm.pod} saved and pushed ${vm.vm}:hibernate = v${vm.version}`);
  }

  /** Remove after the push; a failed Remove rolls the tag back and the VM keeps running. */
  async #remove(pod: Pod, vm: RunningVM): Promise<void> {
    const key = podKey(pod);
    if (this.rng.chance(this.removeFailureRate)) {
      await this.registry.deleteManifest(vm.vm, HIBERNATE_SNAPSHOT_TAG);
      vm.frozen = false;
      this.log.push(`vk: ${vm.pod} Remove failed, rolled ${vm.vm}:hibernate back, VM runs on`);
      return;
    }
    this.#running.delete(key);
    this.#hibernated.add(key);
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
        if (!this.#hibernated.has(podKey(pod))) this.#admitted.delete(podKey(pod));
        this.log.push(`vk: ${name} restore failed: no ${vmName}:hibernate`);
        return;
      }
      // Nothing anyone expects is lost: boot fresh, as vk-cocoon HEAD does a marked create (its
      // wake of a tracked name would fail the pull and retry; the model lets that pod boot).
      this.#hibernated.delete(podKey(pod));
      return await this.#bootFresh(pod, vmName, name);
    }
    if (claim && held < latest && !this.liveHoldsLatest(vmName)) {
      this.violations.push({
        kind: "restored older state",
        vm: vmName,
        what: `${name} restored ${vmName}:hibernate = v${held}, but the newest state is ` +
          `v${latest} (now lost); claimant: ${claim}`,
      });
    } else if (held < this.lastRun(vmName) && this.#unseenReturn.get(vmName) === held) {
      // The VM came back from this very tag and went again before any pass of the operator saw
      // it live: the tag's owner (a migration, a wake) had no chance to drop it yet.
      this.unseenReturnRestores++;
      this.log.push(`vk: ${name} restored v${held} again before the operator saw it back`);
    } else if (held < this.lastRun(vmName) && this.#suspendTags.has(`${vmName}:${held}`)) {
      // A retain resume keeps its tags (the Go operator's behaviour, kept on purpose), and the
      // set's own flows restore from any tag they find: counted, not judged here.
      this.suspendLeftoverRestores++;
      this.log.push(
        `vk: ${name} restored a suspend's leftover v${held} (last run v${this.lastRun(vmName)})`,
      );
    } else if (held < this.lastRun(vmName)) {
      this.violations.push({
        kind: "stale restore",
        vm: vmName,
        what: `${name} came back from ${vmName}:hibernate = v${held}, older than ` +
          `v${this.lastRun(vmName)} that a VM of the name ran since (the tag outlived its VM's ` +
          `return)`,
      });
    }
    this.#hibernated.delete(podKey(pod));
    this.#unseenReturn.set(vmName, held);
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
    const key = podKey(pod);
    const name = key;
    for (const other of this.#running.values()) {
      if (other.vm === vmName && other.pod !== name) {
        this.violations.push({
          kind: "two live VMs for one name",
          vm: vmName,
          what: `${name} booted ${vmName} while ${other.pod} runs it`,
        });
      }
    }
    this.#running.set(key, { vm: vmName, pod: name, version, frozen: false });
    this.#lastRun.set(vmName, version);
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
      this.#lastRun.set(vm.vm, vm.version);
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

/** vk-cocoon's key of a pod (meta.PodKey): its namespace and name. */
function podKey(pod: Pod): string {
  return `${pod.metadata.namespace ?? ""}/${pod.metadata.name ?? ""}`;
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
