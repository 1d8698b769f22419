import assert from "node:assert/strict";
import { Pods } from "../core.ts";
import { RecordingRecorder } from "./recorder.ts";

Deno.test("RecordingRecorder keeps Events in order with a copy of their object", () => {
  const recorder = new RecordingRecorder();
  const pod = { metadata: { name: "p", namespace: "ns" } };

  recorder.event({ object: pod, resource: Pods }, "Warning", "Broken", "it broke");
  recorder.eventf(pod, "Normal", "Fixed", "fixed after %d tries", 3);
  pod.metadata.name = "renamed";

  assert.deepEqual(recorder.summary(), ["Warning Broken", "Normal Fixed"]);
  assert.equal(recorder.events[0].object.kind, "Pod");
  assert.equal(recorder.events[0].object.apiVersion, "v1");
  assert.equal(recorder.events[0].object.metadata.name, "p");
  assert.equal(recorder.withReason("Fixed")[0].message, "fixed after 3 tries");

  recorder.clear();
  assert.deepEqual(recorder.events, []);
});
