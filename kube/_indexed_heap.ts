/**
 * A binary min-heap whose entries remember their position, so an entry can be removed or
 * moved after its key changed without a search. Private to kube/: the workqueue's delayed
 * adds and the priority queue's ready and waiting sets are built on it.
 *
 * @module
 */

/** What the heap needs to store on each entry: its current slot (-1 when not in a heap). */
export interface HeapEntry {
  heapIndex: number;
}

/** Min-heap ordered by `less`; every operation is O(log n) except peek and size. */
export class IndexedHeap<T extends HeapEntry> {
  #items: T[] = [];

  constructor(private readonly less: (a: T, b: T) => boolean) {}

  get size(): number {
    return this.#items.length;
  }

  /** The smallest entry, or undefined when empty. */
  peek(): T | undefined {
    return this.#items[0];
  }

  push(entry: T): void {
    entry.heapIndex = this.#items.length;
    this.#items.push(entry);
    this.#up(entry.heapIndex);
  }

  /** Removes and returns the smallest entry. */
  pop(): T | undefined {
    const top = this.#items[0];
    if (top !== undefined) this.remove(top);
    return top;
  }

  /** Removes entry, which must be in this heap. */
  remove(entry: T): void {
    const i = entry.heapIndex;
    const last = this.#items.pop()!;
    entry.heapIndex = -1;
    if (last === entry) return;
    this.#items[i] = last;
    last.heapIndex = i;
    this.fix(last);
  }

  /** Restores the order after entry's sort key changed in either direction. */
  fix(entry: T): void {
    if (!this.#up(entry.heapIndex)) this.#down(entry.heapIndex);
  }

  /** Empties the heap (entries keep stale indexes; callers drop them too). */
  clear(): void {
    this.#items = [];
  }

  #swap(i: number, j: number): void {
    const h = this.#items;
    [h[i], h[j]] = [h[j], h[i]];
    h[i].heapIndex = i;
    h[j].heapIndex = j;
  }

  /** Sifts up; true when the entry moved. */
  #up(i: number): boolean {
    const start = i;
    while (i > 0) {
      const parent = (i - 1) >> 1;
      if (!this.less(this.#items[i], this.#items[parent])) break;
      this.#swap(i, parent);
      i = parent;
    }
    return i !== start;
  }

  #down(i: number): void {
    const n = this.#items.length;
    for (;;) {
      const l = 2 * i + 1;
      const r = l + 1;
      let min = i;
      if (l < n && this.less(this.#items[l], this.#items[min])) min = l;
      if (r < n && this.less(this.#items[r], this.#items[min])) min = r;
      if (min === i) return;
      this.#swap(i, min);
      i = min;
    }
  }
}
