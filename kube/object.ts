/**
 * Plain-JSON Kubernetes object shapes. The runtime keeps objects exactly as the API server
 * sends them (timestamps stay RFC 3339 strings) so they can be compared, patched and cached
 * without a serializer in between.
 */

/** An owner reference as stored in metadata.ownerReferences. */
export interface OwnerReference {
  apiVersion: string;
  kind: string;
  name: string;
  uid: string;
  controller?: boolean;
  blockOwnerDeletion?: boolean;
}

/** Standard object metadata (the fields the runtime and the reconcilers use). */
export interface ObjectMeta {
  name?: string;
  generateName?: string;
  namespace?: string;
  uid?: string;
  resourceVersion?: string;
  generation?: number;
  creationTimestamp?: string;
  deletionTimestamp?: string;
  deletionGracePeriodSeconds?: number;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
  ownerReferences?: OwnerReference[];
  finalizers?: string[];
  managedFields?: unknown[];
}

/** Any API object: apiVersion/kind plus metadata; the rest is kind-specific. */
export interface KubeObject {
  apiVersion?: string;
  kind?: string;
  metadata: ObjectMeta;
}

/** List metadata returned by list calls. */
export interface ListMeta {
  resourceVersion?: string;
  continue?: string;
  remainingItemCount?: number;
}

/** A typed list of objects. */
export interface ObjectList<T extends KubeObject> {
  apiVersion?: string;
  kind?: string;
  metadata: ListMeta;
  items: T[];
}

/** A metav1.Status body, as returned with API errors and watch ERROR events. */
export interface Status {
  apiVersion?: string;
  kind: "Status";
  status?: "Success" | "Failure";
  message?: string;
  reason?: string;
  code?: number;
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
  namespace: string;
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
