import assert from "node:assert/strict";
import type { Pod } from "../../kube/core.ts";
import {
  applyHibernateState,
  markKeepSnapshotOnDelete,
  markRestoreFromHibernate,
  readHibernateState,
  readKeepSnapshotOnDelete,
  readRestoreFromHibernate,
} from "./hibernate.ts";
import {
  AnnotationHibernate,
  AnnotationKeepSnapshotOnDelete,
  AnnotationRestoreFromHibernate,
  DefaultSnapshotTag,
  HibernateSnapshotTag,
} from "./keys.ts";

const pod = (annotations?: Record<string, string>): Pod => ({
  metadata: annotations ? { annotations } : {},
});

Deno.test("applyHibernateState(true) sets the annotation to true", () => {
  const p = pod();
  applyHibernateState(true, p);
  assert.deepEqual(p.metadata.annotations, { [AnnotationHibernate]: "true" });
});

Deno.test("applyHibernateState(false) on a pod without annotations leaves none", () => {
  const p = pod();
  applyHibernateState(false, p);
  assert.equal(p.metadata.annotations, undefined);
});

Deno.test("applyHibernateState(false) removes the annotation instead of writing false", () => {
  const p = pod({ [AnnotationHibernate]: "true", other: "x" });
  applyHibernateState(false, p);
  assert.deepEqual(p.metadata.annotations, { other: "x" });
});

Deno.test("readHibernateState", async (t) => {
  const cases: [string, Record<string, string> | undefined, boolean][] = [
    ["missing", undefined, false],
    ["true", { [AnnotationHibernate]: "true" }, true],
    ["false-string", { [AnnotationHibernate]: "false" }, false],
    ["empty", { [AnnotationHibernate]: "" }, false],
    ["capitalised is not true", { [AnnotationHibernate]: "True" }, false],
  ];
  for (const [name, ann, want] of cases) {
    await t.step(name, () => assert.equal(readHibernateState(pod(ann)), want));
  }
});

Deno.test("markRestoreFromHibernate round-trips through readRestoreFromHibernate", () => {
  const p = pod();
  assert.equal(readRestoreFromHibernate(p), false);
  markRestoreFromHibernate(p);
  assert.equal(readRestoreFromHibernate(p), true);
  assert.equal(p.metadata.annotations?.[AnnotationRestoreFromHibernate], "true");
});

Deno.test("markKeepSnapshotOnDelete round-trips through readKeepSnapshotOnDelete", () => {
  const p = pod();
  assert.equal(readKeepSnapshotOnDelete(p), false);
  markKeepSnapshotOnDelete(p);
  assert.equal(readKeepSnapshotOnDelete(p), true);
  assert.equal(p.metadata.annotations?.[AnnotationKeepSnapshotOnDelete], "true");
});

Deno.test("snapshot tag constants", () => {
  assert.equal(HibernateSnapshotTag, "hibernate");
  assert.equal(DefaultSnapshotTag, "latest");
  assert.notEqual(DefaultSnapshotTag, HibernateSnapshotTag);
});
