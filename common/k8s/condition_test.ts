import assert from "node:assert/strict";
import {
  type Condition,
  CONDITION_TYPE_READY,
  findStatusCondition,
  formatConditionTime,
  isStatusConditionFalse,
  isStatusConditionPresentAndEqual,
  isStatusConditionTrue,
  newReadyCondition,
  removeStatusCondition,
  setStatusCondition,
} from "./condition.ts";

const T0 = new Date("2026-01-02T03:04:05.678Z");
const T1 = new Date("2026-01-02T04:00:00.000Z");

Deno.test("newReadyCondition leaves lastTransitionTime unset", () => {
  assert.deepEqual(newReadyCondition(7, "True", "AllReady", "2/2 ready"), {
    type: CONDITION_TYPE_READY,
    status: "True",
    reason: "AllReady",
    message: "2/2 ready",
    observedGeneration: 7,
    lastTransitionTime: "",
  });
});

Deno.test("formatConditionTime drops sub-second precision like metav1.Time", () => {
  assert.equal(formatConditionTime(T0), "2026-01-02T03:04:05Z");
});

Deno.test("setStatusCondition adds a new condition stamped with now", () => {
  const list: Condition[] = [];
  assert.equal(
    setStatusCondition(list, newReadyCondition(1, "False", "Waiting", "m"), () => T0),
    true,
  );
  assert.deepEqual(list, [{
    type: "Ready",
    status: "False",
    reason: "Waiting",
    message: "m",
    observedGeneration: 1,
    lastTransitionTime: "2026-01-02T03:04:05Z",
  }]);
});

Deno.test("setStatusCondition keeps an explicit lastTransitionTime on add", () => {
  const list: Condition[] = [];
  setStatusCondition(list, {
    ...newReadyCondition(1, "True", "R", ""),
    lastTransitionTime: "2020-01-01T00:00:00Z",
  }, () => T0);
  assert.equal(list[0].lastTransitionTime, "2020-01-01T00:00:00Z");
});

Deno.test("setStatusCondition keeps the timestamp when status does not change", () => {
  const list: Condition[] = [];
  setStatusCondition(list, newReadyCondition(1, "True", "A", "one"), () => T0);
  const changed = setStatusCondition(list, newReadyCondition(2, "True", "B", "two"), () => T1);
  assert.equal(changed, true);
  assert.deepEqual(list[0], {
    type: "Ready",
    status: "True",
    reason: "B",
    message: "two",
    observedGeneration: 2,
    lastTransitionTime: "2026-01-02T03:04:05Z",
  });
});

Deno.test("setStatusCondition moves the timestamp when status flips", () => {
  const list: Condition[] = [];
  setStatusCondition(list, newReadyCondition(1, "True", "A", ""), () => T0);
  setStatusCondition(list, newReadyCondition(1, "False", "A", ""), () => T1);
  assert.equal(list[0].status, "False");
  assert.equal(list[0].lastTransitionTime, "2026-01-02T04:00:00Z");
});

Deno.test("setStatusCondition on a status flip uses the given lastTransitionTime when set", () => {
  const list: Condition[] = [];
  setStatusCondition(list, newReadyCondition(1, "True", "A", ""), () => T0);
  setStatusCondition(
    list,
    { ...newReadyCondition(1, "Unknown", "A", ""), lastTransitionTime: "2030-05-05T05:05:05Z" },
    () => T1,
  );
  assert.equal(list[0].lastTransitionTime, "2030-05-05T05:05:05Z");
});

Deno.test("setStatusCondition reports no change for an identical condition", () => {
  const list: Condition[] = [];
  setStatusCondition(list, newReadyCondition(3, "True", "A", "m"), () => T0);
  const before = structuredClone(list);
  assert.equal(setStatusCondition(list, newReadyCondition(3, "True", "A", "m"), () => T1), false);
  assert.deepEqual(list, before);
});

Deno.test("setStatusCondition leaves other conditions alone", () => {
  const list: Condition[] = [];
  setStatusCondition(list, newReadyCondition(1, "True", "A", ""), () => T0);
  setStatusCondition(list, {
    type: "Progressing",
    status: "False",
    reason: "Stable",
    message: "",
    lastTransitionTime: "",
  }, () => T1);
  assert.deepEqual(list.map((c) => c.type), ["Ready", "Progressing"]);
  assert.equal(list[0].lastTransitionTime, "2026-01-02T03:04:05Z");
});

Deno.test("find / isTrue / isFalse / presentAndEqual / remove", () => {
  const list: Condition[] = [];
  assert.equal(findStatusCondition(list, "Ready"), undefined);
  assert.equal(findStatusCondition(undefined, "Ready"), undefined);
  assert.equal(isStatusConditionTrue(list, "Ready"), false);
  setStatusCondition(list, newReadyCondition(1, "True", "A", ""), () => T0);
  assert.equal(findStatusCondition(list, "Ready"), list[0]);
  assert.equal(isStatusConditionTrue(list, "Ready"), true);
  assert.equal(isStatusConditionFalse(list, "Ready"), false);
  assert.equal(isStatusConditionPresentAndEqual(list, "Ready", "True"), true);
  assert.equal(isStatusConditionPresentAndEqual(list, "Other", "True"), false);
  assert.equal(removeStatusCondition(list, "Other"), false);
  assert.equal(removeStatusCondition(list, "Ready"), true);
  assert.deepEqual(list, []);
});

Deno.test("removeStatusCondition removes every entry of the type, as apimeta does", () => {
  const list: Condition[] = [
    newReadyCondition(1, "True", "A", ""),
    { ...newReadyCondition(1, "True", "B", ""), type: "Other" },
    newReadyCondition(2, "False", "C", ""),
  ];
  assert.equal(removeStatusCondition(list, "Ready"), true);
  assert.deepEqual(list.map((c) => c.type), ["Other"]);
  assert.equal(removeStatusCondition(list, "Ready"), false);
});
