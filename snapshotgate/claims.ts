/**
 * Steps 2 and 3 of the gate (docs/cocoonset.md, "Snapshot safety"): who still needs a VM's
 * registry tag — the claimant table, evaluated over fresh (uncached) reads — and who in another
 * namespace derives the same name (a collision, reported as a claim). A VM name `vk-<ns>-<rest>`
 * can have been built from several (namespace, rest) pairs (common/meta vmNameSplits), so every
 * one of them is searched: a claimant in a namespace the acting object does not own is a name
 * collision.
 *
 * @module
 */
import { isForbidden, isNotFound, Pods, wrapError } from "../kube/mod.ts";
import type { Pod, Reader } from "../kube/mod.ts";
import type { CocoonSet } from "../common/apis/v1/cocoonset_types.ts";
import type { CocoonHibernation } from "../common/apis/v1/cocoonhibernation_types.ts";
import { CocoonHibernations, CocoonSets } from "../common/apis/v1/resources.ts";
import {
  ANNOTATION_HIBERNATED_ON_NODE,
  extractAgentSlot,
  parseVMSpec,
  readHibernateState,
  readRestoreFromHibernate,
  setDerivesVMName,
  vmLive,
  vmNameForPod,
  vmNameSplits,
} from "../common/meta/mod.ts";
import { type Actor, isActor } from "./actor.ts";
import { cameFirst } from "./first_comer.ts";
import { setFlowOnVM } from "./set_flow.ts";
import { HIBERNATE_SNAPSHOT_TAG } from "../snapshot/registry.ts";

/** The kind of object that holds a claim on a tag. */
export type ClaimHolder = "Pod" | "CocoonSet" | "CocoonHibernation";

/** One reason a tag may not go now. */
export interface Claim {
  holder: ClaimHolder;
  namespace: string;
  name: string;
  /** Why this object needs the tag, in a few words. */
  reason: string;
  /** The holder lives in another namespace that derives the same VM name. */
  collision?: boolean;
}

/** Set phases in which the set's own flow still reads the VM's `:hibernate` tag. */
const setPhasesHoldingTag: ReadonlySet<string> = new Set(["Suspending", "Suspended", "Waking"]);
/** Request phases in which the request's VM state is, or is being restored from, the tag. */
const requestPhasesHoldingTag: ReadonlySet<string> = new Set([
  "Hibernating",
  "Hibernated",
  "Waking",
]);

/**
 * Whether cs, of another namespace than the acting set, came after it: it never created a pod
 * under the shared name (cocoonset/vm_collision.ts), so it holds nothing there.
 */
function secondComer(cs: CocoonSet, actor: Actor & { kind: "CocoonSet" }): boolean {
  const age = {
    namespace: cs.metadata.namespace ?? "",
    name: cs.metadata.name ?? "",
    creationTimestamp: cs.metadata.creationTimestamp,
  };
  return cameFirst(actor, age);
}

/** A pod's claims on vmName's tag (the pod already derives or names vmName). */
function podClaims(pod: Pod, tag: string): string[] {
  const out: string[] = [];
  if (tag !== HIBERNATE_SNAPSHOT_TAG) {
    // `:latest` is written by vk-cocoon when a pod of the VM goes: any pod of it needs it kept.
    out.push("a pod of the VM exists");
    return out;
  }
  if (pod.metadata.deletionTimestamp) out.push("terminating (vk-cocoon may still push)");
  if (readHibernateState(pod)) out.push("asked to hibernate");
  if (readRestoreFromHibernate(pod) && !vmLive(pod)) out.push("restoring from the tag");
  return out;
}

function setToolboxNames(cs: CocoonSet): string[] {
  return [
    ...(cs.spec?.toolboxes ?? []).map((t) => t.name),
    ...(cs.status?.toolboxes ?? []).map((t) => t.name),
  ].filter((n): n is string => typeof n === "string" && n !== "");
}

/** A set's claims on vmName's tag (the set derives vmName). */
function setClaims(cs: CocoonSet, vmName: string, tag: string): string[] {
  const out: string[] = [];
  if (cs.metadata.deletionTimestamp) out.push("being torn down (its teardown decides)");
  if (tag !== HIBERNATE_SNAPSHOT_TAG) {
    if (out.length === 0) out.push("owns the VM");
    return out;
  }
  const main = extractAgentSlot(cs.metadata.namespace ?? "", cs.metadata.name ?? "", vmName) === 0;
  const phase = cs.status?.phase ?? "";
  if (main && (cs.metadata.annotations?.[ANNOTATION_HIBERNATED_ON_NODE] ?? "") !== "") {
    out.push("released seat (node hint set)");
  }
  if (main && phase === "Migrating") out.push("migration in flight");
  if (cs.spec?.suspend) out.push("suspended");
  if (setPhasesHoldingTag.has(phase)) out.push(`phase ${phase}`);
  return out;
}

/** A request's claims on vmName's tag (the request targets or recorded vmName). */
function requestClaims(h: CocoonHibernation, tag: string): string[] {
  if (h.metadata.deletionTimestamp || tag !== HIBERNATE_SNAPSHOT_TAG) return [];
  const out: string[] = [];
  if (h.spec?.desire === "Hibernate") out.push("asks for hibernation");
  const phase = h.status?.phase ?? "";
  if (requestPhasesHoldingTag.has(phase)) out.push(`phase ${phase}`);
  return out;
}

async function getOrUndefined<T>(read: () => Promise<T>, what: string): Promise<T | undefined> {
  try {
    return await read();
  } catch (err) {
    // Forbidden: a namespace this operator may not read holds nothing it could act on either.
    if (isNotFound(err) || isForbidden(err)) return undefined;
    throw wrapError(what, err);
  }
}

/** The pods of ns named like the VM (one per way the name splits there) that run it or none. */
async function podsOfVM(
  reader: Reader,
  ns: string,
  rests: readonly string[],
  vmName: string,
  signal?: AbortSignal,
): Promise<{ name: string; pod: Pod }[]> {
  const out: { name: string; pod: Pod }[] = [];
  for (const rest of rests) {
    const pod = await getOrUndefined(
      () => reader.get(Pods, ns, rest, { signal }),
      `read pod ${ns}/${rest} for ${vmName}`,
    );
    // The request's own target counts too: a request never owns the VM, it only asks.
    // A pod that names another VM (vk-cocoon wrote it) runs that VM, not this one.
    const names = pod ? parseVMSpec(pod).vmName : "";
    if (pod && (names === "" || names === vmName)) out.push({ name: rest, pod });
  }
  return out;
}

/** The CocoonSets of ns that derive the VM name. */
async function setsDerivingVM(
  reader: Reader,
  ns: string,
  vmName: string,
  signal?: AbortSignal,
): Promise<CocoonSet[]> {
  const sets = await getOrUndefined(
    () => reader.list(CocoonSets, { namespace: ns, signal }),
    `list cocoonsets in ${ns} for ${vmName}`,
  );
  return (sets?.items ?? []).filter((cs) =>
    setDerivesVMName(ns, cs.metadata.name ?? "", setToolboxNames(cs), vmName)
  );
}

/** The CocoonHibernations of ns that target the VM (by pod reference or recorded VM name). */
async function requestsOnVM(
  reader: Reader,
  ns: string,
  vmName: string,
  signal?: AbortSignal,
): Promise<CocoonHibernation[]> {
  const requests = await getOrUndefined(
    () => reader.list(CocoonHibernations, { namespace: ns, signal }),
    `list cocoonhibernations in ${ns} for ${vmName}`,
  );
  return (requests?.items ?? []).filter((h) =>
    vmNameForPod(ns, h.spec?.podRef?.name ?? "") === vmName || (h.status?.vmName ?? "") === vmName
  );
}

/**
 * Every claim on `<vmName>:<tag>` except the actor's own, read past the cache. Also reports, as
 * a claim with `collision`, any object in another namespace that derives the same VM name.
 */
export async function tagClaims(
  reader: Reader,
  vmName: string,
  tag: string,
  actor: Actor | undefined,
  signal?: AbortSignal,
): Promise<Claim[]> {
  const claims: Claim[] = [];
  const add = (holder: ClaimHolder, ns: string, name: string, reasons: string[]) => {
    const collision = actor !== undefined && ns !== actor.namespace;
    if (collision) reasons = reasons.length > 0 ? reasons : ["derives the same VM name"];
    for (const reason of reasons) {
      claims.push({ holder, namespace: ns, name, reason, ...(collision ? { collision } : {}) });
    }
  };
  const namespaces = new Map<string, string[]>();
  for (const { namespace, rest } of vmNameSplits(vmName)) {
    namespaces.set(namespace, [...(namespaces.get(namespace) ?? []), rest]);
  }
  for (const [ns, rests] of namespaces) {
    signal?.throwIfAborted();
    // Whether this namespace holds the name at all: a pod of it, or a set that is no second
    // comer. A request there whose namespace holds nothing asks about a VM that never ran.
    const pods = await podsOfVM(reader, ns, rests, vmName, signal);
    for (const { name, pod } of pods) add("Pod", ns, name, podClaims(pod, tag));
    let holds = pods.length > 0;
    // The acting set's own flow on the VM, read here as fresh as every claim: a request that
    // yields to that flow does not hold its tag (set_flow.ts).
    let actorFlow = "";
    for (const cs of await setsDerivingVM(reader, ns, vmName, signal)) {
      const name = cs.metadata.name ?? "";
      if (isActor(actor, "CocoonSet", ns, name)) {
        actorFlow = setFlowOnVM(cs, vmName);
        continue;
      }
      if (actor?.kind === "CocoonSet" && ns !== actor.namespace && secondComer(cs, actor)) continue;
      holds = true;
      add("CocoonSet", ns, name, setClaims(cs, vmName, tag));
    }
    for (const h of await requestsOnVM(reader, ns, vmName, signal)) {
      const name = h.metadata.name ?? "";
      if (isActor(actor, "CocoonHibernation", ns, name)) continue;
      if (actor?.uid && h.metadata.uid === actor.uid) continue;
      // Only a live request of another namespace is a collision; a deleted one claims nothing.
      if (h.metadata.deletionTimestamp) continue;
      if (actorFlow !== "") continue;
      if (actor?.kind === "CocoonSet" && ns !== actor.namespace && !holds) continue;
      add("CocoonHibernation", ns, name, requestClaims(h, tag));
    }
  }
  return claims;
}

/** "Pod ns/name (reason); CocoonSet ns/name (reason)": for logs and Events. */
export function describeClaims(claims: readonly Claim[]): string {
  return claims.map((c) => `${c.holder} ${c.namespace}/${c.name} (${c.reason})`).join("; ");
}
