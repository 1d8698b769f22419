/**
 * Cross-node migration of the main agent when spec.nodeName names another node: quiesce the
 * running main so vk-cocoon pushes its `:hibernate` snapshot, delete the old pod once the
 * snapshot exists, recreate the main on the target restoring from it, and drop the snapshot
 * once the new VM is live.
 *
 * The VM's live state is never lost: the old pod is deleted only when the snapshot exists AND
 * this controller asked that pod to hibernate; the snapshot is dropped only after the new VM
 * runs; Migrating is persisted before the first side effect, so a restarted operator resumes.
 */
import { type Pod, wrapError } from "../kube/mod.ts";
import { patchHibernateState } from "../common/k8s/pod_patch.ts";
import type { CocoonSet } from "../common/apis/v1/cocoonset_types.ts";
import {
  markRestoreFromHibernate,
  parseVMSpec,
  readHibernateState,
  readRestoreFromHibernate,
  vmLive,
  vmMayBeLeaving,
  vmNameForDeployment,
  vmUp,
} from "../common/meta/mod.ts";
import { hasHibernateSnapshot, HIBERNATE_SNAPSHOT_TAG } from "../snapshot/registry.ts";
import {
  afterStatus,
  deletePod,
  GO_ON,
  podRef,
  type SetPass,
  type Step,
  type Stop,
  stop,
} from "./pass.ts";
import { migrationTargetProblem, reportUnknownTarget, warnIfPoolEmpty } from "./nodes.ts";
import { buildAgentPod, LABEL_HOSTNAME } from "./pods.ts";
import { podsHibernatedByCR } from "./restore.ts";
import { recordHibernation } from "./snapshot_ledger.ts";
import { ensureSpecBuildable } from "./validate.ts";
import { createMainPod } from "./create_main.ts";
import { dropTag, hibernateRefused } from "./tag_gate.ts";
import { vmHibernationConfirmedStored } from "./suspend.ts";

/** How often a migration in flight looks again (ms). */
export const REQUEUE_MIGRATE_POLL_MS = 5_000;
/** How long to wait when the old main is still terminating (ms). */
const REQUEUE_WAIT_FOR_OLD_MAIN_MS = 5_000;

/**
 * Runs the migration when one is wanted or in flight; otherwise the normal flow goes on.
 *
 * A target that cannot take the main (no such node, or outside the set's pool or CPU class) is
 * treated as no target at all, after a Warning and Progressing=False MigrationTargetUnknown:
 * nothing is hibernated, deleted or recreated toward it, a main at rest stays where it runs, and
 * a migration already in flight finishes the way a cleared spec.nodeName finishes it — the
 * quiesced main is woken in place, a main already deleted is restored from its snapshot anywhere
 * in the pool, and the snapshot is dropped once that VM is live. When the node appears (the
 * controller watches nodes), the next pass starts the migration.
 */
export async function reconcileMigration(pass: SetPass): Promise<Step> {
  const { cs, classified, deps } = pass;
  const pinned = cs.spec.nodeName ?? "";
  const migrating = cs.status?.phase === "Migrating";
  if (!deps.registry || (pinned === "" && !migrating)) return GO_ON;
  const main = classified.main;
  // A pinned set at rest: no registry probe. Safe because Migrating is persisted before any
  // side effect, so an interrupted migration is never mistaken for this.
  if (!migrating && podSettledOn(main, pinned)) return GO_ON;
  const mainNode = main?.spec?.nodeName ?? "";
  let desired = pinned;
  let targetProblem = "";
  // Only where the main would move, or a restore would be pinned: a fresh main simply waits for
  // its node, and an unscheduled main is no migration.
  if (pinned !== "" && (migrating || !main || (mainNode !== "" && mainNode !== pinned))) {
    targetProblem = await migrationTargetProblem(pass, pinned);
    if (targetProblem !== "") {
      desired = "";
      if (!migrating && main) {
        reportUnknownTarget(pass, targetProblem);
        return GO_ON;
      }
    }
  }
  // A main quiesced on the target by a CocoonHibernation is that CR's idle state, not a
  // migration: leave it before paying for the probe.
  if (main && readHibernateState(main) && (desired === "" || mainNode === desired)) {
    let ownedByCR: Set<string>;
    try {
      ownedByCR = await podsHibernatedByCR(
        deps,
        cs.metadata.namespace ?? "",
        [main.metadata.name ?? ""],
        pass.signal,
      );
    } catch (err) {
      throw wrapError("migrate", err);
    }
    if (ownedByCR.has(main.metadata.name ?? "")) return GO_ON;
  }
  const vmName = vmNameForDeployment(cs.metadata.namespace ?? "", cs.metadata.name ?? "", 0);
  let snapshot: boolean;
  try {
    snapshot = await hasHibernateSnapshot(deps.registry, vmName, pass.signal);
  } catch (err) {
    // Falling through could clear the hibernate request mid-migration or fresh-boot over the
    // snapshot: fail the pass instead.
    throw wrapError("migrate", err);
  }
  // A fresh main of a set pinned to a missing node is no migration: it waits for the node.
  if (targetProblem !== "" && (migrating || snapshot)) reportUnknownTarget(pass, targetProblem);
  if (!snapshot) {
    if (desired === "" || !main || mainNode === "" || mainNode === desired) {
      // Settled, aborted, or a fresh create: the normal flow takes it from here.
      return GO_ON;
    }
    return await startMigration(pass, main, desired);
  }
  return await advanceMigration(pass, vmName, desired);
}

/**
 * Quiesces the main on the wrong node; Migrating is written first. Not for a spec the server
 * would refuse: the quiesced main could never be recreated.
 */
async function startMigration(pass: SetPass, main: Pod, desired: string): Promise<Stop> {
  const buildable = await ensureSpecBuildable(pass);
  if (buildable.stop) return buildable;
  // A VM name another namespace derives too is not hibernated (its push would land where the
  // other tenant reads): the migration does not start, and looks again later.
  if (!readHibernateState(main) && await hibernateRefused(pass, main)) {
    return stop({ requeueAfter: REQUEUE_MIGRATE_POLL_MS });
  }
  if (!readHibernateState(main)) {
    pass.log.info("migrating main from {from} to {to}: hibernating it", {
      from: main.spec?.nodeName ?? "",
      to: desired,
    });
  }
  // Migrating is stored before the VM is asked to hibernate: a restarted operator resumes the
  // migration instead of reading the quiesced main as a CocoonHibernation's.
  return afterStatus("Migrating", async () => {
    await recordHibernation(pass, [parseVMSpec(main).vmName]);
    try {
      await patchHibernateState(pass.deps.client, main, true, pass.signal);
    } catch (err) {
      throw wrapError(`migrate: set hibernate on ${podRef(main)}`, err);
    }
    return stop({ requeueAfter: REQUEUE_MIGRATE_POLL_MS });
  });
}

/**
 * Where a migration whose snapshot exists stands, read from the main the pass sees (one state
 * per row of docs/cocoonset.md's migration flow):
 *
 * | state                | main                                          | act                   |
 * | -------------------- | --------------------------------------------- | --------------------- |
 * | await-live-elsewhere | on another node, not asked, VM not live       | wait                  |
 * | ask-again            | on another node, not asked, VM may be leaving | ask again             |
 * | drop-stale-tag       | on another node, not asked, VM live, staying  | drop tag              |
 * | release-old-main     | on another node, asked to hibernate           | delete once confirmed |
 * | recreate             | none                                          | restore on target     |
 * | await-vm-down        | asked to hibernate where it belongs, VM up    | wait                  |
 * | wake-in-place        | asked to hibernate where it belongs, VM down  | clear the ask         |
 * | not-ours             | VM not live, set not Migrating                | normal flow           |
 * | replace-restore-pod  | VM not live, unbound, pinned to another node  | delete it             |
 * | await-restore        | VM not live otherwise                         | wait                  |
 * | drop-tag             | VM live where it belongs                      | drop tag              |
 *
 * "On another node": bound to a node other than the desired one, while one is desired. "Not
 * asked": no hibernate request. "Where it belongs": the desired node, or anywhere when none is.
 */
export type MigrationState =
  | "await-live-elsewhere"
  | "ask-again"
  | "drop-stale-tag"
  | "release-old-main"
  | "recreate"
  | "await-vm-down"
  | "wake-in-place"
  | "not-ours"
  | "replace-restore-pod"
  | "await-restore"
  | "drop-tag";

/** What decideMigration reads of the main agent pod. */
export interface MigrationMainFacts {
  /** The node it is bound to, "" when unscheduled. */
  node: string;
  hibernateRequested: boolean;
  live: boolean;
  /** A VM id and a running container (vmUp). */
  up: boolean;
  mayBeLeaving: boolean;
  restoreMarked: boolean;
  /** The node its required hostname affinity names, or "". */
  requiredNode: string;
}

/** What decideMigration reads of a pass. */
export interface MigrationFacts {
  main?: MigrationMainFacts;
  /** Where the main should run; "" for anywhere in the pool (no target, or an unknown one). */
  desired: string;
  /** Whether the persisted phase is Migrating. */
  migrating: boolean;
}

/** The facts of main for decideMigration. */
export function migrationMainFacts(main: Pod): MigrationMainFacts {
  return {
    node: main.spec?.nodeName ?? "",
    hibernateRequested: readHibernateState(main),
    live: vmLive(main),
    up: vmUp(main),
    mayBeLeaving: vmMayBeLeaving(main),
    restoreMarked: readRestoreFromHibernate(main),
    requiredNode: requiredNodeOf(main),
  };
}

/** The one state a migration whose snapshot exists is in (see MigrationState). */
export function decideMigration(f: MigrationFacts): MigrationState {
  const main = f.main;
  if (!main) return "recreate";
  const elsewhere = f.desired !== "" && main.node !== "" && main.node !== f.desired;
  if (elsewhere) {
    if (main.hibernateRequested) return "release-old-main";
    // A main whose VM is not up may be restoring from this very tag (a wake in place, then a
    // re-target): the tag counts as a leftover only once it runs.
    if (!main.live) return "await-live-elsewhere";
    return main.mayBeLeaving ? "ask-again" : "drop-stale-tag";
  }
  if (main.hibernateRequested && (f.desired === "" || main.node === f.desired)) {
    return main.up ? "await-vm-down" : "wake-in-place";
  }
  if (!main.live) {
    if (!f.migrating) return "not-ours";
    const abandoned = main.node === "" && main.restoreMarked && main.requiredNode !== f.desired;
    return abandoned ? "replace-restore-pod" : "await-restore";
  }
  return "drop-tag";
}

/** Steps a migration whose snapshot exists: runs the executor of the state it is in. */
async function advanceMigration(
  pass: SetPass,
  vmName: string,
  desired: string,
): Promise<Step> {
  const main = pass.classified.main;
  const state = decideMigration({
    main: main && migrationMainFacts(main),
    desired,
    migrating: pass.cs.status?.phase === "Migrating",
  });
  if (state === "recreate" || !main) return await recreateOnTarget(pass, desired);
  switch (state) {
    case "await-live-elsewhere":
    case "await-vm-down":
      return migrating();
    case "ask-again":
      // The VM asked to hibernate last, still up under the same id: vk-cocoon of today may have
      // pushed this tag from it and be about to remove it (the ask withdrawn meanwhile), so the
      // tag may be its only copy. Ask again instead: a fresh push replaces the tag, and the old
      // main goes only on the VM's own confirmation.
      return await startMigration(pass, main, desired);
    case "drop-stale-tag":
      return await dropStaleTag(pass, vmName);
    case "release-old-main":
      return await releaseOldMain(pass, main);
    case "wake-in-place":
      return await wakeInPlace(pass, main);
    case "not-ours":
      // Restoring without the persisted Migrating phase: a CocoonHibernation wake in flight.
      return GO_ON;
    case "replace-restore-pod":
      return await replaceRestorePod(pass, main, desired);
    case "await-restore":
      await warnIfPoolEmpty(pass, main);
      return migrating();
    case "drop-tag":
      return await dropMigrationTag(pass, main, vmName);
  }
}

/**
 * A tag this controller never asked for is a leftover (suspend/unsuspend keep tags); restoring
 * it would roll the VM back. Drop it, keep the live pod.
 */
async function dropStaleTag(pass: SetPass, vmName: string): Promise<Stop> {
  pass.log.warn("stale hibernate snapshot {vm} found before migrating, dropping it", {
    vm: vmName,
  });
  try {
    await dropTag(pass, vmName, HIBERNATE_SNAPSHOT_TAG);
  } catch (err) {
    throw wrapError(`migrate: drop stale hibernate snapshot ${vmName}`, err);
  }
  return migrating();
}

/** Deletes the old main once its VM confirmed the hibernation, else waits. */
async function releaseOldMain(pass: SetPass, main: Pod): Promise<Stop> {
  // The tag alone is no proof: vk-cocoon pushes it before it removes the VM, and rolls it back
  // when the removal fails. Only the VM's own confirmation makes it final.
  if (!await vmHibernationConfirmedStored(pass, main)) return migrating();
  // The snapshot landed: tear down the old pod. The node check spares a restore pod that is
  // not scheduled yet, which would otherwise be deleted and recreated in a loop.
  pass.log.info("migration snapshot is in the registry, deleting the old main on {node}", {
    node: main.spec?.nodeName ?? "",
  });
  await deletePod(pass, main, "old main after migration snapshot");
  return migrating();
}

/** Recreates the main on the target (or anywhere in the pool), restoring from the snapshot. */
async function recreateOnTarget(pass: SetPass, desired: string): Promise<Stop> {
  const { cs } = pass;
  // Recreating also finishes an aborted migration: the snapshot is never stranded.
  const buildable = await ensureSpecBuildable(pass, { creatingMain: true });
  if (buildable.stop) return buildable;
  // Migrating is stored before the restore pod exists (Go wrote it after the create): a pass
  // that finds a restoring main without it leaves it alone as a CocoonHibernation wake, and the
  // snapshot would never be dropped.
  return afterStatus("Migrating", async () => {
    const pod = buildAgentPod(withTarget(cs, desired), 0);
    markRestoreFromHibernate(pod);
    const created = await createMainPod(pass, pod, {
      phase: "Migrating",
      clashWaitMs: REQUEUE_WAIT_FOR_OLD_MAIN_MS,
      context: `migrate: recreate main on ${desired || "any node"}`,
    });
    if (created.stop) return created;
    pass.log.info("migration recreated the main on {node} from its snapshot", {
      node: desired || "any node",
    });
    return migrating();
  });
}

/**
 * Quiesced where it should be (re-targeted back, or an unsuspend raced the tag; CR-owned
 * hibernation was excluded before the probe): woken in place — only once vk-cocoon has torn the
 * old VM down (await-vm-down before this). It pushes the tag before it removes the VM, so until
 * then the pod still shows that VM live, which after a wake would pass for the restored one and
 * drop the snapshot.
 */
async function wakeInPlace(pass: SetPass, main: Pod): Promise<Stop> {
  pass.log.info("waking {pod} in place", { pod: podRef(main) });
  try {
    await patchHibernateState(pass.deps.client, main, false, pass.signal);
  } catch (err) {
    throw wrapError(`migrate: clear hibernate on ${podRef(main)}`, err);
  }
  return migrating();
}

/**
 * Our restore pod waits for a node the migration no longer goes to (re-targeted, or the target
 * left the pool). It was never bound, so no VM ran from it and the snapshot is intact: replaced,
 * or it would wait forever.
 */
async function replaceRestorePod(pass: SetPass, main: Pod, desired: string): Promise<Stop> {
  pass.log.info("restore pod {pod} is pinned to {old}, not {node}: recreating it", {
    pod: podRef(main),
    old: requiredNodeOf(main),
    node: desired || "any node",
  });
  await deletePod(pass, main, "unscheduled restore pod of an abandoned target");
  return migrating();
}

/** The restored VM is live: the snapshot has done its job. */
async function dropMigrationTag(pass: SetPass, main: Pod, vmName: string): Promise<Stop> {
  pass.log.info("main restored on {node}, dropping the migration snapshot", {
    node: main.spec?.nodeName ?? "",
  });
  try {
    await dropTag(pass, vmName, HIBERNATE_SNAPSHOT_TAG);
  } catch (err) {
    throw wrapError(`migrate: drop hibernate snapshot ${vmName}`, err);
  }
  return migrating();
}

/** A migration in flight: Migrating, and a look again after the poll interval. */
function migrating(): Stop {
  return stop({ requeueAfter: REQUEUE_MIGRATE_POLL_MS }, "Migrating");
}

/**
 * cs as the migration builds its main: pinned to desired, or to no node when desired is "" (an
 * abandoned target restores anywhere in the pool). cs itself is not changed.
 */
function withTarget(cs: CocoonSet, desired: string): CocoonSet {
  if ((cs.spec.nodeName ?? "") === desired) return cs;
  return { ...cs, spec: { ...cs.spec, nodeName: desired || undefined } };
}

/** The node a pod's required hostname affinity pins it to (the builder's shape), or "". */
export function requiredNodeOf(pod: Pod): string {
  const terms = pod.spec?.affinity?.nodeAffinity?.requiredDuringSchedulingIgnoredDuringExecution
    ?.nodeSelectorTerms ?? [];
  for (const term of terms) {
    for (const e of term.matchExpressions ?? []) {
      if (e.key === LABEL_HOSTNAME && e.operator === "In" && e.values?.length === 1) {
        return e.values[0];
      }
    }
  }
  return "";
}

/** A pinned set at rest: the main runs live on the desired node with no quiesce pending. */
export function podSettledOn(main: Pod | undefined, desired: string): boolean {
  return main !== undefined && (main.spec?.nodeName ?? "") === desired && vmLive(main) &&
    !readHibernateState(main);
}
