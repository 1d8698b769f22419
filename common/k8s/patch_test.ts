import assert from "node:assert/strict";
import { annotationsMergePatch, annotationsMergePatchDroppingEmpty } from "./patch.ts";

Deno.test("annotationsMergePatch nests the map and keeps null for deletion", () => {
  const body = annotationsMergePatch({
    "vm.cocoonstack.io/hibernate": null,
    "vm.cocoonstack.io/name": "vk-demo-0",
  });
  const parsed = JSON.parse(JSON.stringify(body));
  assert.deepEqual(parsed, {
    metadata: {
      annotations: { "vm.cocoonstack.io/hibernate": null, "vm.cocoonstack.io/name": "vk-demo-0" },
    },
  });
});

Deno.test("annotationsMergePatchDroppingEmpty turns empty values into deletions", () => {
  assert.deepEqual(annotationsMergePatchDroppingEmpty({ a: "", b: "x" }), {
    metadata: { annotations: { a: null, b: "x" } },
  });
});
