/**
 * The V8 heap of a Deno process read from its own GC trace: started with
 * `DENO_V8_FLAGS=--trace-gc`, V8 prints one stdout line per collection,
 * `[<pid>:0x<isolate>]  <ms> ms: <kind> <before> (<committed>) -> <after> (<committed>) MB, ...`
 * (V8's MB are MiB). The operator serves no heap figure and needs no new endpoint for this:
 * the flag is an environment variable of the benchmark's launch, read by the deno binary, not a
 * change to what the operator exposes.
 *
 * What the figures mean: the heap in use after the newest full collection (a Mark-Compact) is
 * the live heap at that moment, which may be long ago in a quiet process; the heap in use after
 * the newest collection of any kind is recent but also counts old-generation garbage made since
 * that full collection (an upper bound of the live heap then). Both are reported.
 *
 * @module
 */

/** One collection from the trace. */
export interface GcEvent {
  pid: number;
  /** Milliseconds since the isolate started. */
  atMs: number;
  /** `Scavenge`, `Mark-Compact`, `Incremental Mark-Compact`, `Mark-Compact (reduce)`, ... */
  kind: string;
  /** A Mark-Compact (collects the whole heap). */
  full: boolean;
  beforeMiB: number;
  afterMiB: number;
  /** Heap committed after the collection. */
  committedMiB: number;
}

const LINE =
  /^\[(\d+):0x[0-9a-f]+\]\s+(\d+(?:\.\d+)?) ms: (.+?) (\d+(?:\.\d+)?) \((\d+(?:\.\d+)?)\) -> (\d+(?:\.\d+)?) \((\d+(?:\.\d+)?)\) MB/gm;

/** Every collection in `text`, of process `pid` only when given, in trace order. */
export function parseGcTrace(text: string, pid?: number): GcEvent[] {
  const out: GcEvent[] = [];
  for (const m of text.matchAll(LINE)) {
    const event: GcEvent = {
      pid: Number(m[1]),
      atMs: Number(m[2]),
      kind: m[3],
      full: m[3].includes("Mark-Compact"),
      beforeMiB: Number(m[4]),
      afterMiB: Number(m[6]),
      committedMiB: Number(m[7]),
    };
    if (pid === undefined || event.pid === pid) out.push(event);
  }
  return out;
}

/** What a process's trace says about its heap; undefined fields when it has no such GC yet. */
export interface TraceHeap {
  /** Heap in use after the newest full collection: the live heap then. */
  liveHeapMiB?: number;
  /** Heap committed after that collection. */
  committedHeapMiB?: number;
  /** When that collection ran, ms since the isolate started. */
  lastFullGcAtMs?: number;
  /** Heap in use after the newest collection of any kind. */
  heapAfterLastGcMiB?: number;
  /** Heap committed after the newest collection of any kind. */
  committedAfterLastGcMiB?: number;
  /** When the newest collection ran, ms since the isolate started. */
  lastGcAtMs?: number;
  /**
   * When the newest collection of V8's memory reducer (`... (reduce)`, run once allocation has
   * been quiet, returning memory to the system) ran, ms since the isolate started.
   */
  lastReducingGcAtMs?: number;
  /** Heap in use just before the newest collection (its high point since the one before). */
  heapBeforeLastGcMiB?: number;
  /** Collections traced so far (full ones in brackets: `total (full)`). */
  collections: number;
  fullCollections: number;
}

/** Summarises a process's collections (see TraceHeap). */
export function traceHeap(events: readonly GcEvent[]): TraceHeap {
  const full = events.filter((e) => e.full);
  const lastFull = full.at(-1);
  const last = events.at(-1);
  return {
    liveHeapMiB: lastFull?.afterMiB,
    committedHeapMiB: lastFull?.committedMiB,
    lastFullGcAtMs: lastFull?.atMs,
    heapAfterLastGcMiB: last?.afterMiB,
    committedAfterLastGcMiB: last?.committedMiB,
    lastGcAtMs: last?.atMs,
    lastReducingGcAtMs: events.findLast((e) => e.kind.includes("(reduce)"))?.atMs,
    heapBeforeLastGcMiB: last?.beforeMiB,
    collections: events.length,
    fullCollections: full.length,
  };
}
