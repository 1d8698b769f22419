/**
 * Event handlers (controller-runtime pkg/handler): how an event on a watched object becomes
 * reconcile requests.
 *
 * @module
 */
import { controllerOf, type KubeObject, type OwnerReference } from "./object.ts";
import type { Request } from "./reconcile.ts";

/**
 * Maps informer events to reconcile requests (controller-runtime pkg/handler). The controller
 * filters events through predicates first, then enqueues whatever the handler returns; the
 * queue collapses duplicates. A missing method maps the event to nothing.
 */
export interface Handler<T extends KubeObject = KubeObject> {
  /** Requests for a created object; isInInitialList marks the informer's first list. */
  create?(obj: T, isInInitialList: boolean): Request[];
  /** Requests for an object that changed from oldObj to newObj. */
  update?(oldObj: T, newObj: T): Request[];
  /** Requests for a deleted object (its last known state). */
  delete?(obj: T): Request[];
  /** Requests for an event from a non-informer source. */
  generic?(obj: T): Request[];
}

/** The request for the object itself. */
function requestFor(obj: KubeObject): Request {
  return { namespace: obj.metadata.namespace ?? "", name: obj.metadata.name ?? "" };
}

/**
 * Enqueues the object that changed (EnqueueRequestForObject); the handler For() uses. On
 * update the new object's key is used (old and new share it).
 */
export function enqueueForObject<T extends KubeObject>(): Required<Handler<T>> {
  return {
    create: (obj) => [requestFor(obj)],
    update: (_oldObj, newObj) => [requestFor(newObj)],
    delete: (obj) => [requestFor(obj)],
    generic: (obj) => [requestFor(obj)],
  };
}

/**
 * Calls fn on the object of each event and enqueues the requests it returns
 * (EnqueueRequestsFromMapFunc). On update both the old and the new object are mapped, so a
 * change that moves an object away from a target still wakes the old target.
 */
export function enqueueFromMap<T extends KubeObject>(
  fn: (obj: T) => Request[],
): Required<Handler<T>> {
  return {
    create: (obj) => fn(obj),
    update: (oldObj, newObj) => dedupe([...fn(oldObj), ...fn(newObj)]),
    delete: (obj) => fn(obj),
    generic: (obj) => fn(obj),
  };
}

/** The owner kind an owner-mapping handler looks for. A ResourceType fits this shape. */
export interface OwnerType {
  /** Kind of the owner ("CocoonSet"). */
  kind: string;
  /** API group of the owner; "" or absent for the core group. */
  group?: string;
  /** Whether the owner is namespaced (then it lives in the owned object's namespace). */
  namespaced?: boolean;
}

/** Options of {@link enqueueForOwner}. */
export interface OwnerOptions {
  /**
   * Only follow the controller reference (`controller: true`), as Owns() does by default
   * (OnlyControllerOwner). false follows every owner reference of the right kind.
   */
  onlyController?: boolean;
}

/**
 * Enqueues the owner of the object (EnqueueRequestForOwner): owner references whose kind and
 * API group match `owner` map to the owner's key. On update the owners of both the old and
 * the new object are enqueued, so an owner losing a child hears about it too.
 */
export function enqueueForOwner<T extends KubeObject>(
  owner: OwnerType,
  opts?: OwnerOptions,
): Required<Handler<T>>;
/** As above, with the owner named by kind and API group ("" = core). */
export function enqueueForOwner<T extends KubeObject>(
  ownerKind: string,
  ownerGroup?: string,
  opts?: OwnerOptions,
): Required<Handler<T>>;
export function enqueueForOwner<T extends KubeObject>(
  owner: OwnerType | string,
  groupOrOpts?: string | OwnerOptions,
  maybeOpts?: OwnerOptions,
): Required<Handler<T>> {
  const type: OwnerType = typeof owner === "string"
    ? { kind: owner, group: typeof groupOrOpts === "string" ? groupOrOpts : "" }
    : owner;
  const opts = (typeof groupOrOpts === "string" ? maybeOpts : groupOrOpts) ?? {};
  const onlyController = opts.onlyController ?? true;
  const group = type.group ?? "";
  const namespaced = type.namespaced ?? true;

  const ownersOf = (obj: KubeObject): Request[] => {
    const all = obj.metadata.ownerReferences ?? [];
    // The API server allows at most one controller reference; like GetControllerOf, only the
    // first one counts.
    const controller = controllerOf(obj);
    const refs = onlyController ? (controller ? [controller] : []) : all;
    const out: Request[] = [];
    for (const ref of refs) {
      if (ref.kind !== type.kind || groupOf(ref) !== group) continue;
      out.push({ namespace: namespaced ? obj.metadata.namespace ?? "" : "", name: ref.name });
    }
    return out;
  };
  return {
    create: (obj) => dedupe(ownersOf(obj)),
    update: (oldObj, newObj) => dedupe([...ownersOf(oldObj), ...ownersOf(newObj)]),
    delete: (obj) => dedupe(ownersOf(obj)),
    generic: (obj) => dedupe(ownersOf(obj)),
  };
}

/** The API group of an owner reference: "apps/v1" → "apps", "v1" → "". */
function groupOf(ref: OwnerReference): string {
  const slash = ref.apiVersion.indexOf("/");
  return slash < 0 ? "" : ref.apiVersion.slice(0, slash);
}

function dedupe(reqs: Request[]): Request[] {
  if (reqs.length < 2) return reqs;
  const seen = new Set<string>();
  return reqs.filter((r) => {
    const k = `${r.namespace}/${r.name}`;
    if (seen.has(k)) return false;
    seen.add(k);
    return true;
  });
}
