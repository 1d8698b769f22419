/**
 * Patch helpers in the shape of controller-runtime's client.MergeFrom: the caller mutates the
 * object, the helper sends the JSON merge patch between before and after, and the object is then
 * replaced in place by what the server returned, so later steps of the same reconcile see the new
 * resourceVersion.
 *
 * Deviations from MergeFrom, both deliberate: a mutation that changes nothing sends nothing (Go
 * sends "{}"), and `optimisticLock: true` (MergeFromWithOptimisticLock) puts the object's
 * resourceVersion in the patch so the server answers Conflict when the object moved on.
 */
import type { PatchOptions, Writer } from "./client.ts";
import type { KubeObject } from "./object.ts";
import { createMergePatch } from "./patch.ts";
import type { ResourceType } from "./resource.ts";

/** Options of patchObject / patchStatus. */
export interface MergePatchOptions extends Omit<PatchOptions, "subresource"> {
  /** Send the resourceVersion read with the object: a concurrent write yields Conflict. */
  optimisticLock?: boolean;
}

/** The object as JSON would carry it: undefined fields dropped, so they diff as absent. */
function asJson<T>(obj: T): Record<string, unknown> {
  return JSON.parse(JSON.stringify(obj)) as Record<string, unknown>;
}

/** Replaces obj's own fields with those of fresh, keeping the caller's reference valid. */
function replaceInPlace<T extends KubeObject>(obj: T, fresh: T): void {
  for (const k of Object.keys(obj)) delete (obj as Record<string, unknown>)[k];
  Object.assign(obj, fresh);
}

/**
 * The merge patch that turns before into after, or undefined when they do not differ. With
 * lockResourceVersion the patch also carries that resourceVersion (optimistic locking).
 */
export function mergePatchBetween(
  before: KubeObject,
  after: KubeObject,
  lockResourceVersion?: string,
): Record<string, unknown> | undefined {
  const body = createMergePatch(asJson(before), asJson(after));
  if (Object.keys(body).length === 0) return undefined;
  if (lockResourceVersion) {
    const meta = (body.metadata ?? {}) as Record<string, unknown>;
    body.metadata = { ...meta, resourceVersion: lockResourceVersion };
  }
  return body;
}

async function patchWith<T extends KubeObject>(
  client: Writer,
  rt: ResourceType<T>,
  obj: T,
  mutate: (obj: T) => void,
  opts: MergePatchOptions,
  subresource: "status" | undefined,
): Promise<T> {
  const before = asJson(obj) as unknown as T;
  mutate(obj);
  const { optimisticLock, ...rest } = opts;
  const body = mergePatchBetween(
    before,
    obj,
    optimisticLock ? before.metadata.resourceVersion : undefined,
  );
  if (!body) return obj;
  const fresh = await client.patch(
    rt,
    obj.metadata.namespace ?? "",
    obj.metadata.name ?? "",
    "merge",
    body,
    { ...rest, subresource },
  );
  replaceInPlace(obj, fresh);
  return obj;
}

/**
 * Applies mutate to obj and sends the difference as a merge patch (client.Patch with MergeFrom).
 * On success obj holds the server's copy; when mutate changed nothing no request is made.
 */
export function patchObject<T extends KubeObject>(
  client: Writer,
  rt: ResourceType<T>,
  obj: T,
  mutate: (obj: T) => void,
  opts: MergePatchOptions = {},
): Promise<T> {
  return patchWith(client, rt, obj, mutate, opts, undefined);
}

/** As patchObject, against the status subresource (client.Status().Patch). */
export function patchStatus<T extends KubeObject>(
  client: Writer,
  rt: ResourceType<T>,
  obj: T,
  mutate: (obj: T) => void,
  opts: MergePatchOptions = {},
): Promise<T> {
  return patchWith(client, rt, obj, mutate, opts, "status");
}

/**
 * Merge-patches annotations of obj; an empty value deletes the key. Always sends the request
 * (the caller knows the values differ); the server's answer replaces obj in place.
 */
export async function patchAnnotations<T extends KubeObject>(
  client: Writer,
  rt: ResourceType<T>,
  obj: T,
  annotations: Record<string, string>,
  opts: PatchOptions = {},
): Promise<T> {
  const body: Record<string, string | null> = {};
  for (const [k, v] of Object.entries(annotations)) body[k] = v === "" ? null : v;
  const fresh = await client.patch(
    rt,
    obj.metadata.namespace ?? "",
    obj.metadata.name ?? "",
    "merge",
    { metadata: { annotations: body } },
    opts,
  );
  replaceInPlace(obj, fresh);
  return obj;
}

/** What updateStatusLocked needs; every field is required. */
export interface LockedStatusUpdate<S, T extends KubeObject & { status?: S }> {
  client: Writer;
  rt: ResourceType<T>;
  /** The (cached) copy the status was computed from; replaced in place by the server's answer. */
  obj: T;
  status: S;
  /** Whether two statuses say the same (fields the server defaults count as absent). */
  equal: (a: S | undefined, b: S) => boolean;
  /** Object UID → the status this process last wrote for it. */
  written: Map<string, S>;
  signal: AbortSignal | undefined;
}

/**
 * Writes obj's status under the optimistic lock (MergeFromWithOptimisticLock): a copy the server
 * has moved past is refused with Conflict, and the caller looks again from fresh data. A status
 * equal to obj sends nothing, so the lock alone misses a copy that lags this process's own last
 * write (and status writes wake no reconcile to correct it): when that write said something else,
 * an empty locked patch asks whether obj is current (Conflict when not). Returns whether the
 * status was written.
 */
export async function updateStatusLocked<S, T extends KubeObject & { status?: S }>(
  u: LockedStatusUpdate<S, T>,
): Promise<boolean> {
  const { obj, signal } = u;
  const uid = obj.metadata.uid ?? "";
  if (u.equal(obj.status, u.status)) {
    const mine = u.written.get(uid);
    if (mine === undefined || u.equal(mine, u.status)) return false;
    await u.client.patch(u.rt, obj.metadata.namespace ?? "", obj.metadata.name ?? "", "merge", {
      metadata: { resourceVersion: obj.metadata.resourceVersion },
    }, { subresource: "status", signal });
    u.written.delete(uid);
    return false;
  }
  await patchStatus(u.client, u.rt, obj, (o) => {
    o.status = u.status;
  }, { optimisticLock: true, signal });
  u.written.set(uid, structuredClone(obj.status as S));
  return true;
}
