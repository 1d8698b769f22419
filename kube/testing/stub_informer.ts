import type { KubeObject } from "../object.ts";
import type { EventHandler, Informer } from "../source.ts";

/**
 * A hand-driven informer implementing kube/source.ts: a test adds, updates and deletes objects
 * and every registered handler hears about it at once, with no API behind it.
 */
export class StubInformer<T extends KubeObject> implements Informer<T> {
  readonly handlers: EventHandler<T>[] = [];
  readonly objects = new Map<string, T>();
  /** What hasSynced() answers; a test flips it to hold a controller before its workers start. */
  synced = true;

  addEventHandler(handler: EventHandler<T>): void {
    this.handlers.push(handler);
    for (const obj of this.objects.values()) handler.onAdd?.(obj, true);
  }

  hasSynced(): boolean {
    return this.synced;
  }

  /** Stores obj and delivers it as a create (not part of the initial list). */
  add(obj: T): void {
    this.objects.set(keyOf(obj), obj);
    for (const h of this.handlers) h.onAdd?.(obj, false);
  }

  /** Replaces the stored object of obj's key and delivers the update. */
  update(obj: T): void {
    const old = this.objects.get(keyOf(obj));
    if (!old) throw new Error(`StubInformer: update of unknown object ${keyOf(obj)}`);
    this.objects.set(keyOf(obj), obj);
    for (const h of this.handlers) h.onUpdate?.(old, obj);
  }

  /** Forgets obj and delivers the delete. */
  delete(obj: T): void {
    this.objects.delete(keyOf(obj));
    for (const h of this.handlers) h.onDelete?.(obj);
  }
}

function keyOf(obj: KubeObject): string {
  return `${obj.metadata.namespace ?? ""}/${obj.metadata.name}`;
}
