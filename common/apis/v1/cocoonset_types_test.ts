import assert from "node:assert/strict";
import type { CocoonSet, CocoonSetSpec } from "./cocoonset_types.ts";
import { CocoonHibernations, CocoonSets } from "./resources.ts";
import {
  API_VERSION,
  GROUP,
  KIND_COCOON_HIBERNATION,
  KIND_COCOON_SET,
  VERSION,
} from "./groupversion.ts";
import { apiVersionOf, resourceId } from "../../../kube/resource.ts";

Deno.test("snapshotCompatibilityClass is serialised when set and omitted when empty", () => {
  const spec: CocoonSetSpec = {
    agent: { image: "i" },
    snapshotCompatibilityClass: "n2-cascade-lake-v1",
  };
  assert.match(JSON.stringify(spec), /"snapshotCompatibilityClass":"n2-cascade-lake-v1"/);
  const empty: CocoonSetSpec = { agent: { image: "i" } };
  assert.doesNotMatch(JSON.stringify(empty), /snapshotCompatibilityClass/);
});

Deno.test("a CocoonSet is a plain JSON object that survives a JSON round trip", () => {
  const cs: CocoonSet = {
    apiVersion: API_VERSION,
    kind: KIND_COCOON_SET,
    metadata: { name: "demo", namespace: "ns" },
    spec: { agent: { image: "img", storage: "10Gi", replicas: 2 }, toolboxes: [{ name: "tb" }] },
    status: { phase: "Running", readyAgents: 3, desiredAgents: 3, conditions: [] },
  };
  assert.deepEqual(JSON.parse(JSON.stringify(cs)), cs);
});

Deno.test("group/version facts and resource descriptors", () => {
  assert.equal(GROUP, "cocoonset.cocoonstack.io");
  assert.equal(VERSION, "v1");
  assert.equal(API_VERSION, "cocoonset.cocoonstack.io/v1");
  assert.equal(apiVersionOf(CocoonSets), API_VERSION);
  assert.equal(resourceId(CocoonSets), "cocoonsets.cocoonset.cocoonstack.io");
  assert.equal(resourceId(CocoonHibernations), "cocoonhibernations.cocoonset.cocoonstack.io");
  assert.equal(CocoonSets.kind, KIND_COCOON_SET);
  assert.equal(CocoonHibernations.kind, KIND_COCOON_HIBERNATION);
  for (const rt of [CocoonSets, CocoonHibernations]) {
    assert.equal(rt.namespaced, true);
    assert.equal(rt.statusSubresource, true);
  }
});
