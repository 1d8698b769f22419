/**
 * Seat accounting for the simulated scheduler: which pods hold a seat on which node. A pod holds
 * a seat from the moment the scheduler decides to bind it (assumed, before the watch shows the
 * binding) until it is terminated (phase Failed / Succeeded) or gone from the API server; a pod
 * that is only Terminating still holds it, as on a real node, until its kubelet finalizes it.
 *
 * @module
 */

/** Per-node seat counts, updated incrementally from pod observations and binding decisions. */
export class SeatLedger {
  /** Pods the watch shows bound to a simulated node and not terminated. */
  readonly #confirmed = new Map<string, string>();
  /** Pods the scheduler bound (or is binding) that the watch does not show bound yet. */
  readonly #assumed = new Map<string, string>();
  readonly #used = new Map<string, number>();

  /** Seats taken on node. */
  used(node: string): number {
    return this.#used.get(node) ?? 0;
  }

  /**
   * Records what the watch shows for a pod: `node` when it holds a seat there, undefined when it
   * holds none (unbound, terminated, or bound to a node this simulator does not run). Returns
   * the node whose seat was freed, if any.
   */
  observe(key: string, node: string | undefined): string | undefined {
    return this.#change(key, () => {
      if (node) {
        this.#confirmed.set(key, node);
        this.#assumed.delete(key);
      } else {
        this.#confirmed.delete(key);
      }
    });
  }

  /** The scheduler decided to bind key to node; the seat is taken at once. */
  assume(key: string, node: string): void {
    this.#change(key, () => this.#assumed.set(key, node));
  }

  /** The binding failed: the assumed seat is given back. Returns the freed node, if any. */
  unassume(key: string): string | undefined {
    return this.#change(key, () => this.#assumed.delete(key));
  }

  /** The pod is gone. Returns the freed node, if any. */
  forget(key: string): string | undefined {
    return this.#change(key, () => {
      this.#confirmed.delete(key);
      this.#assumed.delete(key);
    });
  }

  #where(key: string): string | undefined {
    return this.#confirmed.get(key) ?? this.#assumed.get(key);
  }

  #change(key: string, mutate: () => void): string | undefined {
    const before = this.#where(key);
    mutate();
    const after = this.#where(key);
    if (before === after) return undefined;
    if (before) this.#used.set(before, this.used(before) - 1);
    if (after) this.#used.set(after, this.used(after) + 1);
    return before;
  }
}
