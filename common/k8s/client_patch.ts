/**
 * Patch helpers in the shape of controller-runtime's client.MergeFrom: the caller mutates the
 * object, the helper sends the JSON merge patch between before and after, and the object is then
 * replaced in place by what the server returned (as the Go client does), so later steps of the
 * same reconcile see the new resourceVersion. No optimistic lock is sent, like MergeFrom.
 */
import type { Pod } from "../../kube/core.ts";
import { Pods } from "../../kube/core.ts";
import type { PatchOptions, Writer } from "../../kube/client.ts";
import type { KubeObject } from "../../kube/object.ts";
import { createMergePatch } from "../../kube/patch.ts";
import type { ResourceType } from "../../kube/resource.ts";
import {
  applyHibernateState,
  markKeepSnapshotOnDelete,
  readHibernateState,
  readKeepSnapshotOnDelete,
} from "../meta/hibernate.ts";
import { readCocoonSetGeneration, stampCocoonSetGeneration } from "../meta/lifecycle.ts";
import { annotationsMergePatchDroppingEmpty } from "./patch.ts";

/** The object as JSON would carry it: undefined fields dropped, so they diff as absent. */
function asJson<T>(obj: T): Record<string, unknown> {
  return JSON.parse(JSON.stringify(obj)) as Record<string, unknown>;
}

/** Replaces obj's own fields with those of fresh, keeping the caller's reference valid. */
function replaceInPlace<T extends KubeObject>(obj: T, fresh: T): void {
  for (const k of Object.keys(obj)) delete (obj as Record<string, unknown>)[k];
  Object.assign(obj, fresh);
}

async function patchWith<T extends KubeObject>(
  client: Writer,
  rt: ResourceType<T>,
  obj: T,
  mutate: (obj: T) => void,
  opts: PatchOptions,
): Promise<T> {
  const before = asJson(obj);
  mutate(obj);
  const body = createMergePatch(before, asJson(obj));
  const fresh = await client.patch(
    rt,
    obj.metadata.namespace ?? "",
    obj.metadata.name ?? "",
    "merge",
    body,
    opts,
  );
  replaceInPlace(obj, fresh);
  return obj;
}

/**
 * Applies mutate to obj and sends the difference as a merge patch (Go: k8s.Patch). Like the Go
 * helper it always makes the call, even when mutate changed nothing (the patch is then "{}").
 */
export function patchObject<T extends KubeObject>(
  client: Writer,
  rt: ResourceType<T>,
  obj: T,
  mutate: (obj: T) => void,
  opts: PatchOptions = {},
): Promise<T> {
  return patchWith(client, rt, obj, mutate, { ...opts, subresource: undefined });
}

/** As patchObject, against the status subresource (Go: k8s.PatchStatus). */
export function patchStatus<T extends KubeObject>(
  client: Writer,
  rt: ResourceType<T>,
  obj: T,
  mutate: (obj: T) => void,
  opts: PatchOptions = {},
): Promise<T> {
  return patchWith(client, rt, obj, mutate, { ...opts, subresource: "status" });
}

/**
 * Merge-patches annotations of obj; an empty value deletes the key. The server's answer replaces
 * obj in place.
 */
export async function patchAnnotations<T extends KubeObject>(
  client: Writer,
  rt: ResourceType<T>,
  obj: T,
  annotations: Record<string, string>,
  opts: PatchOptions = {},
): Promise<T> {
  const fresh = await client.patch(
    rt,
    obj.metadata.namespace ?? "",
    obj.metadata.name ?? "",
    "merge",
    annotationsMergePatchDroppingEmpty(annotations),
    opts,
  );
  replaceInPlace(obj, fresh);
  return obj;
}

/**
 * Sets (true) or removes (false) the hibernate annotation on the pod. Makes no API call when
 * the pod already is in that state.
 */
export async function patchHibernateState(
  client: Writer,
  pod: Pod,
  state: boolean,
): Promise<void> {
  if (readHibernateState(pod) === state) return;
  await patchObject(client, Pods, pod, (p) => applyHibernateState(state, p));
}

/**
 * Marks the pod's deletion as a seat release before it is deleted. No API call when the mark is
 * already there.
 */
export async function patchKeepSnapshotOnDelete(client: Writer, pod: Pod): Promise<void> {
  if (readKeepSnapshotOnDelete(pod)) return;
  await patchObject(client, Pods, pod, markKeepSnapshotOnDelete);
}

/**
 * Stamps the owning CocoonSet's generation on the pod so vk-cocoon can echo it back as the
 * lifecycle observed generation. No API call when the stamp is already right.
 */
export async function patchCocoonSetGeneration(
  client: Writer,
  pod: Pod,
  generation: number,
): Promise<void> {
  if (readCocoonSetGeneration(pod) === generation) return;
  await patchObject(client, Pods, pod, (p) => stampCocoonSetGeneration(p, generation));
}
