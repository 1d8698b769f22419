import assert from "node:assert/strict";
import { Pods } from "../core.ts";
import { RecordingRecorder } from "./recorder.ts";

Deno.test("RecordingRecorder keeps Events in order with a snapshot of their object", () => {
  const recorder = new RecordingRecorder();
  const pod = { metadata: { name: "p", namespace: "ns" } };

  recorder.event({ object: pod, resource: Pods }, "Warning", "Broken", "it broke");
  recorder.eventf(pod, "Normal", "Fixed", "fixed after %d tries", 3);
  pod.metadata.name = "renamed";

  assert.deepEqual(recorder.events.map((e) => `${e.type} ${e.reason}`), [
    "Warning Broken",
    "Normal Fixed",
  ]);
  assert.equal(recorder.events[0].object.metadata.name, "p");
  assert.equal(recorder.withReason("Fixed")[0].message, "fixed after 3 tries");
});
