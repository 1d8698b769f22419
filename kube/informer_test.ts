import assert from "node:assert/strict";
import { FakeClient } from "./testing/fake.ts";
import { Pods } from "./core.ts";
import { SharedInformer } from "./informer.ts";
import { pod, recorder, withInformer } from "./testing/informer_fixtures.ts";
import { waitFor } from "./testing/wait.ts";

Deno.test("informer: initial list is delivered as initial adds, managedFields stripped", async () => {
  const fake = new FakeClient();
  await fake.create(Pods, pod("a"));
  await fake.create(Pods, pod("b"));
  await withInformer(fake, async (inf, seen) => {
    assert.deepEqual(seen, ["add*:a", "add*:b"]);
    assert.equal(inf.getStored("ns", "a")?.metadata.managedFields, undefined);
    await fake.create(Pods, pod("c"));
    await waitFor("c added", () => seen.includes("add:c"));
  });
});

Deno.test("informer: a throwing handler does not starve the others", async () => {
  const fake = new FakeClient();
  const inf = new SharedInformer({ client: fake, rt: Pods });
  inf.addEventHandler({
    onAdd: () => {
      throw new Error("bad handler");
    },
  });
  const rec = recorder();
  inf.addEventHandler(rec.handler);
  const ac = new AbortController();
  const run = inf.run(ac.signal);
  await fake.create(Pods, pod("a"));
  await waitFor("second handler ran", () => rec.seen.length === 1);
  ac.abort();
  await run;
});

Deno.test("informer: handlers added after sync get the current objects", async () => {
  const fake = new FakeClient();
  await fake.create(Pods, pod("a"));
  await withInformer(fake, (inf) => {
    const rec = recorder();
    inf.addEventHandler(rec.handler);
    assert.deepEqual(rec.seen, ["add*:a"]);
    return Promise.resolve();
  });
});

Deno.test("informer: a handler added by a handler mid-dispatch hears each object once", async () => {
  const fake = new FakeClient();
  await fake.create(Pods, pod("a"));
  const late = recorder();
  await withInformer(fake, async (inf) => {
    inf.addEventHandler({
      onAdd: (o) => {
        if (o.metadata.name === "trigger") inf.addEventHandler(late.handler);
      },
    });
    await fake.create(Pods, pod("trigger"));
    await waitFor("late handler registered", () => late.seen.length > 0);
    await fake.create(Pods, pod("after"));
    await waitFor("later event delivered", () => late.seen.includes("add:after"));
    // The late handler is replayed the store (which already holds "trigger") and must not
    // also receive the event that was being dispatched when it registered.
    assert.deepEqual(late.seen, ["add*:a", "add*:trigger", "add:after"]);
  });
});
