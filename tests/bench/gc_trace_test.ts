import assert from "node:assert/strict";
import { parseGcTrace, traceHeap } from "./gc_trace.ts";

const trace = [
  "[41:0x55d0] 22 ms: Scavenge 3.9 (4.8) -> 3.4 (5.2) MB, pooled: 0.0 MB, 2.13 / 0.00 ms",
  '{"level":"info","message":"caches synced"}',
  "[42:0x77aa] 30 ms: Scavenge 9.0 (12.0) -> 8.0 (12.0) MB, pooled: 0.0 MB, 1.00 / 0.00 ms",
  "[41:0x55d0]      174 ms: Incremental Mark-Compact 58.6 (74.2) -> 16.3 (34.1) MB, pooled: 24.5 MB",
  "[41:0x55d0]      190 ms: Incremental Mark-Compact (reduce) 17.0 (34.1) -> 16.2 (20.6) MB, pooled: 0",
  "[41:0x55d0]      201 ms: Scavenge 20.0 (36.0) -> 17.5 (36.5) MB, pooled: 0.0 MB, 1.2 / 0.00 ms",
].join("\n");

Deno.test("gc_trace: collections of one process are parsed, other lines and pids skipped", () => {
  const events = parseGcTrace(trace, 41);
  assert.deepEqual(events.map((e) => [e.atMs, e.kind, e.full, e.beforeMiB, e.afterMiB]), [
    [22, "Scavenge", false, 3.9, 3.4],
    [174, "Incremental Mark-Compact", true, 58.6, 16.3],
    [190, "Incremental Mark-Compact (reduce)", true, 17, 16.2],
    [201, "Scavenge", false, 20, 17.5],
  ]);
  assert.equal(parseGcTrace(trace).length, 5, "every pid without a filter");
});

Deno.test("gc_trace: the live heap is the newest full collection's, not the newest scavenge's", () => {
  assert.deepEqual(traceHeap(parseGcTrace(trace, 41)), {
    liveHeapMiB: 16.2,
    committedHeapMiB: 20.6,
    lastFullGcAtMs: 190,
    heapAfterLastGcMiB: 17.5,
    committedAfterLastGcMiB: 36.5,
    lastGcAtMs: 201,
    lastReducingGcAtMs: 190,
    heapBeforeLastGcMiB: 20,
    collections: 4,
    fullCollections: 2,
  });
  const none = traceHeap(parseGcTrace(trace, 42));
  assert.equal(none.liveHeapMiB, undefined, "no full collection yet");
  assert.equal(none.lastReducingGcAtMs, undefined);
  assert.equal(none.heapAfterLastGcMiB, 8);
});
