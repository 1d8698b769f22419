import assert from "node:assert/strict";
import { cocoonHibernationCRD, cocoonSetCRD } from "./crd.ts";
import type { JSONSchemaProps } from "./openapi.ts";
import * as e from "./enums.ts";

function at(schema: JSONSchemaProps, path: string): JSONSchemaProps {
  let node = schema;
  for (const part of path.split(".")) {
    const next = part === "[]" ? node.items : node.properties?.[part];
    assert.ok(next, `schema has no ${path} (stopped at ${part})`);
    node = next;
  }
  return node;
}

const csSchema = () => cocoonSetCRD().spec.versions[0].schema.openAPIV3Schema;
const chSchema = () => cocoonHibernationCRD().spec.versions[0].schema.openAPIV3Schema;

Deno.test("CocoonSet schema enums and defaults come from enums.ts", () => {
  const s = csSchema();
  for (const base of ["spec.agent", "spec.toolboxes.[]"]) {
    assert.deepEqual(at(s, `${base}.os`).enum, e.OS_TYPES);
    assert.equal(at(s, `${base}.os`).default, e.DEFAULT_OS_TYPE);
    assert.deepEqual(at(s, `${base}.backend`).enum, e.BACKENDS);
    assert.equal(at(s, `${base}.backend`).default, e.DEFAULT_BACKEND);
    assert.deepEqual(at(s, `${base}.connType`).enum, e.CONN_TYPES);
    assert.equal(at(s, `${base}.connType`).default, undefined);
    assert.equal(at(s, `${base}.storage`)["x-kubernetes-int-or-string"], true);
  }
  assert.deepEqual(at(s, "spec.agent.mode").enum, e.AGENT_MODES);
  assert.equal(at(s, "spec.agent.mode").default, "clone");
  assert.deepEqual(at(s, "spec.toolboxes.[].mode").enum, e.TOOLBOX_MODES);
  assert.equal(at(s, "spec.toolboxes.[].mode").default, "run");
  assert.equal(at(s, "spec.snapshotPolicy").default, "always");
  assert.equal(at(s, "spec.hibernatePolicy").default, "retain");
  assert.deepEqual(at(s, "status.phase").enum, e.COCOON_SET_PHASES);
  assert.deepEqual(at(s, "spec").required, ["agent"]);
});

Deno.test("CocoonHibernation podRef is immutable by CEL rule", () => {
  const podRef = at(chSchema(), "spec.podRef");
  assert.deepEqual(podRef["x-kubernetes-validations"], [
    { message: "spec.podRef is immutable", rule: "self == oldSelf" },
  ]);
  assert.deepEqual(at(chSchema(), "spec.desire").enum, e.HIBERNATION_DESIRES);
});

Deno.test("every CRD has a status subresource and the kubectl columns", () => {
  const cs = cocoonSetCRD();
  assert.deepEqual(cs.spec.versions[0].subresources, { status: {} });
  assert.deepEqual(cs.spec.versions[0].additionalPrinterColumns.map((c) => c.name), [
    "Phase",
    "Ready",
    "Desired",
    "Age",
  ]);
  assert.deepEqual(cs.spec.names.shortNames, ["cs", "cocoonsets"]);
  const ch = cocoonHibernationCRD();
  assert.deepEqual(ch.spec.versions[0].additionalPrinterColumns.map((c) => c.name), [
    "Pod",
    "Desire",
    "Phase",
    "Age",
  ]);
  assert.deepEqual(ch.spec.names.shortNames, ["ch", "cocoonhibernations"]);
});

Deno.test("CRD builders return independent copies", () => {
  const a = cocoonSetCRD();
  a.spec.versions[0].schema.openAPIV3Schema.properties!.spec.required!.push("x");
  assert.deepEqual(at(csSchema(), "spec").required, ["agent"]);
});
