import assert from "node:assert/strict";
import type { Pod } from "../../kube/core.ts";
import { DEFAULT_NODE_POOL, LABEL_NODE_POOL } from "./keys.ts";
import { isContainerRunning, isPodPhaseFailed, isPodReady, podKey, podNodePool } from "./pod.ts";

Deno.test("isPodReady", async (t) => {
  const cases: [string, Pod, boolean][] = [
    ["no conditions", { metadata: {} }, false],
    [
      "ready true",
      { metadata: {}, status: { conditions: [{ type: "Ready", status: "True" }] } },
      true,
    ],
    [
      "ready false",
      { metadata: {}, status: { conditions: [{ type: "Ready", status: "False" }] } },
      false,
    ],
    [
      "other condition true",
      { metadata: {}, status: { conditions: [{ type: "Initialized", status: "True" }] } },
      false,
    ],
  ];
  for (const [name, pod, want] of cases) {
    await t.step(name, () => assert.equal(isPodReady(pod), want));
  }
});

Deno.test("isPodTerminal: only Failed is terminal", () => {
  assert.equal(isPodPhaseFailed({ metadata: {}, status: { phase: "Failed" } }), true);
  // Managed pods run forever, so Succeeded is not treated as terminal.
  assert.equal(isPodPhaseFailed({ metadata: {}, status: { phase: "Succeeded" } }), false);
  assert.equal(isPodPhaseFailed({ metadata: {}, status: { phase: "Running" } }), false);
  assert.equal(isPodPhaseFailed({ metadata: {} }), false);
});

Deno.test("isContainerRunning", () => {
  const status = (state: object): Pod => ({
    metadata: {},
    status: {
      containerStatuses: [{
        name: "c",
        ready: false,
        restartCount: 0,
        image: "",
        imageID: "",
        state,
      }],
    },
  });
  assert.equal(isContainerRunning(status({ running: {} })), true);
  assert.equal(isContainerRunning(status({ waiting: {} })), false);
  assert.equal(isContainerRunning({ metadata: {} }), false);
});

Deno.test("isContainerRunning: an explicit null running state is not running (Go decodes null to nil)", () => {
  const pod = JSON.parse(
    '{"metadata":{},"status":{"containerStatuses":[{"name":"c","state":{"running":null}}]}}',
  ) as Pod;
  assert.equal(isContainerRunning(pod), false);
});

Deno.test("podKey", () => {
  assert.equal(podKey("ns", "demo"), "ns/demo");
});

Deno.test("podNodePool", async (t) => {
  const cases: [string, Pod, string][] = [
    ["none set", { metadata: {} }, DEFAULT_NODE_POOL],
    ["nodeSelector wins", {
      metadata: { labels: { [LABEL_NODE_POOL]: "lab" }, annotations: { [LABEL_NODE_POOL]: "ann" } },
      spec: { containers: [], nodeSelector: { [LABEL_NODE_POOL]: "sel" } },
    }, "sel"],
    ["labels over annotations", {
      metadata: { labels: { [LABEL_NODE_POOL]: "lab" }, annotations: { [LABEL_NODE_POOL]: "ann" } },
    }, "lab"],
    ["annotation fallback", { metadata: { annotations: { [LABEL_NODE_POOL]: "ann" } } }, "ann"],
    ["empty values fall through", {
      metadata: { labels: { [LABEL_NODE_POOL]: "" } },
      spec: { containers: [], nodeSelector: { [LABEL_NODE_POOL]: "" } },
    }, DEFAULT_NODE_POOL],
  ];
  for (const [name, pod, want] of cases) {
    await t.step(name, () => assert.equal(podNodePool(pod), want));
  }
});
