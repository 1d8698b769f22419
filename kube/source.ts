/**
 * The informer contract a controller watches through (controller-runtime's source.Kind over a
 * shared informer): handlers hear adds, updates and deletes of one kind.
 *
 * @module
 */
import type { KubeObject } from "./object.ts";

/**
 * What a controller subscribes to: an informer's change notifications. Handlers run
 * synchronously on the informer's dispatch loop and must not block (they enqueue keys).
 */
export interface EventHandler<T extends KubeObject> {
  /** isInInitialList is true for objects delivered by the first list after start. */
  onAdd?(obj: T, isInInitialList: boolean): void;
  /** Both states of the object; newObj is what the store now holds. */
  onUpdate?(oldObj: T, newObj: T): void;
  /** obj is the last state the informer knew (possibly stale after a missed delete). */
  onDelete?(obj: T): void;
}

/** A shared informer for one kind. */
export interface Informer<T extends KubeObject> {
  /** Registers a handler; it first receives onAdd for every object already in the store. */
  addEventHandler(handler: EventHandler<T>): void;
  /** True once the initial list has been stored and delivered. */
  hasSynced(): boolean;
}
