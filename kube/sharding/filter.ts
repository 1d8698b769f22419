/**
 * The contract between the shard scope (which ranges this replica holds) and the caches (which
 * objects they keep): a cache reads the ranges when it takes a complete state and takes a fresh
 * one whenever they change.
 *
 * @module
 */
import { type HashRange, normalize, sameSet } from "./range.ts";

/** What a cache needs to know about the slice of namespaces this replica serves. */
export interface ShardFilter {
  /** The ranges the caches should hold now (active + pending + draining: a superset of what reconciles). */
  ranges(): readonly HashRange[];
  /** Called after ranges() changed; the caches re-scope (see below). Returns an unsubscribe function. */
  onChange(listener: () => void): () => void;
}

/** A fixed filter, for tests and for a scope that never changes. */
export function staticShardFilter(ranges: readonly HashRange[]): ShardFilter {
  const fixed = normalize(ranges);
  return {
    ranges: () => fixed,
    onChange: () => () => {},
  };
}

/**
 * A filter whose ranges are set by hand (tests, and a scope that computes its ranges elsewhere):
 * set() notifies the listeners only when the set of hashes really changed, so a round that
 * rewrites the same ranges does not make every cache relist.
 */
export class MutableShardFilter implements ShardFilter {
  #ranges: readonly HashRange[];
  readonly #listeners = new Set<() => void>();

  constructor(ranges: readonly HashRange[]) {
    this.#ranges = normalize(ranges);
  }

  ranges(): readonly HashRange[] {
    return this.#ranges;
  }

  onChange(listener: () => void): () => void {
    // Wrapped so one function subscribed twice is two subscriptions, each undone by its own call.
    const entry = () => listener();
    this.#listeners.add(entry);
    return () => this.#listeners.delete(entry);
  }

  /** Replaces the ranges; listeners run (synchronously) when the hashes covered differ. */
  set(ranges: readonly HashRange[]): void {
    const next = normalize(ranges);
    if (sameSet(next, this.#ranges)) return;
    this.#ranges = next;
    for (const listener of [...this.#listeners]) listener();
  }
}
