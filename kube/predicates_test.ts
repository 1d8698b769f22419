import assert from "node:assert/strict";
import type { KubeObject } from "./object.ts";
import {
  and,
  annotationChanged,
  funcs,
  generationChanged,
  labelChanged,
  newPredicateFuncs,
  not,
  or,
  resourceVersionChanged,
} from "./predicates.ts";

function obj(meta: Partial<KubeObject["metadata"]> = {}): KubeObject {
  return { metadata: { name: "x", namespace: "ns", ...meta } };
}

Deno.test("generationChanged ignores status-only updates and passes spec changes", () => {
  const p = generationChanged();
  const v1 = obj({ generation: 1, resourceVersion: "10" });
  const statusOnly = obj({ generation: 1, resourceVersion: "11" });
  const specChange = obj({ generation: 2, resourceVersion: "12" });
  assert.equal(p.update(v1, statusOnly), false);
  assert.equal(p.update(v1, specChange), true);
  assert.equal(p.create(v1), true);
  assert.equal(p.delete(v1), true);
  assert.equal(p.generic(v1), true);
});

Deno.test("annotationChanged and labelChanged compare maps, absent equals empty", () => {
  const a = annotationChanged();
  assert.equal(a.update(obj(), obj({ annotations: {} })), false);
  assert.equal(a.update(obj({ annotations: { k: "1" } }), obj({ annotations: { k: "1" } })), false);
  assert.equal(a.update(obj({ annotations: { k: "1" } }), obj({ annotations: { k: "2" } })), true);
  assert.equal(a.update(obj({ annotations: { k: "1" } }), obj()), true);
  assert.equal(a.update(obj({ annotations: { k: "" } }), obj({ annotations: { j: "" } })), true);
  assert.equal(a.update(obj({ labels: { l: "1" } }), obj({ labels: { l: "2" } })), false);

  const l = labelChanged();
  assert.equal(l.update(obj({ labels: { l: "1" } }), obj({ labels: { l: "2" } })), true);
  assert.equal(l.update(obj({ labels: { l: "1" } }), obj({ labels: { l: "1" } })), false);
});

Deno.test("resourceVersionChanged drops resync no-ops", () => {
  const p = resourceVersionChanged();
  assert.equal(p.update(obj({ resourceVersion: "5" }), obj({ resourceVersion: "5" })), false);
  assert.equal(p.update(obj({ resourceVersion: "5" }), obj({ resourceVersion: "6" })), true);
});

Deno.test("and / or / not combine per event; missing methods allow", () => {
  const rejectCreate = { create: () => false };
  const rejectAll = newPredicateFuncs(() => false);
  const o = obj({ generation: 1 });
  const o2 = obj({ generation: 2 });

  assert.equal(and(rejectCreate, {}).create(o), false);
  assert.equal(and(rejectCreate, {}).delete(o), true);
  assert.equal(and().update(o, o), true);
  assert.equal(and(generationChanged(), annotationChanged()).update(o, o2), false);

  // The hibernation controller's pod filter: annotation changes, creates and deletes.
  const podFilter = or(annotationChanged(), { create: () => true, delete: () => true });
  assert.equal(podFilter.update(o, o2), true, "Funcs without UpdateFunc allows updates");
  const strict = or(annotationChanged(), {
    create: () => true,
    update: () => false,
    delete: () => true,
  });
  assert.equal(strict.update(o, o2), false);
  assert.equal(strict.update(o, obj({ annotations: { a: "b" } })), true);
  assert.equal(or().create(o), false);
  assert.equal(or(rejectAll, rejectCreate).create(o), false);
  assert.equal(or(rejectAll, rejectCreate).delete(o), true);

  assert.equal(not(rejectCreate).create(o), true);
  assert.equal(not(rejectCreate).delete(o), false);
  assert.equal(not(generationChanged()).update(o, o2), false);
});

Deno.test("funcs and newPredicateFuncs fill in events", () => {
  const f = funcs({ generic: () => false });
  assert.equal(f.create(obj()), true);
  assert.equal(f.generic(obj()), false);
  const byName = newPredicateFuncs<KubeObject>((x) => x.metadata.name === "keep");
  assert.equal(byName.update(obj({ name: "drop" }), obj({ name: "keep" })), true);
  assert.equal(byName.create(obj({ name: "drop" })), false);
});

Deno.test("a predicate missing a method lets that event type through", () => {
  const onlyUpdate = { update: () => false };
  const o = obj({ generation: 1 });
  // funcs() and and() are what the controller applies to a watch's predicates.
  for (const p of [funcs(onlyUpdate), and(onlyUpdate)]) {
    assert.equal(p.update(o, o), false);
    assert.equal(p.create(o), true, "create passes");
    assert.equal(p.delete(o), true, "delete passes");
    assert.equal(p.generic(o), true, "generic passes");
  }
  // An empty predicate passes everything.
  const empty = funcs({});
  assert.deepEqual([empty.create(o), empty.update(o, o), empty.delete(o), empty.generic(o)], [
    true,
    true,
    true,
    true,
  ]);
});
