/**
 * Test doubles for code built on kube/, kept apart from the runtime (as controller-runtime
 * keeps `pkg/client/fake`): production code never imports this module.
 *
 * - {@link FakeClient}: an in-memory API server with the semantics reconcilers rely on
 *   (resourceVersion conflicts, generation, status subresource, finalizers, watches, 410),
 *   fault injection through reactors and a record of every action, patch bodies included;
 * - {@link FakeClock}: time that moves only when a test advances it;
 * - {@link StubInformer}: a hand-driven informer for controller and builder tests;
 * - {@link RecordingRecorder}: an EventRecorder that keeps Events in memory for assertions;
 * - {@link waitFor} / {@link waitUntil}: polling with a deadline, the one way tests wait;
 *   {@link flushMicrotasks} for promise callbacks;
 * - {@link metricValue}: reads one series of a runtime metric.
 *
 * @example A reconciler test on the fake API
 * ```ts
 * import assert from "node:assert/strict";
 * import { addFinalizer, patchObject, Pods } from "../mod.ts";
 * import { FakeClient } from "./mod.ts";
 *
 * const fake = new FakeClient();
 * const pod = await fake.create(Pods, {
 *   metadata: { name: "p", namespace: "ns" },
 *   spec: { containers: [{ name: "c" }] },
 * });
 * await patchObject(fake, Pods, pod, (p) => addFinalizer(p, "example.com/f"));
 * const patch = fake.actions.find((a) => a.verb === "patch");
 * assert.deepEqual(patch?.patch, { metadata: { finalizers: ["example.com/f"] } });
 * ```
 *
 * @module
 */
export type { FakeAction, FakeClientOptions, Reactor } from "./fake.ts";
export { FakeClient } from "./fake.ts";
export type { FakeAccess } from "./fake_access.ts";
export { FakeClock } from "./fake_clock.ts";
export { StubInformer } from "./stub_informer.ts";
export type { RecordedEvent } from "./recorder.ts";
export { RecordingRecorder } from "./recorder.ts";
export type { WaitOptions } from "./wait.ts";
export { flushMicrotasks, waitFor, waitUntil } from "./wait.ts";
export { metricValue } from "./metrics.ts";
export { staleCache, type StaleReads } from "./stale_cache.ts";
