/**
 * Plain-JSON Kubernetes object shapes. The runtime keeps objects exactly as the API server
 * sends them (timestamps stay RFC 3339 strings) so they can be compared, patched and cached
 * without a serializer in between.
 *
 * @module
 */

/** An owner reference as stored in metadata.ownerReferences. */
export interface OwnerReference {
  /** API version of the owner ("cocoonset.cocoonstack.io/v1"). */
  apiVersion: string;
  /** Kind of the owner. */
  kind: string;
  /** Name of the owner (same namespace as the owned object). */
  name: string;
  /** UID of the owner: a recreated owner with the same name is a different owner. */
  uid: string;
  /** True on the one reference that names the managing controller. */
  controller?: boolean;
  /** The owner cannot be foreground-deleted before this object is gone. */
  blockOwnerDeletion?: boolean;
}

/** Standard object metadata (the fields the runtime and the reconcilers use). */
export interface ObjectMeta {
  /** Unique within the namespace and kind. */
  name?: string;
  /** Prefix the server completes into a unique name when name is absent. */
  generateName?: string;
  /** Absent for cluster-scoped objects. */
  namespace?: string;
  /** Set by the server; tells apart objects that reuse a name. */
  uid?: string;
  /** Opaque version for optimistic concurrency; a stale one in a write yields Conflict. */
  resourceVersion?: string;
  /** Bumped by the server on spec changes (kinds with a status subresource). */
  generation?: number;
  /** RFC 3339, set by the server. */
  creationTimestamp?: string;
  /** RFC 3339; set once deletion was requested while finalizers hold the object. */
  deletionTimestamp?: string;
  /** Grace period the pending deletion was requested with. */
  deletionGracePeriodSeconds?: number;
  /** Identifying key/value pairs (selectable). */
  labels?: Record<string, string>;
  /** Non-identifying key/value pairs (the VM contract lives here). */
  annotations?: Record<string, string>;
  /** Objects this one belongs to; at most one is the controller. */
  ownerReferences?: OwnerReference[];
  /** Keys that must all be removed before a deleted object goes away. */
  finalizers?: string[];
  /** Server-side apply bookkeeping; the cache drops it. */
  managedFields?: unknown[];
}

/** Any API object: apiVersion/kind plus metadata; the rest is kind-specific. */
export interface KubeObject {
  /** "group/version", or "v1" for the core group; present on objects from the server. */
  apiVersion?: string;
  /** The object's Kind; present on objects from the server. */
  kind?: string;
  /** Standard metadata. */
  metadata: ObjectMeta;
}

/** List metadata returned by list calls. */
export interface ListMeta {
  /** Version of the collection; a watch started from it misses nothing. */
  resourceVersion?: string;
  /** Token for the next page; absent on the last one. */
  continue?: string;
  /** Items after this page, when the server knows. */
  remainingItemCount?: number;
  /** The shardSelector the server applied (Kubernetes 1.36 with ShardedListAndWatch). */
  shardInfo?: { selector?: string };
}

/** A typed list of objects. */
export interface ObjectList<T extends KubeObject> {
  /** apiVersion of the list. */
  apiVersion?: string;
  /** "PodList", "CocoonSetList", … */
  kind?: string;
  /** Version and paging of the list. */
  metadata: ListMeta;
  /** The objects. */
  items: T[];
}

/** A metav1.Status body, as returned with API errors and watch ERROR events. */
export interface Status {
  /** "v1". */
  apiVersion?: string;
  /** Always "Status". */
  kind: "Status";
  /** Outcome of the call. */
  status?: "Success" | "Failure";
  /** Human-readable description. */
  message?: string;
  /** Machine-readable reason (NotFound, Conflict, …). */
  reason?: string;
  /** HTTP status code. */
  code?: number;
  /** What the status is about, and field-level causes. */
  details?: {
    name?: string;
    group?: string;
    kind?: string;
    uid?: string;
    causes?: { reason?: string; message?: string; field?: string }[];
    retryAfterSeconds?: number;
  };
}

/** Cache / workqueue key of an object: "namespace/name", or "name" when cluster-scoped. */
export interface ObjectKey {
  /** "" for cluster-scoped objects. */
  namespace: string;
  /** Object name. */
  name: string;
}

/** Formats a key as controller-runtime does ("ns/name", or "name" for cluster scope). */
export function keyString(key: ObjectKey): string {
  return key.namespace ? `${key.namespace}/${key.name}` : key.name;
}

/** The key of an object. */
export function objectKey(obj: KubeObject): ObjectKey {
  return { namespace: obj.metadata.namespace ?? "", name: obj.metadata.name ?? "" };
}

/** Parses "ns/name" or "name" back to a key. */
export function parseKey(key: string): ObjectKey {
  const slash = key.indexOf("/");
  return slash < 0
    ? { namespace: "", name: key }
    : { namespace: key.slice(0, slash), name: key.slice(slash + 1) };
}

/**
 * Deep copy of a JSON value (objects, arrays, strings, numbers, booleans, null); the cache hands
 * out copies so callers may mutate freely. A plain recursive copy: objects here are always JSON,
 * and Deno's structuredClone (a serialise/deserialise round trip) costs several times more, which
 * showed as most of a reconcile's CPU.
 */
export function deepCopy<T>(obj: T): T {
  return copyJson(obj) as T;
}

function copyJson(v: unknown): unknown {
  if (v === null || typeof v !== "object") return v;
  if (Array.isArray(v)) {
    const out = new Array(v.length);
    for (let i = 0; i < v.length; i++) out[i] = copyJson(v[i]);
    return out;
  }
  const out: Record<string, unknown> = {};
  for (const k in v as Record<string, unknown>) {
    if (Object.hasOwn(v, k)) out[k] = copyJson((v as Record<string, unknown>)[k]);
  }
  return out;
}

/** The controller owner reference of an object, if any. */
export function controllerOf(obj: KubeObject): OwnerReference | undefined {
  return obj.metadata.ownerReferences?.find((ref) => ref.controller === true);
}
