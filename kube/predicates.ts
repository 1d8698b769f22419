/**
 * Event filters (controller-runtime pkg/predicate) and the ones the reconcilers use.
 *
 * @module
 */
import type { KubeObject } from "./object.ts";

/**
 * Filters events before they reach a handler (controller-runtime pkg/predicate). Each method
 * returns whether the event should be handled.
 *
 * A missing method lets that event type through, as a zero predicate.Funcs does in Go: a
 * predicate with only `update` passes every create, delete and generic event. To drop an
 * event type, say so (`create: () => false`).
 *
 * @example Only spec changes, and never deletes
 * ```ts
 * import type { Predicate } from "./predicates.ts";
 *
 * const p: Predicate = {
 *   update: (o, n) => o.metadata.generation !== n.metadata.generation,
 *   delete: () => false,
 * };
 * ```
 */
export interface Predicate<T extends KubeObject = KubeObject> {
  /** An object appeared (including the informer's initial list). Absent: pass. */
  create?(obj: T): boolean;
  /** An object changed from oldObj to newObj. Absent: pass. */
  update?(oldObj: T, newObj: T): boolean;
  /** An object was deleted; obj is its last known state. Absent: pass. */
  delete?(obj: T): boolean;
  /** An event from a non-informer source. Absent: pass. */
  generic?(obj: T): boolean;
}

/** A predicate with every method present. */
export type CompletePredicate<T extends KubeObject = KubeObject> = Required<Predicate<T>>;

/** Fills the missing methods of p with "allow" (predicate.Funcs). */
export function funcs<T extends KubeObject>(p: Predicate<T>): CompletePredicate<T> {
  return {
    create: (obj) => p.create?.(obj) ?? true,
    update: (oldObj, newObj) => p.update?.(oldObj, newObj) ?? true,
    delete: (obj) => p.delete?.(obj) ?? true,
    generic: (obj) => p.generic?.(obj) ?? true,
  };
}

/** One filter applied to the object of every event (the new object for updates). */
export function newPredicateFuncs<T extends KubeObject>(
  filter: (obj: T) => boolean,
): CompletePredicate<T> {
  return {
    create: filter,
    update: (_oldObj, newObj) => filter(newObj),
    delete: filter,
    generic: filter,
  };
}

/**
 * Lets updates through only when metadata.generation changed, i.e. the spec changed; status
 * and metadata-only writes are dropped. Create/delete/generic pass.
 */
export function generationChanged<T extends KubeObject>(): CompletePredicate<T> {
  return funcs<T>({
    update: (o, n) => (o.metadata.generation ?? 0) !== (n.metadata.generation ?? 0),
  });
}

/** Lets updates through only when the annotations changed (absent = empty). */
export function annotationChanged<T extends KubeObject>(): CompletePredicate<T> {
  return funcs<T>({
    update: (o, n) => !sameStringMap(o.metadata.annotations, n.metadata.annotations),
  });
}

/** Lets updates through only when the labels changed (absent = empty). */
export function labelChanged<T extends KubeObject>(): CompletePredicate<T> {
  return funcs<T>({ update: (o, n) => !sameStringMap(o.metadata.labels, n.metadata.labels) });
}

/** Lets updates through only when resourceVersion changed (drops resync no-ops). */
export function resourceVersionChanged<T extends KubeObject>(): CompletePredicate<T> {
  return funcs<T>({
    update: (o, n) => (o.metadata.resourceVersion ?? "") !== (n.metadata.resourceVersion ?? ""),
  });
}

/** Passes when every predicate passes (short-circuits; no predicates = pass). */
export function and<T extends KubeObject>(...ps: Predicate<T>[]): CompletePredicate<T> {
  const all = ps.map((p) => funcs(p));
  return {
    create: (obj) => all.every((p) => p.create(obj)),
    update: (o, n) => all.every((p) => p.update(o, n)),
    delete: (obj) => all.every((p) => p.delete(obj)),
    generic: (obj) => all.every((p) => p.generic(obj)),
  };
}

/** Passes when any predicate passes (short-circuits; no predicates = reject). */
export function or<T extends KubeObject>(...ps: Predicate<T>[]): CompletePredicate<T> {
  const all = ps.map((p) => funcs(p));
  return {
    create: (obj) => all.some((p) => p.create(obj)),
    update: (o, n) => all.some((p) => p.update(o, n)),
    delete: (obj) => all.some((p) => p.delete(obj)),
    generic: (obj) => all.some((p) => p.generic(obj)),
  };
}

/** Inverts p (a missing method of p counts as "allow", so its negation rejects). */
export function not<T extends KubeObject>(p: Predicate<T>): CompletePredicate<T> {
  const f = funcs(p);
  return {
    create: (obj) => !f.create(obj),
    update: (o, n) => !f.update(o, n),
    delete: (obj) => !f.delete(obj),
    generic: (obj) => !f.generic(obj),
  };
}

/** maps.Equal for label/annotation maps, with undefined equal to {}. */
function sameStringMap(
  a: Record<string, string> | undefined,
  b: Record<string, string> | undefined,
): boolean {
  const ak = a ? Object.keys(a) : [];
  const bk = b ? Object.keys(b) : [];
  if (ak.length !== bk.length) return false;
  for (const k of ak) {
    if (!b || !Object.hasOwn(b, k) || b[k] !== a![k]) return false;
  }
  return true;
}
