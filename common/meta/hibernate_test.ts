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
  ANNOTATION_HIBERNATE,
  ANNOTATION_KEEP_SNAPSHOT_ON_DELETE,
  ANNOTATION_RESTORE_FROM_HIBERNATE,
} from "./keys.ts";
import { HIBERNATE_SNAPSHOT_TAG } from "../../snapshot/registry.ts";
import { DEFAULT_SNAPSHOT_TAG } from "../../snapshot/registry.ts";

const pod = (annotations?: Record<string, string>): Pod => ({
  metadata: annotations ? { annotations } : {},
});

Deno.test("applyHibernateState(true) sets the annotation to true", () => {
  const p = pod();
  applyHibernateState(true, p);
  assert.deepEqual(p.metadata.annotations, { [ANNOTATION_HIBERNATE]: "true" });
});

Deno.test("applyHibernateState(false) on a pod without annotations leaves none", () => {
  const p = pod();
  applyHibernateState(false, p);
  assert.equal(p.metadata.annotations, undefined);
});

Deno.test("applyHibernateState(false) removes the annotation instead of writing false", () => {
  const p = pod({ [ANNOTATION_HIBERNATE]: "true", other: "x" });
  applyHibernateState(false, p);
  assert.deepEqual(p.metadata.annotations, { other: "x" });
});

Deno.test("readHibernateState", async (t) => {
  const cases: [string, Record<string, string> | undefined, boolean][] = [
    ["missing", undefined, false],
    ["true", { [ANNOTATION_HIBERNATE]: "true" }, true],
    ["false-string", { [ANNOTATION_HIBERNATE]: "false" }, false],
    ["empty", { [ANNOTATION_HIBERNATE]: "" }, false],
    ["capitalised is not true", { [ANNOTATION_HIBERNATE]: "True" }, false],
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
  assert.equal(p.metadata.annotations?.[ANNOTATION_RESTORE_FROM_HIBERNATE], "true");
});

Deno.test("markKeepSnapshotOnDelete round-trips through readKeepSnapshotOnDelete", () => {
  const p = pod();
  assert.equal(readKeepSnapshotOnDelete(p), false);
  markKeepSnapshotOnDelete(p);
  assert.equal(readKeepSnapshotOnDelete(p), true);
  assert.equal(p.metadata.annotations?.[ANNOTATION_KEEP_SNAPSHOT_ON_DELETE], "true");
});

Deno.test("snapshot tag constants", () => {
  assert.equal(HIBERNATE_SNAPSHOT_TAG, "hibernate");
  assert.equal(DEFAULT_SNAPSHOT_TAG, "latest");
  assert.notEqual(DEFAULT_SNAPSHOT_TAG, HIBERNATE_SNAPSHOT_TAG);
});
