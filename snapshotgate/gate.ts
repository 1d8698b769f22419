/**
 * The one gate every registry tag delete of both reconcilers goes through: "may this tag of this
 * VM be deleted now, on behalf of this object?". Allowed only when the acting object derives the
 * VM name from its own namespace and names (never from an editable annotation alone: actor.ts),
 * no other namespace derives the same name, and no claimant still needs the tag (both claims.ts).
 *
 * A refusal is returned, never thrown: each caller logs it with the claimants and hands the tag
 * to them (their own flow drops it once done) or looks again on its next pass.
 *
 * @module
 */
import type { Registry } from "../snapshot/registry.ts";
import { type Actor, actorDerives, actorRef } from "./actor.ts";
import {
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

/**
 * What the gate reads through and deletes with: uncached reads (a stale cache could hide a
 * claimant) and the cache's VM-name index (which namespaces to read), and the registry.
 */
export interface GateDeps extends ClaimSources {
  registry: Registry;
}

/** Answers whether `<vmName>:<tag>` may be deleted now on behalf of actor. */
export async function mayDeleteTag(
  sources: ClaimSources,
  actor: Actor,
  vmName: string,
  tag: string,
  signal?: AbortSignal,
): Promise<Verdict> {
  if (!actorDerives(actor, vmName)) {
    return {
      allowed: false,
      kind: "not-derived",
      claims: [],
      message: `${actorRef(actor)} cannot derive VM name ${vmName} from its own namespace and ` +
        `names: ${vmName}:${tag} is not deleted`,
    };
  }
  const claims = await tagClaims(sources, vmName, tag, actor, signal);
  if (claims.length === 0) return { allowed: true };
  const collisions = claims.filter((c) => c.collision);
  if (collisions.length > 0) {
    return {
      allowed: false,
      kind: "collision",
      claims,
      message: `VM name ${vmName} is shared by ${actorRef(actor)} and ` +
        `${describeClaims(collisions)}: ${vmName}:${tag} is not deleted`,
    };
  }
  return {
    allowed: false,
    kind: "claimed",
    claims,
    message: `${vmName}:${tag} is still needed by ${describeClaims(claims)}`,
  };
}

/**
 * Deletes `<vmName>:<tag>` when the gate allows it; the verdict says what happened. Registry
 * errors propagate (the caller decides whether they hold its flow).
 */
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
 * Whether actor may hibernate or wake vmName: the actor derives it and no object of another
 * namespace derives the same name. undefined when allowed; else the refusal. `decision`: the
 * actor is about to act on the VM under the name for the first time (a request recording it, a
 * set asking a pod to hibernate), so the other namespaces are read past the cache (the `act`
 * moment of claims.ts CollisionMoment); otherwise a pass that already acts under the name is
 * answered from the cache unless it shows a collision (`poll`).
 */
export async function actingRefusal(
  sources: ClaimSources,
  actor: Actor,
  vmName: string,
  decision: boolean,
  signal?: AbortSignal,
): Promise<Verdict & { allowed: false } | undefined> {
  if (!actorDerives(actor, vmName)) {
    return {
      allowed: false,
      kind: "not-derived",
      claims: [],
      message: `${actorRef(actor)} cannot derive VM name ${vmName} from its own namespace and ` +
        `names: it is not hibernated or woken through it`,
    };
  }
  const moment = decision ? "act" : "poll";
  const collisions = await collisionClaims(sources, vmName, actor, moment, signal);
  if (collisions.length === 0) return undefined;
  return {
    allowed: false,
    kind: "collision",
    claims: collisions,
    message: `VM name ${vmName} is shared by ${actorRef(actor)} and ` +
      `${describeClaims(collisions)}: it is not hibernated or woken through it`,
  };
}
