/**
 * Toolboxes: one pod per entry of spec.toolboxes, named `<set>-<toolbox>`. Failed or drifted
 * toolboxes are replaced at once (no backoff), removed entries deleted, and a pod of that name
 * that is not this set's toolbox is never touched: it is reported as a name conflict.
 */
import type { Pod } from "../kube/core.ts";
import { Pods } from "../kube/core.ts";
import { isControlledBy } from "../kube/controllerutil.ts";
import { isAlreadyExists, isNotFound, wrapError } from "../kube/errors.ts";
import type { ToolboxSpec } from "../common/apis/v1/cocoonset_types.ts";
import { ConditionTypeReady } from "../common/k8s/condition.ts";
import { LabelRole, readLifecycleState, RoleToolbox } from "../common/meta/mod.ts";
import { parseGoInt } from "../common/meta/annotations.ts";
import { podIsTerminal } from "./pod_state.ts";
import { deletePod, type Pass, podRef } from "./pass.ts";
import { buildToolboxPod, podSpecMatchesToolbox, toolboxPodName } from "./pods.ts";
import { markRestoreIfHibernated } from "./restore.ts";
import type { StatusProblem } from "./status.ts";

/** Reason of problems with the spec that no retry fixes (Ready=False, Warning Event). */
export const ReasonInvalidSpec = "InvalidSpec";
/** Reason when a pod name the set needs belongs to something else (Ready=False, Warning Event). */
export const ReasonNameConflict = "NameConflict";

/**
 * Spec problems with toolbox names, checked before any toolbox is created or deleted: a
 * duplicate name, or a name that is an integer (its pod name would be an agent slot's). The
 * webhook refuses both, but it may be bypassed. undefined when the names are fine.
 */
export function toolboxNameProblem(
  toolboxes: readonly ToolboxSpec[] | undefined,
): string | undefined {
  const seen = new Set<string>();
  const duplicates = new Set<string>();
  const integers: string[] = [];
  for (const tb of toolboxes ?? []) {
    if (seen.has(tb.name)) duplicates.add(tb.name);
    seen.add(tb.name);
    // strconv.Atoi's notion of an integer, as the Go operator checked it.
    if (parseGoInt(tb.name, 64) !== undefined) integers.push(tb.name);
  }
  const parts: string[] = [];
  if (duplicates.size > 0) {
    parts.push(`duplicate toolbox names ${[...duplicates].map((n) => `"${n}"`).join(", ")}`);
  }
  if (integers.length > 0) {
    parts.push(
      `toolbox names ${integers.map((n) => `"${n}"`).join(", ")} are integers ` +
        "and would collide with agent slot pod names",
    );
  }
  return parts.length > 0 ? parts.join("; ") : undefined;
}

/** What ensureToolboxes did. */
export interface ToolboxOutcome {
  changed: boolean;
  /** Name conflicts found; the other toolboxes were still reconciled. */
  problems: StatusProblem[];
}

/**
 * Creates missing toolboxes, replaces failed or drifted ones and deletes those no longer in the
 * spec. The caller has already checked toolboxNameProblem.
 */
export async function ensureToolboxes(pass: Pass): Promise<ToolboxOutcome> {
  const { cs, classified } = pass;
  const out: ToolboxOutcome = { changed: false, problems: [] };
  const desired = new Set<string>();
  for (const tb of cs.spec.toolboxes ?? []) {
    desired.add(tb.name);
    const podName = toolboxPodName(cs.metadata.name ?? "", tb.name);
    const existing = classified.toolbox.get(tb.name);
    const sameName = classified.allByName.get(podName);
    if (sameName && sameName !== existing) {
      out.problems.push(nameConflict(tb.name, podName, describePod(sameName)));
      continue;
    }
    if (existing) {
      if (await triageToolbox(pass, existing, tb)) out.changed = true;
      continue;
    }
    const created = await createToolbox(pass, tb);
    if (typeof created === "object") out.problems.push(created);
    else if (created) out.changed = true;
  }
  for (const name of [...classified.toolbox.keys()].sort()) {
    if (desired.has(name)) continue;
    const pod = classified.toolbox.get(name)!;
    if (await deletePod(pass, pod, `removed toolbox ${name}`)) {
      pass.log.info("deleted toolbox {pod} no longer in the spec", { pod: podRef(pod) });
      out.changed = true;
    }
  }
  return out;
}

/** Creates one toolbox; true when created, a problem when its name is taken by another pod. */
async function createToolbox(pass: Pass, tb: ToolboxSpec): Promise<boolean | StatusProblem> {
  const pod = buildToolboxPod(pass.cs, tb);
  const restorable = await pass.intent();
  try {
    await markRestoreIfHibernated(
      pass.deps,
      pod,
      restorable.has(pod.metadata.name ?? ""),
      pass.signal,
    );
  } catch (err) {
    throw wrapError(`mark restore on toolbox ${tb.name}`, err);
  }
  try {
    await pass.deps.client.create(Pods, pod, { signal: pass.signal });
  } catch (err) {
    if (!isAlreadyExists(err)) throw wrapError(`create toolbox ${tb.name}`, err);
    return await checkToolboxCollision(pass, pod, tb.name);
  }
  pass.log.info("created toolbox {pod}", { pod: podRef(pod) });
  return true;
}

/**
 * A create answered AlreadyExists. If the live pod is this set's toolbox (still terminating, or
 * created by an earlier pass the cache has not shown yet) there is nothing to do; otherwise the
 * name belongs to another object. Read uncached: a foreign pod need not be in the cache at all.
 */
async function checkToolboxCollision(
  pass: Pass,
  pod: Pod,
  tbName: string,
): Promise<false | StatusProblem> {
  const ns = pod.metadata.namespace ?? "";
  const name = pod.metadata.name ?? "";
  let live: Pod;
  try {
    live = await pass.deps.apiReader.get(Pods, ns, name, { signal: pass.signal });
  } catch (err) {
    if (isNotFound(err)) return false; // gone meanwhile: the next pass creates it
    throw wrapError(`get existing pod ${ns}/${name}`, err);
  }
  if (live.metadata.labels?.[LabelRole] === RoleToolbox && isControlledBy(live, pass.cs)) {
    return false;
  }
  return nameConflict(tbName, name, describePod(live));
}

/** Deletes a failed or drifted toolbox so the next pass recreates it. */
async function triageToolbox(pass: Pass, pod: Pod, tb: ToolboxSpec): Promise<boolean> {
  let why: string;
  if (podIsTerminal(pod)) {
    why = `failed (phase ${pod.status?.phase ?? ""}, lifecycle ${readLifecycleState(pod)})`;
  } else if (!podSpecMatchesToolbox(pod, pass.cs, tb)) {
    why = "drifted from the spec";
  } else {
    return false;
  }
  pass.log.info("toolbox {pod} {why}, deleting to recreate", { pod: podRef(pod), why });
  await deletePod(pass, pod, `toolbox ${tb.name} for recreate`);
  return true;
}

function nameConflict(tbName: string, podName: string, other: string): StatusProblem {
  return {
    condition: ConditionTypeReady,
    reason: ReasonNameConflict,
    message: `toolbox ${tbName} needs pod ${podName}, which is taken by ${other}`,
  };
}

/** "pod ns/name (role main of this set)" / "(controlled by Kind name)" / "(not managed by …)". */
export function describePod(pod: Pod): string {
  const owner = pod.metadata.ownerReferences?.find((r) => r.controller);
  const role = pod.metadata.labels?.[LabelRole];
  const detail = owner
    ? `controlled by ${owner.kind} ${owner.name}${role ? `, role ${role}` : ""}`
    : "not controlled by any CocoonSet";
  return `pod ${podRef(pod)} (${detail})`;
}
