import assert from "node:assert/strict";
import type { Pod } from "../../kube/core.ts";
import {
  AnnotationCocoonSetGeneration,
  AnnotationLifecycleObservedGeneration,
  AnnotationLifecycleState,
  AnnotationLifecycleStateMessage,
} from "./keys.ts";
import {
  applyLifecycleStatus,
  isTerminalLifecycleState,
  lifecycleAnnotations,
  lifecycleSnapshot,
  LifecycleStateCreating,
  LifecycleStateFailed,
  LifecycleStateHibernated,
  LifecycleStateHibernating,
  LifecycleStateReady,
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
    [LifecycleStateCreating, false],
    [LifecycleStateHibernating, false],
    [LifecycleStateReady, true],
    [LifecycleStateHibernated, true],
    [LifecycleStateFailed, true],
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
    applyLifecycleStatus({ state: LifecycleStateReady, observedGeneration: 7, message: "ok" }, p);
    assert.deepEqual(p.metadata.annotations, {
      [AnnotationLifecycleState]: "ready",
      [AnnotationLifecycleObservedGeneration]: "7",
      [AnnotationLifecycleStateMessage]: "ok",
    });
  });
  await t.step("empty message deletes annotation", () => {
    const p = pod({ [AnnotationLifecycleStateMessage]: "stale" });
    applyLifecycleStatus({ state: LifecycleStateReady, observedGeneration: 9, message: "" }, p);
    assert.deepEqual(p.metadata.annotations, {
      [AnnotationLifecycleState]: "ready",
      [AnnotationLifecycleObservedGeneration]: "9",
    });
  });
});

Deno.test("lifecycleAnnotations", async (t) => {
  await t.step("with message", () => {
    assert.deepEqual(
      lifecycleAnnotations({ state: LifecycleStateFailed, observedGeneration: 3, message: "boom" }),
      {
        [AnnotationLifecycleState]: "failed",
        [AnnotationLifecycleObservedGeneration]: "3",
        [AnnotationLifecycleStateMessage]: "boom",
      },
    );
  });
  await t.step("empty message deletes via null", () => {
    assert.deepEqual(
      lifecycleAnnotations({ state: LifecycleStateReady, observedGeneration: 1, message: "" }),
      {
        [AnnotationLifecycleState]: "ready",
        [AnnotationLifecycleObservedGeneration]: "1",
        [AnnotationLifecycleStateMessage]: null,
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
      lifecycleSnapshot({ state: LifecycleStateReady, observedGeneration: 7, message: "ok" }),
      "ready\x007\x00ok",
    );
  });
  await t.step("message with pipe", () => {
    assert.equal(
      lifecycleSnapshot({ state: LifecycleStateFailed, observedGeneration: 0, message: "a|b" }),
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
      [AnnotationLifecycleState]: "ready",
      [AnnotationLifecycleObservedGeneration]: "11",
      [AnnotationLifecycleStateMessage]: "ok",
    });
    assert.deepEqual(readLifecycleStatus(p), {
      state: LifecycleStateReady,
      observedGeneration: 11,
      message: "ok",
    });
  });
  await t.step("apply then read round-trips", () => {
    const p = pod();
    const s = { state: LifecycleStateHibernated, observedGeneration: 4, message: "snap" };
    applyLifecycleStatus(s, p);
    assert.deepEqual(readLifecycleStatus(p), s);
  });
});

Deno.test("readLifecycleState", () => {
  assert.equal(readLifecycleState(pod()), "");
  assert.equal(readLifecycleState(pod({ [AnnotationLifecycleState]: "ready" })), "ready");
});

Deno.test("readLifecycleObservedGeneration", async (t) => {
  const cases: [string, Record<string, string> | undefined, number][] = [
    ["missing", undefined, 0],
    ["valid", { [AnnotationLifecycleObservedGeneration]: "42" }, 42],
    ["unparseable falls back to zero", { [AnnotationLifecycleObservedGeneration]: "abc" }, 0],
    ["fraction falls back to zero", { [AnnotationLifecycleObservedGeneration]: "4.0" }, 0],
    ["plus sign accepted like ParseInt", { [AnnotationLifecycleObservedGeneration]: "+5" }, 5],
    [
      "int64 overflow falls back to zero",
      { [AnnotationLifecycleObservedGeneration]: "9223372036854775808" },
      0,
    ],
  ];
  for (const [name, ann, want] of cases) {
    await t.step(name, () => assert.equal(readLifecycleObservedGeneration(pod(ann)), want));
  }
});

Deno.test("readCocoonSetGeneration", () => {
  assert.equal(readCocoonSetGeneration(pod()), 0);
  assert.equal(readCocoonSetGeneration(pod({ [AnnotationCocoonSetGeneration]: "7" })), 7);
});

Deno.test("stampCocoonSetGeneration", () => {
  const p = pod();
  stampCocoonSetGeneration(p, 42);
  assert.equal(p.metadata.annotations?.[AnnotationCocoonSetGeneration], "42");
  assert.equal(readCocoonSetGeneration(p), 42);
});
