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
import type { Pod } from "../kube/core.ts";
import { Pods } from "../kube/core.ts";
import { isAlreadyExists, wrapError } from "../kube/errors.ts";
import { patchHibernateState } from "../common/k8s/client_patch.ts";
import type { CocoonSet } from "../common/apis/v1/cocoonset_types.ts";
import {
  HibernateSnapshotTag,
  markRestoreFromHibernate,
  parseVMSpec,
  readHibernateState,
  readRestoreFromHibernate,
  vmLive,
  vmMayBeLeaving,
  vmNameForDeployment,
  vmUp,
} from "../common/meta/mod.ts";
import { hasHibernateSnapshot } from "../snapshot/registry.ts";
import { deletePod, type Handled, podRef, type SetPass } from "./pass.ts";
import { migrationTargetProblem, reportUnknownTarget, warnIfPoolEmpty } from "./nodes.ts";
import { buildAgentPod, LabelHostname } from "./pods.ts";
import { podsHibernatedByCR } from "./restore.ts";
import { recordHibernation } from "./snapshot_ledger.ts";
import { writeSetStatus } from "./status.ts";
import { ensureSpecBuildable, markSpecChecked, rethrowInvalidMain } from "./validate.ts";
import { settleMainCreateClash } from "./name_clash.ts";
import { dropTag, hibernateRefused } from "./tag_gate.ts";
import { vmHibernationConfirmedStored } from "./suspend.ts";
import { refuseCollidingCreate, requeueVMNameConflictMs } from "./vm_collision.ts";

/** How often a migration in flight looks again (ms). */
export const requeueMigratePollMs = 5_000;
/** How long to wait when the old main is still terminating (ms). */
const requeueWaitForOldMainMs = 5_000;

const notHandled: Handled = { handled: false };

/**
 * Runs the migration when one is wanted or in flight; handled=false hands the pass back to the
 * normal flow.
 *
 * A target that cannot take the main (no such node, or outside the set's pool or CPU class) is
 * treated as no target at all, after a Warning and Progressing=False MigrationTargetUnknown:
 * nothing is hibernated, deleted or recreated toward it, a main at rest stays where it runs, and
 * a migration already in flight finishes the way a cleared spec.nodeName finishes it — the
 * quiesced main is woken in place, a main already deleted is restored from its snapshot anywhere
 * in the pool, and the snapshot is dropped once that VM is live. When the node appears (the
 * controller watches nodes), the next pass starts the migration.
 */
export async function reconcileMigration(pass: SetPass): Promise<Handled> {
  const { cs, classified, deps } = pass;
  const pinned = cs.spec.nodeName ?? "";
  const migrating = cs.status?.phase === "Migrating";
  if (!deps.registry || (pinned === "" && !migrating)) return notHandled;
  const main = classified.main;
  // A pinned set at rest: no registry probe. Safe because Migrating is persisted before any
  // side effect, so an interrupted migration is never mistaken for this.
  if (!migrating && podSettledOn(main, pinned)) return notHandled;
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
        return notHandled;
      }
    }
  }
  // A main quiesced on the target by a CocoonHibernation is that CR's idle state, not a
  // migration: leave it before paying for the probe.
  if (main && readHibernateState(main) && (desired === "" || mainNode === desired)) {
    let ownedByCR: Set<string>;
    try {
      ownedByCR = await podsHibernatedByCR(deps, cs.metadata.namespace ?? "", pass.signal);
    } catch (err) {
      throw wrapError("migrate", err);
    }
    if (ownedByCR.has(main.metadata.name ?? "")) return notHandled;
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
      return notHandled;
    }
    return await startMigration(pass, main, desired);
  }
  return await advanceMigration(pass, vmName, desired);
}

/**
 * Quiesces the main on the wrong node; Migrating is written first. Not for a spec the server
 * would refuse: the quiesced main could never be recreated.
 */
async function startMigration(pass: SetPass, main: Pod, desired: string): Promise<Handled> {
  await ensureSpecBuildable(pass);
  // A VM name another namespace derives too is not hibernated (its push would land where the
  // other tenant reads): the migration does not start, and looks again later.
  if (!readHibernateState(main) && await hibernateRefused(pass, main)) {
    return { handled: true, result: { requeueAfter: requeueMigratePollMs } };
  }
  if (!readHibernateState(main)) {
    pass.log.info("migrating main from {from} to {to}: hibernating it", {
      from: main.spec?.nodeName ?? "",
      to: desired,
    });
  }
  await writeSetStatus(pass, "Migrating");
  await recordHibernation(pass, [parseVMSpec(main).vmName]);
  try {
    await patchHibernateState(pass.deps.client, main, true, pass.signal);
  } catch (err) {
    throw wrapError(`migrate: set hibernate on ${podRef(main)}`, err);
  }
  return { handled: true, result: { requeueAfter: requeueMigratePollMs } };
}

/** Steps a migration whose snapshot exists: teardown → recreate → wait for restore → drop. */
async function advanceMigration(pass: SetPass, vmName: string, desired: string): Promise<Handled> {
  const { cs, deps } = pass;
  const main = pass.classified.main;
  const node = main?.spec?.nodeName ?? "";

  if (main && desired !== "" && node !== "" && node !== desired) {
    if (!readHibernateState(main)) {
      // A main whose VM is not up may be restoring from this very tag (a wake in place, then a
      // re-target): wait for it to run before the tag counts as a leftover.
      if (!vmLive(main)) return await markMigrating(pass);
      // The VM asked to hibernate last, still up under the same id: vk-cocoon of today may have
      // pushed this tag from it and be about to remove it (the ask withdrawn meanwhile), so the
      // tag may be its only copy. Ask again instead: a fresh push replaces the tag, and the old
      // main goes only on the VM's own confirmation.
      if (vmMayBeLeaving(main)) return await startMigration(pass, main, desired);
      // A tag this controller never asked for is a leftover (suspend/unsuspend keep tags);
      // restoring it would roll the VM back. Drop it, keep the live pod.
      pass.log.warn("stale hibernate snapshot {vm} found before migrating, dropping it", {
        vm: vmName,
      });
      try {
        await dropTag(pass, vmName, HibernateSnapshotTag);
      } catch (err) {
        throw wrapError(`migrate: drop stale hibernate snapshot ${vmName}`, err);
      }
      return await markMigrating(pass);
    }
    // The tag alone is no proof: vk-cocoon pushes it before it removes the VM, and rolls it back
    // when the removal fails. Only the VM's own confirmation makes it final.
    if (!await vmHibernationConfirmedStored(pass, main)) return await markMigrating(pass);
    // The snapshot landed: tear down the old pod. The node check spares a restore pod that is
    // not scheduled yet, which would otherwise be deleted and recreated in a loop.
    pass.log.info("migration snapshot is in the registry, deleting the old main on {node}", {
      node,
    });
    await deletePod(pass, main, "old main after migration snapshot");
    return await markMigrating(pass);
  }

  if (!main) {
    // Recreating also finishes an aborted migration: the snapshot is never stranded.
    await ensureSpecBuildable(pass, { creatingMain: true });
    // Migrating is durable before the restore pod exists (unlike Go, which wrote it after the
    // create): a pass that finds a restoring main without it leaves it alone as a
    // CocoonHibernation wake, and the snapshot would never be dropped.
    await writeSetStatus(pass, "Migrating");
    const pod = buildAgentPod(withTarget(cs, desired), 0);
    markRestoreFromHibernate(pod);
    if (await refuseCollidingCreate(pass, pod, "the main agent")) {
      await writeSetStatus(pass, "Migrating");
      return { handled: true, result: { requeueAfter: requeueVMNameConflictMs } };
    }
    try {
      await deps.client.create(Pods, pod, { signal: pass.signal });
    } catch (err) {
      await rethrowInvalidMain(pass, err);
      if (!isAlreadyExists(err)) {
        throw wrapError(`migrate: recreate main on ${desired || "any node"}`, err);
      }
      return {
        handled: true,
        result: await settleMainCreateClash(pass, "Migrating", requeueWaitForOldMainMs),
      };
    }
    markSpecChecked(pass);
    pass.log.info("migration recreated the main on {node} from its snapshot", {
      node: desired || "any node",
    });
    return await markMigrating(pass);
  }

  if (readHibernateState(main) && (desired === "" || node === desired)) {
    // Quiesced where it should be (re-targeted back, or an unsuspend raced the tag; CR-owned
    // hibernation was excluded before the probe): wake it in place — once vk-cocoon has torn the
    // old VM down. It pushes the tag before it removes the VM, so until then the pod still shows
    // that VM live, which after a wake would pass for the restored one and drop the snapshot.
    if (vmUp(main)) return await markMigrating(pass);
    pass.log.info("waking {pod} in place", { pod: podRef(main) });
    try {
      await patchHibernateState(deps.client, main, false, pass.signal);
    } catch (err) {
      throw wrapError(`migrate: clear hibernate on ${podRef(main)}`, err);
    }
    return await markMigrating(pass);
  }

  if (!vmLive(main)) {
    // Restoring. Without the persisted Migrating phase this is a CocoonHibernation wake in
    // flight, not ours: leave it alone.
    if (cs.status?.phase !== "Migrating") return notHandled;
    if (node === "" && readRestoreFromHibernate(main) && requiredNodeOf(main) !== desired) {
      // Our restore pod waits for a node the migration no longer goes to (re-targeted, or the
      // target left the pool). It was never bound, so no VM ran from it and the snapshot is
      // intact: replace it, or it would wait forever.
      pass.log.info("restore pod {pod} is pinned to {old}, not {node}: recreating it", {
        pod: podRef(main),
        old: requiredNodeOf(main),
        node: desired || "any node",
      });
      await deletePod(pass, main, "unscheduled restore pod of an abandoned target");
      return await markMigrating(pass);
    }
    await warnIfPoolEmpty(pass, main);
    return await markMigrating(pass);
  }

  pass.log.info("main restored on {node}, dropping the migration snapshot", { node });
  try {
    await dropTag(pass, vmName, HibernateSnapshotTag);
  } catch (err) {
    throw wrapError(`migrate: drop hibernate snapshot ${vmName}`, err);
  }
  return await markMigrating(pass);
}

async function markMigrating(pass: SetPass): Promise<Handled> {
  await writeSetStatus(pass, "Migrating");
  return { handled: true, result: { requeueAfter: requeueMigratePollMs } };
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
      if (e.key === LabelHostname && e.operator === "In" && e.values?.length === 1) {
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
