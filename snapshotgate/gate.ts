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
import type { Reader } from "../kube/mod.ts";
import type { Registry } from "../snapshot/registry.ts";
import { type Actor, actorDerives, actorRef } from "./actor.ts";
import { type Claim, describeClaims, tagClaims } from "./claims.ts";

/** Why a delete was refused: the actor cannot derive the name, or someone still needs the tag. */
export type RefusalKind = "not-derived" | "collision" | "claimed";

/** The gate's answer. */
export type Verdict =
  | { allowed: true }
  | { allowed: false; kind: RefusalKind; claims: Claim[]; message: string };

/** What the gate reads through and deletes with. */
export interface GateDeps {
  /** Uncached reads: a stale cache could hide a claimant. */
  reader: Reader;
  registry: Registry;
}

/** Answers whether `<vmName>:<tag>` may be deleted now on behalf of actor. */
export async function mayDeleteTag(
  reader: Reader,
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
  const claims = await tagClaims(reader, vmName, tag, actor, signal);
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
  const verdict = await mayDeleteTag(deps.reader, actor, vmName, tag, signal);
  if (verdict.allowed) await deps.registry.deleteManifest(vmName, tag, signal);
  return verdict;
}

/**
 * Whether actor may hibernate or wake vmName: the actor derives it and no object of another
 * namespace derives the same name. undefined when allowed; else the refusal.
 */
export async function actingRefusal(
  reader: Reader,
  actor: Actor,
  vmName: string,
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
  // The claims of the `latest` tag are "anything that derives the name": what a collision needs.
  const collisions = (await tagClaims(reader, vmName, "latest", actor, signal)).filter((c) =>
    c.collision
  );
  if (collisions.length === 0) return undefined;
  return {
    allowed: false,
    kind: "collision",
    claims: collisions,
    message: `VM name ${vmName} is shared by ${actorRef(actor)} and ` +
      `${describeClaims(collisions)}: it is not hibernated or woken through it`,
  };
}
