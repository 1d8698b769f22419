/**
 * Who still needs a VM's registry tag (docs/cocoonset.md, "Snapshot safety"), and who in another
 * namespace derives the same VM name (a collision). Found through the cache's VM-name index;
 * read past the cache only right before a tag delete and at a VM-name decision.
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
import { compareCreation } from "../common/meta/creation_order.ts";
import { HIBERNATE_SNAPSHOT_TAG } from "../snapshot/registry.ts";
import { setToolboxNames, type VMNameIndex, vmNameLookupKeys } from "./vm_index.ts";

/** The object a tag is deleted (or a VM hibernated or woken) for. */
export type Actor =
  | {
    kind: "CocoonSet";
    namespace: string;
    name: string;
    uid?: string;
    /** Toolbox names of the set (spec and status): toolbox VMs are derived from them. */
    toolboxNames: readonly string[];
    /** A set of another namespace created later is no claimant. */
    creationTimestamp?: string;
  }
  | {
    kind: "CocoonHibernation";
    namespace: string;
    name: string;
    uid?: string;
    /** spec.podRef.name. */
    podName: string;
  };

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

/** Where claims are read from. */
export interface ClaimSources {
  /** Uncached reads: a stale cache could hide a claimant, or show one that is gone. */
  reader: Reader;
  index: VMNameIndex;
}

/** What the creation-order rule reads of a set. */
export interface SetAge {
  namespace: string;
  name: string;
  creationTimestamp?: string;
}

/**
 * Whether set a came before set b (common/meta/creation_order.ts): of two namespaces' sets
 * deriving one VM name, the second comer never creates a pod under it and holds nothing there.
 */
export function cameFirst(a: SetAge, b: SetAge): boolean {
  return compareCreation(a, b) < 0;
}

/**
 * What cs's own flow does with vmName that no request may cross ("" for nothing). A request
 * yields to it (hibernation/precedence.ts) and so holds no claim on the tag the flow drops at
 * its end: one rule for both, so neither waits for the other.
 */
export function setFlowOnVM(cs: CocoonSet, vmName: string): string {
  const main = extractAgentSlot(cs.metadata.namespace ?? "", cs.metadata.name ?? "", vmName) === 0;
  const phase = cs.status?.phase ?? "";
  if (cs.metadata.deletionTimestamp) return "is being deleted";
  if (phase === "Migrating") return "is migrating its main";
  if (phase === "Waking") return "is waking its released seat";
  if (main && (cs.metadata.annotations?.[ANNOTATION_HIBERNATED_ON_NODE] ?? "") !== "") {
    return "has released its seat";
  }
  return "";
}

const setPhasesHoldingTag = new Set<string>(["Suspending", "Suspended", "Waking"]);
const requestPhasesHoldingTag = new Set<string>(["Hibernating", "Hibernated", "Waking"]);

function podClaims(pod: Pod, tag: string): string[] {
  // vk-cocoon writes `:latest` when a pod of the VM goes: any pod of it keeps it.
  if (tag !== HIBERNATE_SNAPSHOT_TAG) return ["a pod of the VM exists"];
  const out: string[] = [];
  if (pod.metadata.deletionTimestamp) out.push("terminating (vk-cocoon may still push)");
  if (readHibernateState(pod)) out.push("asked to hibernate");
  if (readRestoreFromHibernate(pod) && !vmLive(pod)) out.push("restoring from the tag");
  return out;
}

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

function requestClaims(h: CocoonHibernation, tag: string): string[] {
  if (h.metadata.deletionTimestamp || tag !== HIBERNATE_SNAPSHOT_TAG) return [];
  const out: string[] = [];
  if (h.spec?.desire === "Hibernate") out.push("asks for hibernation");
  const phase = h.status?.phase ?? "";
  if (requestPhasesHoldingTag.has(phase)) out.push(`phase ${phase}`);
  return out;
}

/** A VM name's objects by namespace. */
type VMView = Map<string, { pods: Pod[]; sets: CocoonSet[]; requests: CocoonHibernation[] }>;

function viewOf(view: VMView, ns: string) {
  let v = view.get(ns);
  if (!v) view.set(ns, v = { pods: [], sets: [], requests: [] });
  return v;
}

/**
 * Whether pod runs vmName: its annotation names it, or it derives it and names no other VM. A
 * request's own target counts too: a request never owns the VM, it only asks.
 */
function podOfVM(pod: Pod, vmName: string): boolean {
  const named = parseVMSpec(pod).vmName;
  if (named === vmName) return true;
  const derived = vmNameForPod(pod.metadata.namespace ?? "", pod.metadata.name ?? "");
  return derived === vmName && named === "";
}

function setOfVM(cs: CocoonSet, vmName: string): boolean {
  const ns = cs.metadata.namespace ?? "";
  return setDerivesVMName(ns, cs.metadata.name ?? "", setToolboxNames(cs), vmName);
}

function requestOfVM(h: CocoonHibernation, vmName: string): boolean {
  return vmNameForPod(h.metadata.namespace ?? "", h.spec?.podRef?.name ?? "") === vmName ||
    (h.status?.vmName ?? "") === vmName;
}

/** Every cached object of any namespace that names vmName (no API request). */
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

function splitNamespaces(vmName: string): string[] {
  return [...new Set(vmNameSplits(vmName).map((s) => s.namespace))];
}

/**
 * Which namespaces to read past the cache: in each, the pod vmName derives there and the pods
 * named; for one read in full (`all`), every set and request too.
 */
class ReadPlan {
  readonly namespaces = new Map<string, { pods: Set<string>; all: boolean }>();

  view(view: VMView): this {
    for (const [ns, v] of view) this.full(ns, v.pods.map((p) => p.metadata.name ?? ""));
    return this;
  }

  full(ns: string, pods: readonly string[] = []): this {
    const read = this.namespaces.get(ns) ?? { pods: new Set<string>(), all: true };
    read.all = true;
    for (const p of pods) read.pods.add(p);
    this.namespaces.set(ns, read);
    return this;
  }

  podOnly(ns: string): this {
    if (!this.namespaces.has(ns)) this.namespaces.set(ns, { pods: new Set(), all: false });
    return this;
  }
}

async function getOrUndefined<T>(read: () => Promise<T>, what: string): Promise<T | undefined> {
  try {
    return await read();
  } catch (err) {
    // A namespace this operator may not read holds nothing it could act on either.
    if (isNotFound(err) || isForbidden(err)) return undefined;
    throw wrapError(what, err);
  }
}

/** The namespaces of plan read past the cache: a GET per pod, a LIST per kind in full ones. */
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

function isActor(actor: Actor | undefined, kind: Actor["kind"], ns: string, name: string) {
  return actor?.kind === kind && actor.namespace === ns && actor.name === name;
}

/**
 * Every claim view shows on `<vmName>:<tag>` except the actor's own, and every object of another
 * namespace deriving the same name as a claim with `collision`.
 */
function claimsIn(view: VMView, vmName: string, tag: string, actor: Actor | undefined): Claim[] {
  const claims: Claim[] = [];
  const add = (holder: ClaimHolder, ns: string, name: string, reasons: string[]) => {
    const collision = actor !== undefined && ns !== actor.namespace;
    if (collision && reasons.length === 0) reasons = ["derives the same VM name"];
    for (const reason of reasons) {
      claims.push({ holder, namespace: ns, name, reason, ...(collision ? { collision } : {}) });
    }
  };
  for (const [ns, { pods, sets, requests }] of view) {
    for (const pod of pods) add("Pod", ns, pod.metadata.name ?? "", podClaims(pod, tag));
    // A request of a namespace holding neither a pod of the VM nor a first comer set asks
    // about a VM that never ran there.
    let holds = pods.length > 0;
    // A request yielding to the acting set's own flow holds no claim on its tag.
    let actorFlow = "";
    for (const cs of sets) {
      const name = cs.metadata.name ?? "";
      if (isActor(actor, "CocoonSet", ns, name)) {
        actorFlow = setFlowOnVM(cs, vmName);
        continue;
      }
      if (actor?.kind === "CocoonSet" && ns !== actor.namespace) {
        const age = { namespace: ns, name, creationTimestamp: cs.metadata.creationTimestamp };
        if (cameFirst(actor, age)) continue;
      }
      holds = true;
      add("CocoonSet", ns, name, setClaims(cs, vmName, tag));
    }
    for (const h of requests) {
      const name = h.metadata.name ?? "";
      if (isActor(actor, "CocoonHibernation", ns, name)) continue;
      if (actor?.uid && h.metadata.uid === actor.uid) continue;
      if (h.metadata.deletionTimestamp || actorFlow !== "") continue;
      if (actor?.kind === "CocoonSet" && ns !== actor.namespace && !holds) continue;
      add("CocoonHibernation", ns, name, requestClaims(h, tag));
    }
  }
  return claims;
}

/**
 * Every claim on `<vmName>:<tag>` except the actor's own, read past the cache right before the
 * tag goes: the actor's namespace in full, so a claimant created a moment ago still stops the
 * delete; the namespaces the index names (or the cache does not hold) in full; elsewhere only
 * the pod the name derives, since pods no set owns are outside the cache. Sets and requests of
 * other namespaces come from the index: each passes a name check on it before it first acts.
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
 * The claims on `<vmName>:<tag>` the cache shows, except the actor's own. Enough to keep a tag
 * (a claim seen is a claim to wait for); never enough to drop one, which needs tagClaims.
 */
export async function cachedTagClaims(
  index: VMNameIndex,
  vmName: string,
  tag: string,
  actor: Actor | undefined,
  signal?: AbortSignal,
): Promise<Claim[]> {
  return claimsIn(await indexedView(index, vmName, signal), vmName, tag, actor);
}

/**
 * How far past the cache a collision check reads (docs/cocoonset.md, "Where the checks read"):
 * `poll` confirms only a collision the cache shows, `create` reads the namespaces the index
 * names, `act` also the pod the name derives in every other namespace.
 */
export type CollisionMoment = "poll" | "create" | "act";

/** The objects of other namespaces that derive vmName too, as collision claims. */
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
  if (plan.namespaces.size === 0) return [];
  const fresh = await freshView(sources.reader, vmName, plan, signal);
  return claimsIn(fresh, vmName, "latest", actor).filter((c) => c.collision);
}

/** "Pod ns/name (reason); CocoonSet ns/name (reason)": for logs and Events. */
export function describeClaims(claims: readonly Claim[]): string {
  return claims.map((c) => `${c.holder} ${c.namespace}/${c.name} (${c.reason})`).join("; ");
}
