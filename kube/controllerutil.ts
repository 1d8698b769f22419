/**
 * controller-runtime's controllerutil for plain-JSON objects: controller owner references,
 * finalizer bookkeeping and the NotFound filter every reconciler needs. The functions mutate the
 * object they are given and report whether anything changed, so the caller decides whether a
 * write is needed.
 */
import { isNotFound } from "./errors.ts";
import { controllerOf, type KubeObject, type OwnerReference } from "./object.ts";
import { apiVersionOf, type ResourceType } from "./resource.ts";

/** obj already has a controller owner reference to a different object. */
export class AlreadyOwnedError extends Error {
  /** obj is the object being claimed; owner is the controller reference it already has. */
  constructor(readonly obj: KubeObject, readonly owner: OwnerReference) {
    super(
      `object ${describe(obj)} is already owned by another ${owner.kind} controller ${owner.name}`,
    );
    this.name = "AlreadyOwnedError";
  }
}

/**
 * Makes owner the controller of obj (SetControllerReference): an owner reference with
 * `controller: true` and `blockOwnerDeletion: true`, replacing a reference to the same owner and
 * keeping the others. Throws AlreadyOwnedError when another object already controls obj, and a
 * plain Error for owner/namespace combinations the API server would refuse.
 */
export function setControllerReference(
  owner: KubeObject,
  obj: KubeObject,
  ownerType: ResourceType,
): void {
  const ref = ownerReferenceFor(owner, ownerType);
  ref.controller = true;
  ref.blockOwnerDeletion = true;
  validateOwner(owner, obj, ownerType);
  const existing = controllerOf(obj);
  if (existing && !sameObject(existing, ref)) throw new AlreadyOwnedError(obj, existing);
  upsertOwnerRef(obj, ref);
}

/**
 * Adds owner as a non-controller owner of obj (SetOwnerReference), replacing any reference to the
 * same owner.
 */
export function setOwnerReference(
  owner: KubeObject,
  obj: KubeObject,
  ownerType: ResourceType,
): void {
  validateOwner(owner, obj, ownerType);
  upsertOwnerRef(obj, ownerReferenceFor(owner, ownerType));
}

/** Whether owner (by UID) is the controller of obj (metav1.IsControlledBy). */
export function isControlledBy(obj: KubeObject, owner: KubeObject): boolean {
  const ref = controllerOf(obj);
  return ref !== undefined && owner.metadata.uid !== undefined && ref.uid === owner.metadata.uid;
}

/** Whether obj carries the finalizer. */
export function containsFinalizer(obj: KubeObject, finalizer: string): boolean {
  return obj.metadata.finalizers?.includes(finalizer) ?? false;
}

/** Adds the finalizer unless present; returns true when obj changed. */
export function addFinalizer(obj: KubeObject, finalizer: string): boolean {
  if (containsFinalizer(obj, finalizer)) return false;
  obj.metadata.finalizers = [...(obj.metadata.finalizers ?? []), finalizer];
  return true;
}

/** Removes every occurrence of the finalizer; returns true when obj changed. */
export function removeFinalizer(obj: KubeObject, finalizer: string): boolean {
  const before = obj.metadata.finalizers ?? [];
  const after = before.filter((f) => f !== finalizer);
  if (after.length === before.length) return false;
  obj.metadata.finalizers = after;
  return true;
}

/**
 * Swallows NotFound and rethrows anything else (client.IgnoreNotFound). Meant for `.catch`:
 * `await client.delete(Pods, ns, name).catch(ignoreNotFound)`.
 */
export function ignoreNotFound(err: unknown): undefined {
  if (isNotFound(err)) return undefined;
  throw err;
}

function ownerReferenceFor(owner: KubeObject, ownerType: ResourceType): OwnerReference {
  const { name, uid } = owner.metadata;
  if (!name || !uid) {
    throw new Error(`owner ${describe(owner)} must have a name and a uid to be referenced`);
  }
  return { apiVersion: apiVersionOf(ownerType), kind: ownerType.kind, name, uid };
}

/** The API server's rules: a namespaced owner must share the object's namespace. */
function validateOwner(owner: KubeObject, obj: KubeObject, ownerType: ResourceType): void {
  const ownerNs = ownerType.namespaced ? owner.metadata.namespace ?? "" : "";
  if (ownerNs === "") return;
  const objNs = obj.metadata.namespace ?? "";
  if (objNs === "") {
    throw new Error(
      `cluster-scoped resource must not have a namespace-scoped owner, owner's namespace ${ownerNs}`,
    );
  }
  if (objNs !== ownerNs) {
    throw new Error(
      `cross-namespace owner references are disallowed, owner's namespace ${ownerNs}, ` +
        `obj's namespace ${objNs}`,
    );
  }
}

function upsertOwnerRef(obj: KubeObject, ref: OwnerReference): void {
  const refs = obj.metadata.ownerReferences ?? [];
  const i = refs.findIndex((r) => sameObject(r, ref));
  obj.metadata.ownerReferences = i < 0 ? [...refs, ref] : refs.map((r, j) => (j === i ? ref : r));
}

/** Same group, kind and name (the version may differ), as controller-runtime compares. */
function sameObject(a: OwnerReference, b: OwnerReference): boolean {
  return groupOf(a.apiVersion) === groupOf(b.apiVersion) && a.kind === b.kind &&
    a.name === b.name;
}

function groupOf(apiVersion: string): string {
  const slash = apiVersion.indexOf("/");
  return slash < 0 ? "" : apiVersion.slice(0, slash);
}

function describe(obj: KubeObject): string {
  const { namespace, name } = obj.metadata;
  return namespace ? `${namespace}/${name ?? ""}` : name ?? "";
}
