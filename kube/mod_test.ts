import assert from "node:assert/strict";
import * as kube from "./mod.ts";
import * as testing from "./testing/mod.ts";

/** Runtime exports a reconciler and its wiring reach for, by the module that defines them. */
const RECONCILER_SURFACE = [
  // errors: classify, and wrap with context keeping the cause (Go's %w).
  "isNotFound",
  "isAlreadyExists",
  "wrapError",
  "apiErrorOf",
  "errorMessage",
  // drift checks compare JSON structurally.
  "jsonEqual",
  // cache scope for ManagerOptions.byObject.
  "byObject",
  // the priority a result may ask for (initial-list objects use it).
  "LOW_PRIORITY",
  "patchObject",
  "patchStatus",
  "setControllerReference",
  "controllerManagedBy",
  "Manager",
];

Deno.test("kube/mod.ts exports what a reconciler and its wiring use", () => {
  const missing = RECONCILER_SURFACE.filter((name) => !(name in kube));
  assert.deepEqual(missing, []);
});

Deno.test("kube/testing/mod.ts exports every test double, kube/mod.ts none of them", () => {
  const doubles = [
    "FakeClient",
    "FakeClock",
    "StubInformer",
    "RecordingRecorder",
    "waitFor",
    "waitUntil",
    "flushMicrotasks",
    "metricValue",
  ];
  assert.deepEqual(doubles.filter((name) => !(name in testing)), []);
  assert.deepEqual(doubles.filter((name) => name in kube), []);
});

Deno.test("kube/mod.ts exports the kube/ names reconciler tests and checks import directly today", () => {
  // hibernation's fixtures build a real Recorder; cocoonset/pods.ts validates label values.
  assert.deepEqual(["Recorder", "isValidLabelValue"].filter((name) => !(name in kube)), []);
});
