import assert from "node:assert/strict";
import { FakeClient } from "./testing/fake.ts";
import { type Pod, Pods } from "./core.ts";
import { pod, withInformer } from "./testing/informer_fixtures.ts";
import { waitFor } from "./testing/wait.ts";
import { Store, type StoreChange } from "./store.ts";

Deno.test("informer: DELETED for an object it never stored is ignored", async () => {
  const fake = new FakeClient();
  await fake.create(Pods, pod("a"));
  const real = fake.watch.bind(fake);
  let first = true;
  fake.watch = ((rt, opts) => {
    if (!first) return real(rt, opts);
    first = false;
    return (async function* () {
      yield {
        type: "DELETED" as const,
        object: { ...pod("ghost"), apiVersion: "v1", kind: "Pod" },
      };
      yield* real(rt, opts);
    })();
  }) as typeof fake.watch;
  await withInformer(fake, async (inf, seen) => {
    await fake.create(Pods, pod("b"));
    await waitFor("later event", () => seen.includes("add:b"));
    assert.deepEqual(seen, ["add*:a", "add:b"]);
    assert.equal(inf.size, 2);
  });
});

/** Applies events to store, returning the changes as "add*:name" (initial), "update:", "delete:". */
function applyAll(store: Store<Pod>, ...events: Parameters<Store<Pod>["apply"]>[0][]): string[] {
  const changes: string[] = [];
  const show = (c: StoreChange<Pod>) =>
    `${c.type}${c.type === "add" && c.initial ? "*" : ""}:${c.object.metadata.name}`;
  for (const ev of events) store.apply(ev, (c) => changes.push(show(c)));
  return changes;
}

const at = (name: string, rv: string, labels: Record<string, string> = {}): Pod => ({
  ...pod(name, labels),
  metadata: { ...pod(name, labels).metadata, resourceVersion: rv },
});

Deno.test("store: a complete state replaces the stored one, reporting only the differences", () => {
  const store = new Store({ rt: Pods });
  assert.equal(store.hasSynced(), false);
  assert.deepEqual(
    applyAll(
      store,
      { type: "initStart" },
      { type: "initApply", object: at("a", "1") },
      { type: "initApply", object: at("b", "1") },
    ),
    [],
    "nothing is stored before the state is complete",
  );
  assert.equal(store.size, 0);
  assert.deepEqual(applyAll(store, { type: "initDone" }), ["add*:a", "add*:b"]);
  assert.equal(store.hasSynced(), true);
  assert.equal(store.get("ns", "a")?.metadata.managedFields, undefined, "stripped by default");
  const second = applyAll(
    store,
    { type: "initStart" },
    { type: "initApply", object: at("a", "1") },
    { type: "initApply", object: at("c", "2") },
    { type: "initDone" },
  );
  assert.deepEqual(second, ["delete:b", "add:c"], "unchanged a is not reported; c is not initial");
  assert.deepEqual([...store.list()].map((p) => p.metadata.name).sort(), ["a", "c"]);
});

Deno.test("store: an object a watch-list stream removed before its state was complete is never stored", () => {
  const store = new Store({ rt: Pods });
  const changes = applyAll(
    store,
    { type: "initStart" },
    { type: "initApply", object: at("a", "1") },
    { type: "initApply", object: at("gone", "2") },
    { type: "initDelete", object: at("gone", "3") },
    { type: "initDone" },
  );
  assert.deepEqual(changes, ["add*:a"]);
  assert.equal(store.get("ns", "gone"), undefined);
});

Deno.test("store: single changes keep the indexes right and skip an unchanged resourceVersion", () => {
  const seenByTransform: string[] = [];
  const store = new Store<Pod>({
    rt: Pods,
    transform: (p) => {
      seenByTransform.push(p.metadata.name!);
      return p;
    },
  });
  store.addIndex("app", (p) => p.metadata.labels?.app ? [p.metadata.labels.app] : []);
  assert.throws(() => store.addIndex("app", () => []), /already registered/);
  applyAll(store, { type: "initStart" }, { type: "initDone" });
  const names = (value: string) => store.byIndex("app", value).map((p) => p.metadata.name);
  assert.deepEqual(applyAll(store, { type: "apply", object: at("a", "1", { app: "x" }) }), [
    "add:a",
  ]);
  assert.deepEqual(names("x"), ["a"]);
  assert.deepEqual(applyAll(store, { type: "apply", object: at("a", "1", { app: "y" }) }), []);
  assert.deepEqual(names("x"), ["a"], "same resourceVersion: the stored object stays");
  assert.deepEqual(applyAll(store, { type: "apply", object: at("a", "2", { app: "y" }) }), [
    "update:a",
  ]);
  assert.deepEqual([names("x"), names("y")], [[], ["a"]]);
  assert.deepEqual(applyAll(store, { type: "delete", object: at("ghost", "3") }), []);
  assert.deepEqual(applyAll(store, { type: "delete", object: at("a", "4") }), ["delete:a"]);
  assert.deepEqual(names("y"), []);
  assert.deepEqual(seenByTransform, ["a", "a", "a", "a"], "an unknown deletion is not transformed");
  assert.throws(() => store.byIndex("nope", "x"), /no index/);
});

Deno.test("store: the namespace index follows adds, deletes and a replacing state", () => {
  const store = new Store({ rt: Pods });
  const inNs = (ns: string, rv = "1") => (name: string): Pod => ({
    ...at(name, rv),
    metadata: { ...at(name, rv).metadata, namespace: ns },
  });
  const names = (ns: string) => [...store.inNamespace(ns)].map((p) => p.metadata.name).sort();
  applyAll(
    store,
    { type: "initStart" },
    { type: "initApply", object: inNs("one")("a") },
    { type: "initApply", object: inNs("one")("b") },
    { type: "initApply", object: inNs("two")("a") },
    { type: "initDone" },
  );
  assert.deepEqual([names("one"), names("two"), names("three")], [["a", "b"], ["a"], []]);

  applyAll(
    store,
    { type: "apply", object: inNs("two", "2")("a") },
    { type: "apply", object: inNs("three")("c") },
    { type: "delete", object: inNs("one")("b") },
  );
  assert.deepEqual([names("one"), names("two"), names("three")], [["a"], ["a"], ["c"]]);
  assert.equal([...store.inNamespace("two")][0].metadata.resourceVersion, "2", "the stored copy");

  // A relist without namespace one: its objects leave the index with the store.
  applyAll(
    store,
    { type: "initStart" },
    { type: "initApply", object: inNs("two", "2")("a") },
    { type: "initApply", object: inNs("three")("c") },
    { type: "initDone" },
  );
  assert.deepEqual([names("one"), names("two"), names("three")], [[], ["a"], ["c"]]);
  assert.equal(store.size, 2);
});
