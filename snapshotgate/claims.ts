/**
 * Steps 2 and 3 of the gate (docs/cocoonset.md, "Snapshot safety"): who still needs a VM's
 * registry tag — the claimant table — and who in another namespace derives the same name (a
 * collision, reported as a claim). A VM name `vk-<ns>-<rest>` can have been built from several
 * (namespace, rest) pairs (common/meta vmNameSplits); the objects of every namespace that name
 * it are found through the cache's VM-name index (vm_index.ts), never by reading each namespace
 * the name could be split into. Past the cache, only at the moment that needs it: right before a
 * tag delete (tagClaims) and at a VM-name decision (collisionClaims).
 *
 * @module
 */
import { isForbidden, isNotFound, Pods, wrapError } from "../kube/mod.ts";
import type { KubeObject, Pod, Reader } from "../kube/mod.ts";
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
import { setToolboxNames, type VMNameIndex, vmNameLookupKeys } from "./vm_index.ts";

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
 * under the shared name (cocoonset/create.ts), so it holds nothing there.
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

/** Where claims are read from. */
export interface ClaimSources {
  /**
   * Uncached reads: the state a tag delete or a VM-name decision is made on (a stale cache could
   * hide a claimant, or show one that is gone).
   */
  reader: Reader;
  /** The cache's VM-name index: which objects of any namespace name the VM (vm_index.ts). */
  index: VMNameIndex;
}

/** What one namespace shows about a VM name: its pods, sets and requests that name it. */
interface NamespaceView {
  pods: Pod[];
  sets: CocoonSet[];
  requests: CocoonHibernation[];
}

/** A VM name's objects by namespace. */
type VMView = Map<string, NamespaceView>;

function viewOf(view: VMView, ns: string): NamespaceView {
  let v = view.get(ns);
  if (!v) view.set(ns, v = { pods: [], sets: [], requests: [] });
  return v;
}

/**
 * Whether pod runs vmName: it derives the name and names no other VM (vk-cocoon wrote the
 * annotation), or its annotation names vmName. A request's own target counts too: a request
 * never owns the VM, it only asks.
 */
function podOfVM(pod: Pod, vmName: string): boolean {
  const named = parseVMSpec(pod).vmName;
  if (named === vmName) return true;
  const derived = vmNameForPod(pod.metadata.namespace ?? "", pod.metadata.name ?? "");
  return derived === vmName && named === "";
}

/** Whether cs derives vmName from its namespace, name and toolboxes. */
function setOfVM(cs: CocoonSet, vmName: string): boolean {
  return setDerivesVMName(
    cs.metadata.namespace ?? "",
    cs.metadata.name ?? "",
    setToolboxNames(cs),
    vmName,
  );
}

/** Whether h targets vmName, by pod reference or by the VM name its status recorded. */
function requestOfVM(h: CocoonHibernation, vmName: string): boolean {
  return vmNameForPod(h.metadata.namespace ?? "", h.spec?.podRef?.name ?? "") === vmName ||
    (h.status?.vmName ?? "") === vmName;
}

/** Every cached object of any namespace that names vmName, by namespace (no API request). */
async function indexedView(index: VMNameIndex, vmName: string, signal?: AbortSignal) {
  const view: VMView = new Map();
  const seen = new Set<string>();
  const once = (o: KubeObject, kind: string) => {
    const key = `${kind} ${o.metadata.namespace}/${o.metadata.name}`;
    if (seen.has(key)) return false;
    seen.add(key);
    return true;
  };
  for (const key of vmNameLookupKeys(vmName)) {
    for (const pod of await index.lookup(Pods, key, signal)) {
      if (podOfVM(pod, vmName) && once(pod, "Pod")) {
        viewOf(view, pod.metadata.namespace ?? "").pods.push(pod);
      }
    }
    for (const cs of await index.lookup(CocoonSets, key, signal)) {
      if (setOfVM(cs, vmName) && once(cs, "CocoonSet")) {
        viewOf(view, cs.metadata.namespace ?? "").sets.push(cs);
      }
    }
    for (const h of await index.lookup(CocoonHibernations, key, signal)) {
      if (requestOfVM(h, vmName) && once(h, "CocoonHibernation")) {
        viewOf(view, h.metadata.namespace ?? "").requests.push(h);
      }
    }
  }
  return view;
}

/** The namespaces vmName could have been built from (common/meta vmNameSplits). */
function splitNamespaces(vmName: string): string[] {
  return [...new Set(vmNameSplits(vmName).map((s) => s.namespace))];
}

/** What to read of one namespace past the cache. */
interface NamespaceRead {
  /** Pods to GET besides the one vmName derives there (those the index named). */
  pods: Set<string>;
  /** Also LIST its CocoonSets and CocoonHibernations; false: only its pods. */
  all: boolean;
}

/** Which namespaces to read past the cache, and how much of each. */
class ReadPlan {
  readonly namespaces = new Map<string, NamespaceRead>();

  /** Every namespace of view, in full, with the pods the view holds there. */
  view(view: VMView): this {
    for (const [ns, v] of view) this.full(ns, v.pods.map((p) => p.metadata.name ?? ""));
    return this;
  }

  /** ns in full: the pods, every set and every request. */
  full(ns: string, pods: readonly string[] = []): this {
    const read = this.namespaces.get(ns) ?? { pods: new Set<string>(), all: true };
    read.all = true;
    for (const p of pods) read.pods.add(p);
    this.namespaces.set(ns, read);
    return this;
  }

  /** Only the pod vmName derives in ns (kept when ns is read in full anyway). */
  podOnly(ns: string): this {
    if (!this.namespaces.has(ns)) this.namespaces.set(ns, { pods: new Set(), all: false });
    return this;
  }

  get empty(): boolean {
    return this.namespaces.size === 0;
  }
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

/**
 * The namespaces of plan, past the cache: in each, the pod the VM name derives there and the
 * pods the index named there (a GET each) and, for a namespace read in full, every CocoonSet and
 * CocoonHibernation (one LIST each), kept when they name vmName.
 */
async function freshView(
  reader: Reader,
  vmName: string,
  plan: ReadPlan,
  signal?: AbortSignal,
): Promise<VMView> {
  const view: VMView = new Map();
  for (const [ns, read] of plan.namespaces) {
    signal?.throwIfAborted();
    const v = viewOf(view, ns);
    const prefix = `vk-${ns}-`;
    const podNames = new Set(read.pods);
    if (vmName.startsWith(prefix) && vmName.length > prefix.length) {
      podNames.add(vmName.slice(prefix.length));
    }
    for (const name of podNames) {
      const pod = await getOrUndefined(
        () => reader.get(Pods, ns, name, { signal }),
        `read pod ${ns}/${name} for ${vmName}`,
      );
      if (pod && podOfVM(pod, vmName)) v.pods.push(pod);
    }
    if (!read.all) continue;
    const sets = await getOrUndefined(
      () => reader.list(CocoonSets, { namespace: ns, signal }),
      `list cocoonsets in ${ns} for ${vmName}`,
    );
    v.sets.push(...(sets?.items ?? []).filter((cs) => setOfVM(cs, vmName)));
    const requests = await getOrUndefined(
      () => reader.list(CocoonHibernations, { namespace: ns, signal }),
      `list cocoonhibernations in ${ns} for ${vmName}`,
    );
    v.requests.push(...(requests?.items ?? []).filter((h) => requestOfVM(h, vmName)));
  }
  return view;
}

/**
 * Every claim view shows on `<vmName>:<tag>` except the actor's own, and, as a claim with
 * `collision`, every object of another namespace that derives the same VM name.
 */
function claimsIn(view: VMView, vmName: string, tag: string, actor: Actor | undefined): Claim[] {
  const claims: Claim[] = [];
  const add = (holder: ClaimHolder, ns: string, name: string, reasons: string[]) => {
    const collision = actor !== undefined && ns !== actor.namespace;
    if (collision) reasons = reasons.length > 0 ? reasons : ["derives the same VM name"];
    for (const reason of reasons) {
      claims.push({ holder, namespace: ns, name, reason, ...(collision ? { collision } : {}) });
    }
  };
  for (const [ns, { pods, sets, requests }] of view) {
    // Whether this namespace holds the name at all: a pod of it, or a set that is no second
    // comer. A request there whose namespace holds nothing asks about a VM that never ran.
    for (const pod of pods) add("Pod", ns, pod.metadata.name ?? "", podClaims(pod, tag));
    let holds = pods.length > 0;
    // The acting set's own flow on the VM, read as fresh as every claim: a request that yields
    // to that flow does not hold its tag (set_flow.ts).
    let actorFlow = "";
    for (const cs of sets) {
      const name = cs.metadata.name ?? "";
      if (isActor(actor, "CocoonSet", ns, name)) {
        actorFlow = setFlowOnVM(cs, vmName);
        continue;
      }
      if (actor?.kind === "CocoonSet" && ns !== actor.namespace && secondComer(cs, actor)) continue;
      holds = true;
      add("CocoonSet", ns, name, setClaims(cs, vmName, tag));
    }
    for (const h of requests) {
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

/**
 * Every claim on `<vmName>:<tag>` except the actor's own, read past the cache right before the
 * tag goes. Also reports, as a claim with `collision`, any object in another namespace that
 * derives the same VM name.
 *
 * Read past the cache: the actor's own namespace in full (the pod the name derives there, every
 * set and every request), so a claimant created a moment ago, which the cache may not show yet,
 * still stops the delete; every other namespace the cache's VM-name index names, or the cache
 * does not hold, in full, so what the delete is decided on is current there too; and in the
 * remaining namespaces the name could be split into, only the pod it derives there (a pod no
 * CocoonSet owns lies outside the pod cache, and its VM's tags live in the same repository).
 * Their sets and requests are not listed: every set and request is in the cache, and the check
 * each of them passes before it first acts under a VM name reads the same index, in which the
 * actor already stands, so one too new for the cache has not acted under the name yet and is
 * refused it on its first pass (actingRefusal, cocoonset/create.ts).
 */
export async function tagClaims(
  sources: ClaimSources,
  vmName: string,
  tag: string,
  actor: Actor | undefined,
  signal?: AbortSignal,
): Promise<Claim[]> {
  const plan = new ReadPlan().view(await indexedView(sources.index, vmName, signal));
  for (const ns of splitNamespaces(vmName)) {
    if (!sources.index.holds(ns)) plan.full(ns);
    else plan.podOnly(ns);
  }
  if (actor) plan.full(actor.namespace);
  const fresh = await freshView(sources.reader, vmName, plan, signal);
  return claimsIn(fresh, vmName, tag, actor);
}

/**
 * When a collision check is made, which decides how far past the cache it reads:
 *
 * - `poll`: a pass of an actor already acting under the name. The cache's index decides; the
 *   namespaces it names are read past the cache only to confirm a collision it shows (a refusal
 *   is never made on a stale copy).
 * - `create`: a pod is about to be created under the name. The namespaces the index names are
 *   read past the cache.
 * - `act`: the actor is about to act on the VM under the name for the first time (a request
 *   recording it, a set asking the pod to hibernate, whose push lands in the shared repository).
 *   As `create`, and the pod the name derives in each other namespace it could be split into is
 *   read too: a pod no CocoonSet owns lies outside the pod cache and its index.
 *
 * A namespace the cache does not hold is read past it at every moment.
 */
export type CollisionMoment = "poll" | "create" | "act";

/**
 * The objects of other namespaces than the actor's that derive vmName too, as collision claims,
 * read as `moment` says (CollisionMoment). When the index names no other namespace, a `poll` or
 * a `create` costs no API request.
 */
export async function collisionClaims(
  sources: ClaimSources,
  vmName: string,
  actor: Actor,
  moment: CollisionMoment,
  signal?: AbortSignal,
): Promise<Claim[]> {
  const indexed = await indexedView(sources.index, vmName, signal);
  indexed.delete(actor.namespace);
  const others = splitNamespaces(vmName).filter((ns) => ns !== actor.namespace);
  const unheld = others.filter((ns) => !sources.index.holds(ns));
  if (moment === "poll" && unheld.length === 0) {
    const cached = claimsIn(indexed, vmName, "latest", actor).filter((c) => c.collision);
    if (cached.length === 0) return [];
  }
  const plan = new ReadPlan().view(indexed);
  for (const ns of unheld) plan.full(ns);
  if (moment === "act") { for (const ns of others) plan.podOnly(ns); }
  if (plan.empty) return [];
  const fresh = await freshView(sources.reader, vmName, plan, signal);
  return claimsIn(fresh, vmName, "latest", actor).filter((c) => c.collision);
}

/** "Pod ns/name (reason); CocoonSet ns/name (reason)": for logs and Events. */
export function describeClaims(claims: readonly Claim[]): string {
  return claims.map((c) => `${c.holder} ${c.namespace}/${c.name} (${c.reason})`).join("; ");
}
