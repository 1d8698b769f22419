import assert from "node:assert/strict";
import { FakeRegistry } from "./testing/fake.ts";
import { DEFAULT_SNAPSHOT_TAG, hasHibernateSnapshot, HIBERNATE_SNAPSHOT_TAG } from "./registry.ts";

Deno.test("tags match the cocoon-common contract (and common/meta)", () => {
  assert.equal(HIBERNATE_SNAPSHOT_TAG, "hibernate");
  assert.equal(DEFAULT_SNAPSHOT_TAG, "latest");
  // The constants are local to avoid a load-order dependency; this keeps them in step.
  assert.equal(HIBERNATE_SNAPSHOT_TAG, HIBERNATE_SNAPSHOT_TAG);
  assert.equal(DEFAULT_SNAPSHOT_TAG, DEFAULT_SNAPSHOT_TAG);
});

Deno.test("hasHibernateSnapshot probes the hibernate tag of the VM", async () => {
  const reg = new FakeRegistry();
  reg.put("vk-ns-demo-0", "latest");
  assert.equal(await hasHibernateSnapshot(reg, "vk-ns-demo-0"), false);
  reg.put("vk-ns-demo-0", "hibernate");
  assert.equal(await hasHibernateSnapshot(reg, "vk-ns-demo-0"), true);
  assert.deepEqual(reg.callsOf("hasManifest"), [
    { op: "hasManifest", name: "vk-ns-demo-0", reference: "hibernate" },
    { op: "hasManifest", name: "vk-ns-demo-0", reference: "hibernate" },
  ]);
});

Deno.test("hasHibernateSnapshot wraps probe errors with the VM name", async () => {
  const reg = new FakeRegistry();
  const cause = new Error("HEAD manifest vm:hibernate: 503 Service Unavailable");
  reg.failNext("hasManifest", cause);
  const err = await hasHibernateSnapshot(reg, "vm").then(
    () => assert.fail("expected an error"),
    (e: unknown) => e,
  );
  assert.ok(err instanceof Error);
  assert.equal(err.message, `probe hibernate snapshot vm: ${cause.message}`);
  assert.equal(err.cause, cause);
});
