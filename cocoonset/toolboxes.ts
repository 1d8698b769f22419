/**
 * Toolboxes: one pod `<set>-<toolbox>` per entry of spec.toolboxes, replaced at once when failed
 * or drifted, deleted with its entry; a pod of that name that is not this set's toolbox is never
 * touched but reported as a name clash.
 */
import type { Pod } from "../kube/mod.ts";
import type { ToolboxSpec } from "../common/apis/v1/cocoonset_types.ts";
import { readLifecycleState } from "../common/meta/mod.ts";
import { parseGoInt } from "../common/meta/annotations.ts";
import { buildToolboxPod, isPodFailed, toolboxPodName } from "./pods.ts";
import { deletePod, podRef, type SetPass } from "./pass.ts";
import { podSpecMatchesToolbox } from "./drift.ts";
import { createPart, reportNameClash } from "./create.ts";
import { partBuildable } from "./validate.ts";
import { restoreIntent } from "./restore.ts";

/**
 * What is wrong with the toolbox names (the webhook refuses both, but may be bypassed): a
 * duplicate, or an integer (its pod name would be an agent slot's); undefined when nothing is.
 */
export function toolboxNameProblem(
  toolboxes: readonly ToolboxSpec[] | undefined,
): string | undefined {
  const names = (toolboxes ?? []).map((tb) => tb.name);
  const quoted = (list: Iterable<string>) => [...list].map((n) => `"${n}"`).join(", ");
  const duplicates = new Set(names.filter((n, i) => names.indexOf(n) !== i));
  const integers = names.filter((n) => parseGoInt(n, 64) !== undefined);
  const parts: string[] = [];
  if (duplicates.size > 0) parts.push(`duplicate toolbox names ${quoted(duplicates)}`);
  if (integers.length > 0) {
    const collide = "are integers and would collide with agent slot pod names";
    parts.push(`toolbox names ${quoted(integers)} ${collide}`);
  }
  return parts.length > 0 ? parts.join("; ") : undefined;
}

/**
 * The Toolboxes step (once toolboxNameProblem found nothing): creates, replaces and deletes
 * toolbox pods; whether a pod was created or deleted.
 */
export async function ensureToolboxes(pass: SetPass): Promise<boolean> {
  const { cs, classified } = pass;
  let changed = false;
  const desired = new Set<string>();
  for (const tb of cs.spec.toolboxes ?? []) {
    desired.add(tb.name);
    const podName = toolboxPodName(cs.metadata.name ?? "", tb.name);
    const existing = classified.toolbox.get(tb.name);
    const sameName = classified.allByName.get(podName);
    if (sameName && sameName !== existing) reportNameClash(pass, `toolbox ${tb.name}`, sameName);
    else if (await (existing ? triageToolbox(pass, existing, tb) : createToolbox(pass, tb))) {
      changed = true;
    }
  }
  for (const name of [...classified.toolbox.keys()].sort()) {
    if (desired.has(name)) continue;
    const pod = classified.toolbox.get(name)!;
    if (await deletePod(pass, pod, `removed toolbox ${name}`)) {
      pass.log.info("deleted toolbox {pod} no longer in the spec", { pod: podRef(pod) });
      changed = true;
    }
  }
  return changed;
}

/** Creates one toolbox unless its shape is refused; whether it was created. */
async function createToolbox(pass: SetPass, tb: ToolboxSpec): Promise<boolean> {
  if (!await partBuildable(pass, tb.name)) return false;
  const pod = buildToolboxPod(pass.cs, tb);
  const intent = (await restoreIntent(pass)).has(pod.metadata.name ?? "");
  if (!await createPart(pass, pod, `toolbox ${tb.name}`, intent, pass.signal)) return false;
  pass.log.info("created toolbox {pod}", { pod: podRef(pod) });
  return true;
}

/** Deletes a failed or drifted toolbox for the next pass to recreate, if its shape is buildable. */
async function triageToolbox(pass: SetPass, pod: Pod, tb: ToolboxSpec): Promise<boolean> {
  const why = isPodFailed(pod)
    ? `failed (phase ${pod.status?.phase ?? ""}, lifecycle ${readLifecycleState(pod)})`
    : podSpecMatchesToolbox(pod, pass.cs, tb)
    ? ""
    : "drifted from the spec";
  if (why === "" || !await partBuildable(pass, tb.name)) return false;
  pass.log.info("toolbox {pod} {why}, deleting to recreate", { pod: podRef(pod), why });
  await deletePod(pass, pod, `toolbox ${tb.name} for recreate`);
  return true;
}
