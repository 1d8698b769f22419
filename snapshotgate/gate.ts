/**
 * The one gate every registry tag delete of both reconcilers goes through. A tag goes only when
 * the acting object derives the VM name from its own namespace and names (never from an editable
 * annotation alone), no other namespace derives it, and no claimant still needs the tag
 * (claims.ts). A refusal is returned, never thrown: the caller leaves the tag to the claimants,
 * whose own flow ends with this gate too.
 *
 * @module
 */
import { setDerivesVMName, vmNameForPod } from "../common/meta/mod.ts";
import type { Registry } from "../snapshot/registry.ts";
import {
  type Actor,
  type Claim,
  type ClaimSources,
  collisionClaims,
  describeClaims,
  tagClaims,
} from "./claims.ts";

/** Why a delete was refused: the actor cannot derive the name, or someone still needs the tag. */
export type RefusalKind = "not-derived" | "collision" | "claimed";

/** The gate's answer. */
export type Verdict =
  | { allowed: true }
  | { allowed: false; kind: RefusalKind; claims: Claim[]; message: string };

/** What the gate reads through and deletes with. */
export interface GateDeps extends ClaimSources {
  registry: Registry;
}

/**
 * Whether the actor derives vmName from its own namespace and names: a set its agent slots and
 * toolboxes, a request `vk-<ns>-<podRef.name>`.
 */
export function actorDerives(actor: Actor, vmName: string): boolean {
  if (actor.kind === "CocoonSet") {
    return setDerivesVMName(actor.namespace, actor.name, actor.toolboxNames, vmName);
  }
  return vmName === vmNameForPod(actor.namespace, actor.podName);
}

function actorRef(actor: Actor): string {
  return `${actor.kind} ${actor.namespace}/${actor.name}`;
}

function notDerived(actor: Actor, vmName: string, outcome: string): Verdict & { allowed: false } {
  const message = `${actorRef(actor)} cannot derive VM name ${vmName} from its own namespace ` +
    `and names: ${outcome}`;
  return { allowed: false, kind: "not-derived", claims: [], message };
}

function collision(
  actor: Actor,
  vmName: string,
  claims: Claim[],
  outcome: string,
): Verdict & { allowed: false } {
  const message = `VM name ${vmName} is shared by ${actorRef(actor)} and ` +
    `${describeClaims(claims.filter((c) => c.collision))}: ${outcome}`;
  return { allowed: false, kind: "collision", claims, message };
}

/** Answers whether `<vmName>:<tag>` may be deleted now on behalf of actor. */
export async function mayDeleteTag(
  sources: ClaimSources,
  actor: Actor,
  vmName: string,
  tag: string,
  signal?: AbortSignal,
): Promise<Verdict> {
  const outcome = `${vmName}:${tag} is not deleted`;
  if (!actorDerives(actor, vmName)) return notDerived(actor, vmName, outcome);
  const claims = await tagClaims(sources, vmName, tag, actor, signal);
  if (claims.length === 0) return { allowed: true };
  if (claims.some((c) => c.collision)) return collision(actor, vmName, claims, outcome);
  const message = `${vmName}:${tag} is still needed by ${describeClaims(claims)}`;
  return { allowed: false, kind: "claimed", claims, message };
}

/** Deletes `<vmName>:<tag>` when the gate allows it. Registry errors propagate. */
export async function deleteTagIfAllowed(
  deps: GateDeps,
  actor: Actor,
  vmName: string,
  tag: string,
  signal?: AbortSignal,
): Promise<Verdict> {
  const verdict = await mayDeleteTag(deps, actor, vmName, tag, signal);
  if (verdict.allowed) await deps.registry.deleteManifest(vmName, tag, signal);
  return verdict;
}

/**
 * The refusal of actor hibernating or waking vmName, or undefined when it may: it must derive
 * the name and no other namespace may derive it. `decision`: the first action under the name,
 * read past the cache (claims.ts `act`); otherwise the cache decides (`poll`).
 */
export async function actingRefusal(
  sources: ClaimSources,
  actor: Actor,
  vmName: string,
  decision: boolean,
  signal?: AbortSignal,
): Promise<Verdict & { allowed: false } | undefined> {
  const outcome = "it is not hibernated or woken through it";
  if (!actorDerives(actor, vmName)) return notDerived(actor, vmName, outcome);
  const moment = decision ? "act" : "poll";
  const collisions = await collisionClaims(sources, vmName, actor, moment, signal);
  return collisions.length === 0 ? undefined : collision(actor, vmName, collisions, outcome);
}
