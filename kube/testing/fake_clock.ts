import type { Clock, TimerId } from "../clock.ts";

interface FakeTimer {
  at: number;
  seq: number;
  fn: () => void;
}

/**
 * A manual clock for tests: time moves only through advance(), which fires due timers in
 * deadline order (ties in scheduling order), so delayed work is observable without waiting.
 */
export class FakeClock implements Clock {
  #now: number;
  #seq = 0;
  #timers = new Map<TimerId, FakeTimer>();

  constructor(start = 0) {
    this.#now = start;
  }

  now(): number {
    return this.#now;
  }

  setTimeout(fn: () => void, ms: number): TimerId {
    const id = ++this.#seq;
    this.#timers.set(id, { at: this.#now + Math.max(0, ms), seq: id, fn });
    return id;
  }

  clearTimeout(id: TimerId): void {
    this.#timers.delete(id);
  }

  /** Number of timers not yet fired or cleared. */
  pendingTimers(): number {
    return this.#timers.size;
  }

  /** Deadline of the earliest pending timer, if any. */
  nextDeadline(): number | undefined {
    let min: number | undefined;
    for (const t of this.#timers.values()) if (min === undefined || t.at < min) min = t.at;
    return min;
  }

  /**
   * Moves time forward by ms, firing every timer whose deadline is reached, including
   * timers scheduled by callbacks that fall inside the window.
   */
  advance(ms: number): void {
    const target = this.#now + Math.max(0, ms);
    for (;;) {
      let next: [TimerId, FakeTimer] | undefined;
      for (const entry of this.#timers) {
        const t = entry[1];
        if (t.at > target) continue;
        if (!next || t.at < next[1].at || (t.at === next[1].at && t.seq < next[1].seq)) {
          next = entry;
        }
      }
      if (!next) break;
      this.#timers.delete(next[0]);
      this.#now = Math.max(this.#now, next[1].at);
      next[1].fn();
    }
    this.#now = target;
  }
}
