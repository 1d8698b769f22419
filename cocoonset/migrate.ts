/**
 * Cross-node migration of the main (docs/cocoonset.md, "Migration"): hibernate it, delete it once
 * its VM confirmed the snapshot, restore it on the target, drop the snapshot once the new VM is
 * live. Migrating is stored before the first side effect, so a restarted operator resumes.
 */
import type { Pod } from "../kube/mod.ts";
import { patchHibernateState } from "../common/k8s/pod_patch.ts";
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
  doing,
  GO_ON,
  podRef,
  POLL_MS,
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
import { createMainPod } from "./create.ts";
import { dropTag, hibernateRefused } from "./tag_gate.ts";
import { vmHibernationConfirmedStored } from "./suspend.ts";

/**
 * The Migration step, when a migration is wanted or in flight. A target that cannot take the main
 * counts as none (MigrationTargetUnknown): nothing moves toward it, and a migration in flight
 * finishes as a cleared spec.nodeName does (woken in place, or restored anywhere in the pool).
 */
export async function reconcileMigration(pass: SetPass): Promise<Step> {
  const { cs, deps } = pass;
  const pinned = cs.spec.nodeName ?? "";
  const migrating = cs.status?.phase === "Migrating";
  if (!deps.registry || (pinned === "" && !migrating)) return GO_ON;
  const main = pass.classified.main;
  const mainNode = main?.spec?.nodeName ?? "";
  // A pinned set at rest costs no registry probe: Migrating is stored before any side effect,
  // so an interrupted migration never looks like this.
  const settled = main && mainNode === pinned && vmLive(main) && !readHibernateState(main);
  if (!migrating && settled) return GO_ON;
  let desired = pinned;
  let targetProblem = "";
  // Only where the main would move or a restore be pinned: a fresh main waits for its node.
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
  // A main quiesced where it belongs by a CocoonHibernation is that request's, not a migration.
  if (main && readHibernateState(main) && (desired === "" || mainNode === desired)) {
    const name = main.metadata.name ?? "";
    if ((await podsHibernatedByCR(pass, [name])).has(name)) return GO_ON;
  }
  const vmName = vmNameForDeployment(cs.metadata.namespace ?? "", cs.metadata.name ?? "", 0);
  // A probe error fails the pass: falling through could boot the main fresh over the snapshot.
  const snapshot = await doing("migrate", hasHibernateSnapshot(deps.registry, vmName, pass.signal));
  if (targetProblem !== "" && (migrating || snapshot)) reportUnknownTarget(pass, targetProblem);
  if (snapshot) return await advanceMigration(pass, vmName, desired);
  // Settled, aborted, or a fresh create: the normal flow takes it from here.
  if (desired === "" || !main || mainNode === "" || mainNode === desired) return GO_ON;
  return await startMigration(pass, main, desired);
}

/**
 * Quiesces the main on the wrong node, unless the spec is refused (it could never be recreated)
 * or another namespace derives its VM name (tag_gate.ts hibernateRefused).
 */
async function startMigration(pass: SetPass, main: Pod, desired: string): Promise<Stop> {
  const buildable = await ensureSpecBuildable(pass);
  if (buildable.stop) return buildable;
  if (!readHibernateState(main)) {
    if (await hibernateRefused(pass, main)) return stop({ requeueAfter: POLL_MS });
    pass.log.info("migrating main from {from} to {to}: hibernating it", {
      from: main.spec?.nodeName ?? "",
      to: desired,
    });
  }
  // Migrating is stored before the ask, and the ledger records the VM before it: a restarted
  // operator resumes the migration instead of taking the quiesced main for a request's.
  return afterStatus("Migrating", async () => {
    await recordHibernation(pass, [parseVMSpec(main).vmName]);
    await doing(
      `migrate: set hibernate on ${podRef(main)}`,
      patchHibernateState(pass.deps.client, main, true, pass.signal),
    );
    return stop({ requeueAfter: POLL_MS });
  });
}

/**
 * Where a migration whose snapshot exists stands, read from the main the pass sees:
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

/**
 * What decideMigration reads of a pass: the main's node ("" unscheduled), VM and pin; desired is
 * "" for anywhere in the pool.
 */
export interface MigrationFacts {
  main?: {
    node: string;
    hibernateRequested: boolean;
    live: boolean;
    up: boolean;
    mayBeLeaving: boolean;
    restoreMarked: boolean;
    requiredNode: string;
  };
  desired: string;
  migrating: boolean;
}

/** The one state a migration whose snapshot exists is in (see MigrationState). */
export function decideMigration(f: MigrationFacts): MigrationState {
  const main = f.main;
  if (!main) return "recreate";
  if (f.desired !== "" && main.node !== "" && main.node !== f.desired) {
    if (main.hibernateRequested) return "release-old-main";
    // A VM not up may be restoring from this very tag (a wake in place, then a re-target).
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

/** Steps a migration whose snapshot exists: runs the state it is in. */
async function advanceMigration(pass: SetPass, vmName: string, desired: string): Promise<Step> {
  const main = pass.classified.main;
  const state = decideMigration({
    main: main && {
      node: main.spec?.nodeName ?? "",
      hibernateRequested: readHibernateState(main),
      live: vmLive(main),
      up: vmUp(main),
      mayBeLeaving: vmMayBeLeaving(main),
      restoreMarked: readRestoreFromHibernate(main),
      requiredNode: requiredNodeOf(main),
    },
    desired,
    migrating: pass.cs.status?.phase === "Migrating",
  });
  // Restoring without the stored Migrating phase: a CocoonHibernation's wake in flight.
  if (state === "not-ours") return GO_ON;
  if (state === "recreate" || !main) return await recreateOnTarget(pass, desired);
  // The VM last asked to hibernate is still up under that id and may be about to go: a fresh ask
  // replaces the tag, and the old main goes only on the VM's own confirmation.
  if (state === "ask-again") return await startMigration(pass, main, desired);
  const node = main.spec?.nodeName ?? "";
  if (state === "drop-stale-tag" || state === "drop-tag") {
    // A tag this controller never asked for is a leftover: restoring it would roll back.
    if (state === "drop-stale-tag") {
      pass.log.warn("stale hibernate snapshot {vm} found before migrating, dropping it", {
        vm: vmName,
      });
    } else pass.log.info("main restored on {node}, dropping the migration snapshot", { node });
    await doing(`migrate: drop ${vmName}:hibernate`, dropTag(pass, vmName, HIBERNATE_SNAPSHOT_TAG));
  } else if (state === "release-old-main") {
    // The tag alone is no proof: vk-cocoon pushes it before it removes the VM and rolls it back
    // when the removal fails. Only the VM's own confirmation makes it final.
    if (await vmHibernationConfirmedStored(pass, main)) {
      pass.log.info("migration snapshot is in the registry, deleting the old main on {node}", {
        node,
      });
      await deletePod(pass, main, "old main after migration snapshot");
    }
  } else if (state === "wake-in-place") {
    // Quiesced where it belongs with its VM down: before that the pod still shows the old VM
    // live, which a wake would take for the restored one.
    pass.log.info("waking {pod} in place", { pod: podRef(main) });
    await doing(
      `migrate: clear hibernate on ${podRef(main)}`,
      patchHibernateState(pass.deps.client, main, false, pass.signal),
    );
  } else if (state === "replace-restore-pod") {
    // Our restore pod waits for a node the migration no longer goes to; never bound, no VM ran
    // from it and the snapshot is intact.
    pass.log.info("restore pod {pod} is pinned to {old}, not {node}: recreating it", {
      pod: podRef(main),
      old: requiredNodeOf(main),
      node: desired || "any node",
    });
    await deletePod(pass, main, "unscheduled restore pod of an abandoned target");
  } else if (state === "await-restore") await warnIfPoolEmpty(pass, main);
  return migrating();
}

/** Restores the main on the target (or anywhere); also finishes an aborted migration. */
async function recreateOnTarget(pass: SetPass, desired: string): Promise<Stop> {
  const buildable = await ensureSpecBuildable(pass, { creatingMain: true });
  if (buildable.stop) return buildable;
  // Migrating is stored before the restore pod exists (Go wrote it after): a restoring main
  // without it is left to a CocoonHibernation, and the snapshot would never be dropped.
  return afterStatus("Migrating", async () => {
    // Pinned to the target, or to no node when there is none.
    const spec = { ...pass.cs.spec, nodeName: desired || undefined };
    const pod = buildAgentPod({ ...pass.cs, spec }, 0);
    markRestoreFromHibernate(pod);
    const context = `migrate: recreate main on ${desired || "any node"}`;
    const created = await createMainPod(pass, pod, { phase: "Migrating", context });
    if (created.stop) return created;
    pass.log.info("migration recreated the main on {node} from its snapshot", {
      node: desired || "any node",
    });
    return migrating();
  });
}

/** A migration in flight: Migrating, and a look again soon. */
function migrating(): Stop {
  return stop({ requeueAfter: POLL_MS }, "Migrating");
}

/** The node a pod's required hostname affinity pins it to (the builder's shape), or "". */
export function requiredNodeOf(pod: Pod): string {
  const terms = pod.spec?.affinity?.nodeAffinity?.requiredDuringSchedulingIgnoredDuringExecution
    ?.nodeSelectorTerms ?? [];
  const pin = terms.flatMap((t) => t.matchExpressions ?? []).find((e) =>
    e.key === LABEL_HOSTNAME && e.operator === "In" && e.values?.length === 1
  );
  return pin?.values?.[0] ?? "";
}
