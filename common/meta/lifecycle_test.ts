import assert from "node:assert/strict";
import type { Pod } from "../../kube/core.ts";
import {
  ANNOTATION_COCOON_SET_GENERATION,
  ANNOTATION_LIFECYCLE_OBSERVED_GENERATION,
  ANNOTATION_LIFECYCLE_STATE,
  ANNOTATION_LIFECYCLE_STATE_MESSAGE,
} from "./keys.ts";
import {
  applyLifecycleStatus,
  isTerminalLifecycleState,
  LIFECYCLE_STATE_CREATING,
  LIFECYCLE_STATE_FAILED,
  LIFECYCLE_STATE_HIBERNATED,
  LIFECYCLE_STATE_HIBERNATING,
  LIFECYCLE_STATE_READY,
  lifecycleAnnotations,
  lifecycleSnapshot,
  readCocoonSetGeneration,
  readLifecycleObservedGeneration,
  readLifecycleState,
  readLifecycleStatus,
  stampCocoonSetGeneration,
} from "./lifecycle.ts";

const pod = (annotations?: Record<string, string>): Pod => ({
  metadata: annotations ? { annotations } : {},
});

Deno.test("isTerminalLifecycleState", async (t) => {
  const cases: [string, boolean][] = [
    [LIFECYCLE_STATE_CREATING, false],
    [LIFECYCLE_STATE_HIBERNATING, false],
    [LIFECYCLE_STATE_READY, true],
    [LIFECYCLE_STATE_HIBERNATED, true],
    [LIFECYCLE_STATE_FAILED, true],
    ["", false],
    ["unknown", false],
    ["Failed", false],
  ];
  for (const [state, want] of cases) {
    await t.step(state || "empty", () => assert.equal(isTerminalLifecycleState(state), want));
  }
});

Deno.test("applyLifecycleStatus", async (t) => {
  await t.step("writes triple", () => {
    const p = pod();
    applyLifecycleStatus({ state: LIFECYCLE_STATE_READY, observedGeneration: 7, message: "ok" }, p);
    assert.deepEqual(p.metadata.annotations, {
      [ANNOTATION_LIFECYCLE_STATE]: "ready",
      [ANNOTATION_LIFECYCLE_OBSERVED_GENERATION]: "7",
      [ANNOTATION_LIFECYCLE_STATE_MESSAGE]: "ok",
    });
  });
  await t.step("empty message deletes annotation", () => {
    const p = pod({ [ANNOTATION_LIFECYCLE_STATE_MESSAGE]: "stale" });
    applyLifecycleStatus({ state: LIFECYCLE_STATE_READY, observedGeneration: 9, message: "" }, p);
    assert.deepEqual(p.metadata.annotations, {
      [ANNOTATION_LIFECYCLE_STATE]: "ready",
      [ANNOTATION_LIFECYCLE_OBSERVED_GENERATION]: "9",
    });
  });
});

Deno.test("lifecycleAnnotations", async (t) => {
  await t.step("with message", () => {
    assert.deepEqual(
      lifecycleAnnotations({
        state: LIFECYCLE_STATE_FAILED,
        observedGeneration: 3,
        message: "boom",
      }),
      {
        [ANNOTATION_LIFECYCLE_STATE]: "failed",
        [ANNOTATION_LIFECYCLE_OBSERVED_GENERATION]: "3",
        [ANNOTATION_LIFECYCLE_STATE_MESSAGE]: "boom",
      },
    );
  });
  await t.step("empty message deletes via null", () => {
    assert.deepEqual(
      lifecycleAnnotations({ state: LIFECYCLE_STATE_READY, observedGeneration: 1, message: "" }),
      {
        [ANNOTATION_LIFECYCLE_STATE]: "ready",
        [ANNOTATION_LIFECYCLE_OBSERVED_GENERATION]: "1",
        [ANNOTATION_LIFECYCLE_STATE_MESSAGE]: null,
      },
    );
  });
});

Deno.test("lifecycleSnapshot", async (t) => {
  await t.step("empty", () => {
    assert.equal(lifecycleSnapshot({ state: "", observedGeneration: 0, message: "" }), "\x000\x00");
  });
  await t.step("populated", () => {
    assert.equal(
      lifecycleSnapshot({ state: LIFECYCLE_STATE_READY, observedGeneration: 7, message: "ok" }),
      "ready\x007\x00ok",
    );
  });
  await t.step("message with pipe", () => {
    assert.equal(
      lifecycleSnapshot({ state: LIFECYCLE_STATE_FAILED, observedGeneration: 0, message: "a|b" }),
      "failed\x000\x00a|b",
    );
  });
});

Deno.test("lifecycleSnapshot distinguishes adjacent values", () => {
  const a = lifecycleSnapshot({ state: "ab", observedGeneration: 0, message: "c" });
  const b = lifecycleSnapshot({ state: "a", observedGeneration: 0, message: "bc" });
  assert.notEqual(a, b);
});

Deno.test("readLifecycleStatus", async (t) => {
  await t.step("empty pod", () => {
    assert.deepEqual(readLifecycleStatus(pod()), { state: "", observedGeneration: 0, message: "" });
  });
  await t.step("populated", () => {
    const p = pod({
      [ANNOTATION_LIFECYCLE_STATE]: "ready",
      [ANNOTATION_LIFECYCLE_OBSERVED_GENERATION]: "11",
      [ANNOTATION_LIFECYCLE_STATE_MESSAGE]: "ok",
    });
    assert.deepEqual(readLifecycleStatus(p), {
      state: LIFECYCLE_STATE_READY,
      observedGeneration: 11,
      message: "ok",
    });
  });
  await t.step("apply then read round-trips", () => {
    const p = pod();
    const s = { state: LIFECYCLE_STATE_HIBERNATED, observedGeneration: 4, message: "snap" };
    applyLifecycleStatus(s, p);
    assert.deepEqual(readLifecycleStatus(p), s);
  });
});

Deno.test("readLifecycleState", () => {
  assert.equal(readLifecycleState(pod()), "");
  assert.equal(readLifecycleState(pod({ [ANNOTATION_LIFECYCLE_STATE]: "ready" })), "ready");
});

Deno.test("readLifecycleObservedGeneration", async (t) => {
  const cases: [string, Record<string, string> | undefined, number][] = [
    ["missing", undefined, 0],
    ["valid", { [ANNOTATION_LIFECYCLE_OBSERVED_GENERATION]: "42" }, 42],
    ["unparseable falls back to zero", { [ANNOTATION_LIFECYCLE_OBSERVED_GENERATION]: "abc" }, 0],
    ["fraction falls back to zero", { [ANNOTATION_LIFECYCLE_OBSERVED_GENERATION]: "4.0" }, 0],
    ["plus sign accepted like ParseInt", { [ANNOTATION_LIFECYCLE_OBSERVED_GENERATION]: "+5" }, 5],
    [
      "int64 overflow falls back to zero",
      { [ANNOTATION_LIFECYCLE_OBSERVED_GENERATION]: "9223372036854775808" },
      0,
    ],
  ];
  for (const [name, ann, want] of cases) {
    await t.step(name, () => assert.equal(readLifecycleObservedGeneration(pod(ann)), want));
  }
});

Deno.test("readCocoonSetGeneration", () => {
  assert.equal(readCocoonSetGeneration(pod()), 0);
  assert.equal(readCocoonSetGeneration(pod({ [ANNOTATION_COCOON_SET_GENERATION]: "7" })), 7);
});

Deno.test("stampCocoonSetGeneration", () => {
  const p = pod();
  stampCocoonSetGeneration(p, 42);
  assert.equal(p.metadata.annotations?.[ANNOTATION_COCOON_SET_GENERATION], "42");
  assert.equal(readCocoonSetGeneration(p), 42);
});
